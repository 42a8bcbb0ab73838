"""Recording core/v1 Events the way Kubernetes' own controllers do, so ``kubectl describe`` stays readable.

Two layers, as in Karpenter:

1. **Dedupe** (Karpenter's recorder): an event with ``dedupe_values`` is dropped while one with the same
   reason and values was published less than ``dedupe_seconds`` ago (default two minutes).
2. **Correlation** (client-go's ``EventCorrelator``):
   - an *identical* event (same source, object, type, reason, message) updates the Event already written:
     ``count`` grows and ``lastTimestamp`` moves, instead of a new object;
   - *similar* events (same source, object, type, reason; different messages): once 10 different
     messages arrive within 10 minutes, later ones go into one Event whose message starts
     ``(combined from similar events):``;
   - a token bucket per source + object (burst 25, one more every 5 minutes) drops the rest.

The state lives at module scope, one per cluster (:func:`shared_correlator`), in bounded LRU caches of
4,096 entries each, so a Lambda environment keeps it across invocations. Writing an event never raises: a
failure is logged and counted (``EventsNotRecorded``), and the pass goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from fleetwright.kube.client import JsonObject, KubeClient
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import EVENTS, NODE_CLAIMS, NODE_POOLS, Resource

NORMAL = "Normal"
WARNING = "Warning"
COMPONENT = "fleetwright"

CACHE_ENTRIES = 4096
SPAM_BURST = 25
SPAM_REFILL_PER_SECOND = 1.0 / 300.0
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
AGGREGATE_PREFIX = "(combined from similar events): "
DEDUPE_SECONDS = 120.0
# Karpenter's limiter for Nominated events, across pods: 5 a second, bursts of 10.
NOMINATION_LIMITER = "nomination"
NOMINATION_BURST = 10
NOMINATION_PER_SECOND = 5.0
# After a failed write, later events are dropped (and counted) for this long: an API that refuses
# events must not make every pass wait on retries.
PAUSE_AFTER_FAILURE_SECONDS = 30.0
MESSAGE_LIMIT = 1024  # the API server refuses longer messages

# Metric: an event that could not be written (dimension Reason).
EVENTS_NOT_RECORDED = "EventsNotRecorded"

log = logging.getLogger("fleetwright.events")

# Kinds whose uid the recorder looks up when an event names them without one: ``kubectl describe``
# finds events by the object's uid.
_LOOKED_UP: dict[str, Resource] = {"NodeClaim": NODE_CLAIMS, "NodePool": NODE_POOLS}

K = TypeVar("K")
V = TypeVar("V")


class Metrics(Protocol):
    """Where the recorder counts failures (the provisioner's ``MetricsSink`` fits)."""

    def add(
        self, name: str, value: float, unit: str = "Count", dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Record one data point."""
        ...


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about (``involvedObject``)."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, kind: str = "", api_version: str = "") -> ObjectRef:
        """The reference to a Kubernetes object as read from the API (``kind``/``api_version`` fill in
        what a listed item may lack)."""
        meta = obj.get("metadata") or {}
        return cls(
            kind=str(obj.get("kind") or kind),
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=str(obj.get("apiVersion") or api_version or "v1"),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def to_json(self) -> JsonObject:
        """``involvedObject`` (empty fields left out)."""
        fields = (
            ("apiVersion", self.api_version),
            ("kind", self.kind),
            ("name", self.name),
            ("namespace", self.namespace),
            ("uid", self.uid),
            ("resourceVersion", self.resource_version),
        )
        return {key: value for key, value in fields if value}

    @property
    def event_namespace(self) -> str:
        """Events of cluster-scoped objects go to ``default``, as Kubernetes' recorders do."""
        return self.namespace or "default"


@dataclass(frozen=True, slots=True)
class Event:
    """One event to publish. ``dedupe_values`` (with the reason) name it for Karpenter's dedupe: None or
    empty means no dedupe, only client-go's correlation. ``limiter`` names a rate limiter shared by
    every event that names it (:data:`NOMINATION_LIMITER`)."""

    involved: ObjectRef
    reason: str
    message: str
    type: str = NORMAL
    dedupe_values: tuple[str, ...] = ()
    dedupe_seconds: float = DEDUPE_SECONDS
    limiter: str = ""

    @property
    def dedupe_key(self) -> str:
        """Reason (lower case) and dedupe values, as Karpenter keys it."""
        return "-".join([self.reason.lower(), *self.dedupe_values])


class Lru(Generic[K, V]):
    """A bounded least-recently-used map (the caches must not grow with a long-lived Lambda)."""

    def __init__(self, size: int = CACHE_ENTRIES) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value (marking it recently used), or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Store, evicting the least recently used entry beyond ``size``."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(slots=True)
class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second."""

    burst: int
    rate: float
    tokens: float
    last: float

    def try_accept(self, now: float) -> bool:
        """Take a token if one is there."""
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(slots=True)
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(slots=True)
class _Written:
    name: str
    count: int
    first_timestamp: str


@dataclass(frozen=True, slots=True)
class Correlation:
    """What to write: ``event`` (a complete Event body), and ``patch`` when it updates an existing one
    (then ``event`` carries its name); ``skip`` when the spam filter dropped it."""

    event: JsonObject
    key: str
    patch: JsonObject | None = None
    skip: bool = False


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _source_object(body: Mapping[str, Any]) -> list[str]:
    obj = body.get("involvedObject") or {}
    source = body.get("source") or {}
    return [
        str(source.get("component") or ""),
        str(source.get("host") or ""),
        str(obj.get("kind") or ""),
        str(obj.get("namespace") or ""),
        str(obj.get("name") or ""),
        str(obj.get("uid") or ""),
        str(obj.get("apiVersion") or ""),
    ]


class _Suffixes:
    """Strictly increasing nanosecond stamps (two events in one clock tick still get distinct names)."""

    def __init__(self) -> None:
        self.last = 0
        self.lock = threading.Lock()

    def next(self) -> int:
        with self.lock:
            self.last = max(time.time_ns(), self.last + 1)
            return self.last


_SUFFIXES = _Suffixes()


def event_name(object_name: str) -> str:
    """``<object>.<hex nanoseconds>`` as client-go names Events, unique within the process."""
    return f"{object_name}.{_SUFFIXES.next():x}"


def event_key(body: Mapping[str, Any]) -> str:
    """Identical events share this key: source, object, type, reason and message."""
    parts = [*_source_object(body), str(body.get("type")), str(body.get("reason")), str(body.get("message"))]
    return "\x00".join(parts)


def spam_key(body: Mapping[str, Any]) -> str:
    """The spam filter's bucket: source and object."""
    return "\x00".join(_source_object(body))


def aggregate_key(body: Mapping[str, Any]) -> str:
    """Similar events share this key: source, object, type and reason."""
    return "\x00".join([*_source_object(body), str(body.get("type")), str(body.get("reason"))])


class EventCorrelator:
    """client-go's correlation: aggregation of similar events, counting of identical ones, spam filter.

    Thread-safe (a provisioner's launches record from a pool of threads). ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        size: int = CACHE_ENTRIES,
        burst: int = SPAM_BURST,
        refill_per_second: float = SPAM_REFILL_PER_SECOND,
        aggregate_max: int = AGGREGATE_MAX_EVENTS,
        aggregate_seconds: float = AGGREGATE_INTERVAL_SECONDS,
    ) -> None:
        self.clock = clock
        self.burst = burst
        self.refill = refill_per_second
        self.aggregate_max = aggregate_max
        self.aggregate_seconds = aggregate_seconds
        self._lock = threading.Lock()
        self._buckets: Lru[str, TokenBucket] = Lru(size)
        self._aggregates: Lru[str, _Aggregate] = Lru(size)
        self._written: Lru[str, _Written] = Lru(size)
        self._dedupe: Lru[str, float] = Lru(size)
        self._limiters: dict[str, TokenBucket] = {}

    def fresh(self, event: Event) -> bool:
        """Karpenter's dedupe and rate limit: False while an event with the same key was published within
        its window, or when its limiter has no token left."""
        now = self.clock()
        with self._lock:
            if event.dedupe_values:
                until = self._dedupe.get(event.dedupe_key)
                if until is not None and now < until:
                    return False
                self._dedupe.put(event.dedupe_key, now + event.dedupe_seconds)
            if event.limiter:
                bucket = self._limiters.get(event.limiter)
                if bucket is None:
                    bucket = TokenBucket(NOMINATION_BURST, NOMINATION_PER_SECOND, NOMINATION_BURST, now)
                    self._limiters[event.limiter] = bucket
                return bucket.try_accept(now)
        return True

    def correlate(self, body: JsonObject) -> Correlation:
        """Aggregate, count, filter ``body`` (a new Event, count 1)."""
        now = self.clock()
        with self._lock:
            key = event_key(body)
            group = aggregate_key(body)
            record = self._aggregates.get(group)
            if record is None or now - record.last > self.aggregate_seconds:
                record = _Aggregate()
            record.messages.add(str(body.get("message")))
            record.last = now
            self._aggregates.put(group, record)
            if len(record.messages) >= self.aggregate_max:
                record.messages.pop()  # the set stays at the threshold
                name = event_name(str(body["involvedObject"].get("name")))
                message = (AGGREGATE_PREFIX + str(body.get("message")))[:MESSAGE_LIMIT]
                body = {**body, "metadata": {**body["metadata"], "name": name}, "message": message}
                key = group
            seen = self._written.get(key)
            patch: JsonObject | None = None
            if seen is not None:
                count = seen.count + 1
                body = {
                    **body,
                    "metadata": {**body["metadata"], "name": seen.name},
                    "count": count,
                    "firstTimestamp": seen.first_timestamp,
                }
                patch = {"count": count, "lastTimestamp": body["lastTimestamp"], "message": body["message"]}
                seen.count = count
            else:
                self._written.put(
                    key, _Written(body["metadata"]["name"], int(body.get("count", 1)), body["firstTimestamp"])
                )
            bucket = self._buckets.get(spam_key(body))
            if bucket is None:
                bucket = TokenBucket(self.burst, self.refill, float(self.burst), now)
                self._buckets.put(spam_key(body), bucket)
            if not bucket.try_accept(now):
                return Correlation(body, key, skip=True)
        return Correlation(body, key, patch)

    def written(self, key: str, stored: Mapping[str, Any]) -> None:
        """Remember the Event as the server stored it (its name and count) for the next identical one."""
        meta = stored.get("metadata") or {}
        with self._lock:
            self._written.put(
                key,
                _Written(
                    str(meta.get("name") or ""),
                    int(stored.get("count") or 1),
                    str(stored.get("firstTimestamp") or ""),
                ),
            )


_SHARED: Lru[str, EventCorrelator] = Lru(16)
_SHARED_LOCK = threading.Lock()


def shared_correlator(cluster: str = "") -> EventCorrelator:
    """The process-wide correlator of ``cluster`` (its API server URL), kept across a warm Lambda's
    invocations: what was recorded about one cluster's objects says nothing about another's."""
    with _SHARED_LOCK:
        found = _SHARED.get(cluster)
        if found is None:
            found = EventCorrelator()
            _SHARED.put(cluster, found)
        return found


def _endpoint(client: Any) -> str:
    """The API server a client talks to ("" when it does not say)."""
    for holder, attribute in (("configuration", "host"), ("config", "server")):
        value = getattr(getattr(client, holder, None), attribute, None)
        if isinstance(value, str) and value:
            return value
    return ""


class EventRecorder:
    """Publishes :class:`Event` objects through ``client`` (POST new Events, PATCH counted ones).

    ``correlator`` defaults to the process-wide one. Errors never propagate: each failed write is logged
    and counted as ``EventsNotRecorded`` (dimension ``Reason``) on ``metrics``.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str = COMPONENT,
        correlator: EventCorrelator | None = None,
        metrics: Metrics | None = None,
        logger: logging.Logger | Any = None,
    ) -> None:
        self.client = client
        self.component = component
        self.correlator = correlator or shared_correlator(_endpoint(client))
        self.metrics = metrics
        self.log = logger or log
        self._paused_until = 0.0
        self._uids: Lru[tuple[str, str], str] = Lru(CACHE_ENTRIES)

    def publish(self, *events: Event) -> None:
        """Publish each event (deduped, correlated); never raises."""
        for event in events:
            if self.correlator.clock() < self._paused_until:
                self._count_lost(event)
                continue
            try:
                self._publish(event)
            except Exception as error:  # recording must never break the caller's pass
                self._paused_until = self.correlator.clock() + PAUSE_AFTER_FAILURE_SECONDS
                self._failed(event, error)

    def record(self, event: Event) -> Exception | None:
        """Write ``event`` now, past the dedupe window and the pause after a failure, for a caller that
        retries until it is written (the termination workflow's failure path): None once the server has it
        (or the spam filter dropped it), else the error, logged and counted, never raised."""
        try:
            if event.involved.name:
                event = self._with_uid(event)
                self._write(event, self.correlator.correlate(self.body(event)))
        except Exception as error:  # the caller decides whether to try again
            self._paused_until = self.correlator.clock() + PAUSE_AFTER_FAILURE_SECONDS
            self._failed(event, error)
            return error
        return None

    def event(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        type: str = NORMAL,
        kind: str = "",
        api_version: str = "",
        dedupe: Iterable[str] = (),
        dedupe_seconds: float = DEDUPE_SECONDS,
    ) -> None:
        """Publish one event about ``obj`` (an object read from the API)."""
        self.publish(
            Event(
                ObjectRef.of(obj, kind=kind, api_version=api_version),
                reason,
                message,
                type,
                tuple(dedupe),
                dedupe_seconds,
            )
        )

    def body(self, event: Event) -> JsonObject:
        """The core/v1 Event for ``event``, count 1, stamped now."""
        now = self.correlator.clock()
        stamp = _timestamp(now)
        ref = event.involved
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(ref.name), "namespace": ref.event_namespace},
            "involvedObject": ref.to_json(),
            "reason": event.reason,
            "message": event.message[:MESSAGE_LIMIT],
            "type": event.type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    def _with_uid(self, event: Event) -> Event:
        """``event`` naming its object's uid, looked up for the kinds that need it (unchanged when the
        object does not exist, its kind is not served, or the caller may not read it: an event without the
        uid is better than none)."""
        ref = event.involved
        resource = _LOOKED_UP.get(ref.kind)
        if ref.uid or resource is None:
            return event
        uid = self._uids.get((ref.kind, ref.name))
        if uid is None:
            try:
                uid = self._look_up(resource, ref)
            except KubeApiError as error:
                if error.not_found or error.status == 403:
                    return event
                raise
        if not uid:
            return event
        return Event(
            ObjectRef(ref.kind, ref.name, ref.namespace, uid, ref.api_version),
            event.reason,
            event.message,
            event.type,
            event.dedupe_values,
            event.dedupe_seconds,
            event.limiter,
        )

    def _look_up(self, resource: Resource, ref: ObjectRef) -> str:
        """The uid of ``ref`` ("" when it has none). NodePools are listed, all at once (every function that
        writes events about them may list them, not get them); NodeClaims are read one by one."""
        if resource is NODE_POOLS:
            for item in self.client.list(NODE_POOLS).items:
                meta = item.get("metadata") or {}
                self._uids.put((ref.kind, str(meta.get("name") or "")), str(meta.get("uid") or ""))
            return self._uids.get((ref.kind, ref.name)) or ""
        found = self.client.get(resource, ref.name)
        uid = str((found.get("metadata") or {}).get("uid") or "")
        self._uids.put((ref.kind, ref.name), uid)
        return uid

    def _publish(self, event: Event) -> None:
        if not event.involved.name or not self.correlator.fresh(event):
            return
        event = self._with_uid(event)
        self._write(event, self.correlator.correlate(self.body(event)))

    def _write(self, event: Event, result: Correlation) -> None:
        if result.skip:
            return
        namespace = result.event["metadata"]["namespace"]
        if result.patch is not None:
            try:
                stored = self.client.patch(EVENTS, result.event["metadata"]["name"], result.patch, namespace)
                self.correlator.written(result.key, stored)
                return
            except KubeApiError as error:
                if not error.not_found:
                    raise
            # The Event expired or was deleted: write it anew, counting from one again.
            fresh = dict(result.event)
            fresh["metadata"] = {**fresh["metadata"], "name": event_name(event.involved.name)}
            fresh["count"] = 1
            fresh["firstTimestamp"] = fresh["lastTimestamp"]
            stored = self.client.create(EVENTS, fresh, namespace)
        else:
            stored = self.client.create(EVENTS, result.event, namespace)
        self.correlator.written(result.key, stored)

    def _failed(self, event: Event, error: Exception) -> None:
        text = f"{type(error).__name__}: {error}"
        self._count_lost(event)
        self.log.warning(
            "event not recorded; events paused",
            extra={
                "reason": event.reason,
                "object": f"{event.involved.kind}/{event.involved.name}",
                "error": text[:500],
                "pauseSeconds": PAUSE_AFTER_FAILURE_SECONDS,
            },
        )

    def _count_lost(self, event: Event) -> None:
        if self.metrics is not None:
            try:
                self.metrics.add(EVENTS_NOT_RECORDED, 1, "Count", {"Reason": event.reason})
            except Exception:  # a broken metrics sink must not break the caller either
                self.log.debug("cannot count an unrecorded event", exc_info=True)
