"""The emulator's thread-safe object store: API semantics (metadata bookkeeping, optimistic concurrency,
graceful deletion, finalizers, owner cascades) plus a change feed for watches and in-process controllers.

Every object handed in or out by ``get``, ``list`` and the writes is a deep copy, so callers may mutate
what they get. A stored version is never changed in place (a write stores a new one), so LIST snapshots,
watch events and the cached JSON of each version can share it: ``list_page`` and ``WatchEvent`` hand out
those shared versions, to be read only.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
import uuid
from bisect import bisect_left, insort
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fleetwright.local.apiserver import crds, errors
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.jsoncopy import json_copy
from fleetwright.local.apiserver.paging import LATEST, ContinueToken, Key, Page, Snapshot, expired, read_page
from fleetwright.local.apiserver.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    NAMESPACES,
    PODS,
    Registry,
    ResourceType,
)
from fleetwright.local.apiserver.selectors import FieldSelector, LabelSelector, selector_from_object

JsonObject = dict[str, Any]
GracefulDeletion = Literal["immediate", "timed"]

log = logging.getLogger(__name__)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class WatchEvent:
    """One change: ``type`` is ADDED, MODIFIED or DELETED; ``old`` is the previous state (None on ADDED).

    ``object`` and ``old`` are the stored versions, shared with every watcher and subscriber: read them,
    do not change them. ``encoded`` caches the JSON of ``object`` per apiVersion, so many watchers
    serialize it once."""

    type: str
    resource: ResourceType
    object: JsonObject
    old: JsonObject | None
    resource_version: int
    encoded: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Subscription:
    """Handle returned by ``Store.subscribe``; ``cancel()`` stops delivery."""

    store: Store
    callback: Callable[[WatchEvent], None] | None
    resources: frozenset[str] | None
    batch_callback: Callable[[list[WatchEvent]], None] | None = None

    def cancel(self) -> None:
        """Stop delivering events to the callback."""
        self.store._unsubscribe(self)


@dataclass
class Watch:
    """A live event stream for one resource type, filtered by namespace and selectors."""

    resource: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    events: queue.Queue[WatchEvent] = field(default_factory=queue.Queue)
    closed: bool = False
    initial: int = 0  # how many of the first events replay the state the watch started from
    opened_at: int = 0  # the resourceVersion it started from

    def offer(self, event: WatchEvent) -> None:
        """Queue ``event`` translated for this watch's filter (a drop out of the filter reads as DELETED)."""
        translated = self._translate(event)
        if translated is not None:
            self.events.put(translated)

    def _matches(self, obj: JsonObject | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj.get("metadata", {}).get("namespace") != self.namespace:
            return False
        return self.labels.matches(obj.get("metadata", {}).get("labels")) and self.fields.matches(obj)

    def _translate(self, event: WatchEvent) -> WatchEvent | None:
        if event.resource.key != self.resource.key:
            return None
        now, before = self._matches(event.object), self._matches(event.old)
        if event.type == "MODIFIED" and now and not before:
            return WatchEvent(
                "ADDED", event.resource, event.object, None, event.resource_version, event.encoded
            )
        if event.type == "MODIFIED" and before and not now:
            return WatchEvent(
                "DELETED", event.resource, event.object, event.old, event.resource_version, event.encoded
            )
        return event if now else None

    def next(self, timeout: float) -> WatchEvent | None:
        """The next event, or None when none arrives within ``timeout`` seconds."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None


def rfc3339(epoch: float) -> str:
    """Kubernetes timestamp format (second precision, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    """Inverse of ``rfc3339``."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _meta(obj: JsonObject) -> JsonObject:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


class Store:
    """In-memory objects keyed by resource type, namespace and name, with a global resourceVersion.

    ``graceful_deletion``: ``"immediate"`` removes a pod deleted with a grace period right after marking it
    (a MODIFIED event with ``deletionTimestamp``, then DELETED); ``"timed"`` keeps it until the grace period
    has passed, like a kubelet that takes the whole period to stop it.
    ``watch_history``: how many past events a watch can resume from before it gets 410 Gone.
    ``list_snapshots``: how many paged LISTs can be continued at once; an older continue token gets 410
    Expired, as one older than etcd's compaction does.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        graceful_deletion: GracefulDeletion = "immediate",
        watch_history: int = 10_000,
        clock: Callable[[], float] = time.time,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        list_snapshots: int = 8,
    ) -> None:
        self.registry = registry or Registry()
        self.graceful_deletion = graceful_deletion
        self.clock = clock
        self._lock = threading.RLock()
        self._local = threading.local()
        self._objects: dict[str, dict[tuple[str, str], JsonObject]] = {t.key: {} for t in self.registry.types}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=max(1, watch_history))
        self._compacted = 0
        self._watches: list[Watch] = []
        self._subscriptions: list[Subscription] = []
        self._timers: list[threading.Timer] = []
        # Derived from _objects, kept by _put and _pop: sorted keys (None: sort on next use), the JSON
        # of stored versions, pods by spec.nodeName (the real server's one field index) and the
        # objects naming each owner uid (so a cascade does not scan every object).
        self._keys: dict[str, list[Key] | None] = {}
        self._encoded: dict[str, dict[Key, tuple[JsonObject, bytes]]] = {}
        self._pods_by_node: dict[str, set[Key]] = {}
        self._dependents: dict[str, set[tuple[str, Key]]] = {}
        self._snapshots: OrderedDict[tuple[str, int, tuple[str, str] | None], Snapshot] = OrderedDict()
        self._max_snapshots = max(1, list_snapshots)
        for name in namespaces:
            self.create(NAMESPACES, {"metadata": {"name": name}})

    # -- transactions and the change feed -------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store lock across several calls; subscribers hear of the changes once it is released."""
        self._lock.acquire()
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            self._local.pending = []
        try:
            yield
        finally:
            self._local.depth = depth
            pending: list[WatchEvent] = self._local.pending if depth == 0 else []
            self._lock.release()
            if pending:
                self._deliver(pending)

    def subscribe(
        self, callback: Callable[[WatchEvent], None], resources: Iterable[ResourceType] | None = None
    ) -> Subscription:
        """Call ``callback`` after every committed change (of ``resources``, or of all types).

        Callbacks run synchronously in the thread that made the change, after the store lock is released,
        so they may read and write the store. Write level-triggered callbacks: under concurrent writers
        they can see events of different objects in any order.
        """
        keys = frozenset(r.key for r in resources) if resources is not None else None
        sub = Subscription(self, callback, keys)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    def subscribe_batches(
        self, callback: Callable[[list[WatchEvent]], None], resources: Iterable[ResourceType] | None = None
    ) -> Subscription:
        """Like ``subscribe``, but ``callback`` gets the matching events of one committed write (or of one
        whole ``transaction()``) in a single call, so a level-triggered reconcile runs once per batch."""
        keys = frozenset(r.key for r in resources) if resources is not None else None
        sub = Subscription(self, None, keys, callback)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subscriptions:
                self._subscriptions.remove(sub)

    def _deliver(self, events: list[WatchEvent]) -> None:
        with self._lock:
            subscriptions = list(self._subscriptions)
        for event in events:
            for sub in subscriptions:
                if sub.callback is not None and (
                    sub.resources is None or event.resource.key in sub.resources
                ):
                    try:
                        sub.callback(event)
                    except Exception:
                        log.exception("subscriber failed on %s %s", event.type, event.resource.key)
        for sub in subscriptions:
            if sub.batch_callback is None:
                continue
            matching = [e for e in events if sub.resources is None or e.resource.key in sub.resources]
            if matching:
                try:
                    sub.batch_callback(matching)
                except Exception:
                    log.exception("subscriber failed on a batch of %d events", len(matching))

    def _emit(self, kind: str, rt: ResourceType, obj: JsonObject, old: JsonObject | None) -> None:
        event = WatchEvent(kind, rt, obj, old, self._rv)
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].resource_version
        self._history.append(event)
        for watch in self._watches:
            watch.offer(event)
        self._local.pending.append(event)
        if rt.key == CUSTOM_RESOURCE_DEFINITIONS.key:
            self._follow_definition(kind, obj)
        elif rt.custom and kind == "DELETED":
            self._finish_cleanup(rt.key)

    # -- custom resources --------------------------------------------------------------------------

    def _follow_definition(self, kind: str, crd: JsonObject) -> None:
        """Serve what a CRD defines, report it established, and empty it when it is being deleted; runs
        under the lock right after each change of a CRD."""
        key = crds.resource_key(crd)
        if kind == "DELETED":
            self.registry.remove(key)
            self._objects.pop(key, None)
            self._keys.pop(key, None)
            self._encoded.pop(key, None)
            return
        current = self._bucket(CUSTOM_RESOURCE_DEFINITIONS).get(("", crd["metadata"]["name"]))
        if current is None:
            return
        self.registry.add(key, crds.served_types(current))
        status = crds.accepted_status(current, rfc3339(self.clock()))
        if status != current.get("status"):
            self._replace(CUSTOM_RESOURCE_DEFINITIONS, current, {**current, "status": status}, "status")
            return  # the status write comes back here
        if current["metadata"].get("deletionTimestamp"):
            rt = self.registry.find(key)
            for obj in list(self._objects.get(key, {}).values()):
                if rt is not None and not obj["metadata"].get("deletionTimestamp"):
                    self.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            self._finish_cleanup(key)

    def _finish_cleanup(self, key: str) -> None:
        """Let a deleted CRD go once the last of its objects has."""
        crd = self._bucket(CUSTOM_RESOURCE_DEFINITIONS).get(("", key))
        if crd is None or not crd["metadata"].get("deletionTimestamp") or self._objects.get(key):
            return
        finalizers = crd["metadata"].get("finalizers") or []
        if crds.CLEANUP_FINALIZER in finalizers:
            updated = json_copy(crd)
            updated["metadata"]["finalizers"] = [f for f in finalizers if f != crds.CLEANUP_FINALIZER]
            self._replace(CUSTOM_RESOURCE_DEFINITIONS, crd, updated, None)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        with self._lock:
            return self._rv

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older resourceVersions get 410 Gone."""
        with self._lock:
            self._history.clear()
            self._compacted = self._rv
            self._snapshots.clear()

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        since: int | None = None,
    ) -> Watch:
        """Open a watch. ``since`` None or 0 replays current objects as ADDED; a resourceVersion replays the
        history after it (410 ``ApiError`` when compacted away). Close it with ``close_watch``."""
        w = Watch(rt, namespace, labels or LabelSelector(), fields or FieldSelector())
        with self._lock:
            w.opened_at = self._rv
            if not since:
                for obj in self._sorted(rt):
                    w.offer(WatchEvent("ADDED", rt, obj, None, self._rv))
                w.initial = w.events.qsize()
            elif since < self._compacted:
                raise errors.gone(f"too old resource version: {since} ({self._compacted + 1})")
            else:
                for event in self._history:
                    if event.resource_version > since:
                        w.offer(event)
            self._watches.append(w)
        return w

    def bookmark_version(self, w: Watch) -> int | None:
        """The resourceVersion a bookmark on ``w`` may carry: the latest, once ``w`` has no event
        queued (every event up to it has then been delivered or filtered out); None while it has."""
        with self._lock:
            return self._rv if w.events.empty() else None

    def close_watch(self, w: Watch) -> None:
        """Stop feeding ``w``."""
        with self._lock:
            w.closed = True
            if w in self._watches:
                self._watches.remove(w)

    # -- reads -----------------------------------------------------------------------------------------

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], JsonObject]:
        return self._objects.setdefault(rt.key, {})

    def _sorted_keys(self, rt: ResourceType) -> list[Key]:
        keys = self._keys.get(rt.key)
        if keys is None:
            keys = self._keys[rt.key] = sorted(self._bucket(rt))
        return keys

    def _sorted(self, rt: ResourceType) -> list[JsonObject]:
        bucket = self._bucket(rt)
        return [bucket[k] for k in self._sorted_keys(rt)]

    def _put(self, rt: ResourceType, key: Key, obj: JsonObject) -> None:
        """Store ``obj`` (a new version, never changed afterwards) under ``key``, keeping the indexes."""
        bucket = self._bucket(rt)
        previous = bucket.get(key)
        bucket[key] = obj
        if previous is None:
            keys = self._keys.get(rt.key)
            if keys is not None:
                insort(keys, key)
        else:
            self._unindex(rt, key, previous)
        self._index(rt, key, obj)

    def _pop(self, rt: ResourceType, key: Key) -> JsonObject | None:
        obj = self._bucket(rt).pop(key, None)
        if obj is None:
            return None
        keys = self._keys.get(rt.key)
        if keys is not None:
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                del keys[i]
        self._unindex(rt, key, obj)
        return obj

    def _index(self, rt: ResourceType, key: Key, obj: JsonObject) -> None:
        if rt.key == PODS.key:
            node = obj.get("spec", {}).get("nodeName")
            if node:
                self._pods_by_node.setdefault(str(node), set()).add(key)
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("uid"):
                self._dependents.setdefault(str(ref["uid"]), set()).add((rt.key, key))

    def _unindex(self, rt: ResourceType, key: Key, obj: JsonObject) -> None:
        self._encoded.get(rt.key, {}).pop(key, None)
        if rt.key == PODS.key:
            node = obj.get("spec", {}).get("nodeName")
            on_node = self._pods_by_node.get(str(node)) if node else None
            if on_node is not None:
                on_node.discard(key)
                if not on_node:
                    del self._pods_by_node[str(node)]
        for ref in obj["metadata"].get("ownerReferences") or ():
            dependents = self._dependents.get(str(ref.get("uid")))
            if dependents is not None:
                dependents.discard((rt.key, key))
                if not dependents:
                    del self._dependents[str(ref.get("uid"))]

    def encoded(self, rt: ResourceType, obj: JsonObject) -> bytes:
        """The JSON of ``obj``, serialized once per stored version (others are serialized each time)."""
        meta = obj.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        cache = self._encoded.get(rt.key)
        cached = cache.get(key) if cache is not None else None
        if cached is not None and cached[0] is obj:
            return cached[1]
        data = json.dumps(obj, separators=(",", ":")).encode()
        if self._objects.get(rt.key, {}).get(key) is obj:  # the current version: worth keeping
            self._encoded.setdefault(rt.key, {})[key] = (obj, data)
        return data

    def _find(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        key = ((namespace or "") if rt.namespaced else "", name)
        obj = self._bucket(rt).get(key)
        if obj is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return obj

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        """The object, or a 404 ``ApiError``."""
        with self._lock:
            return json_copy(self._find(rt, namespace, name))

    def try_get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject | None:
        """The object, or None."""
        try:
            return self.get(rt, namespace, name)
        except ApiError:
            return None

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> tuple[list[JsonObject], int]:
        """Matching objects sorted by namespace and name, and the resourceVersion they were read at."""
        page = self.list_page(rt, namespace, labels, fields)
        return [json_copy(o) for o in page.items], page.resource_version

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        limit: int = 0,
        token: ContinueToken | None = None,
    ) -> Page:
        """One LIST page (``limit`` 0: everything) of the stored versions, read only; ``token`` continues
        a paged LIST at its first page's resourceVersion (410 Expired when that snapshot is gone).

        Pods selected by ``spec.nodeName=X`` come from the node index, a namespace from its key range;
        the other selectors are checked object by object, as the real server does."""
        labels = labels or LabelSelector()
        fields = fields or FieldSelector()
        node = next(
            (value for name, equal, value in fields.terms if name == "spec.nodeName" and equal and value),
            None,
        )
        scope: tuple[str, str] | None = None
        if rt.key == PODS.key and node is not None:
            scope = ("spec.nodeName", node)
        elif namespace is not None:
            scope = ("namespace", namespace)
        with self._lock:
            if token is None or token.resource_version in (LATEST, self._rv):
                snapshot = self._snapshots.get((rt.key, self._rv, scope)) or self._snapshot(rt, scope)
            else:
                found = self._snapshots.get((rt.key, token.resource_version, scope))
                if found is None or token.resource_version < self._compacted:
                    raise expired(token.start)
                snapshot = found
        in_namespace = namespace if scope is None or scope[0] != "namespace" else None
        matches = _matcher(in_namespace, labels, fields)
        page = read_page(snapshot, matches, limit, token.start if token is not None else None)
        if page.next is not None:
            with self._lock:
                cache_key = (rt.key, snapshot.resource_version, scope)
                self._snapshots[cache_key] = snapshot
                self._snapshots.move_to_end(cache_key)
                while len(self._snapshots) > self._max_snapshots:
                    self._snapshots.popitem(last=False)
        return page

    def _snapshot(self, rt: ResourceType, scope: tuple[str, str] | None) -> Snapshot:
        """The objects ``scope`` narrows a LIST to, as they are now (under the lock)."""
        bucket = self._bucket(rt)
        if scope is None:
            return Snapshot(self._rv, list(self._sorted_keys(rt)), dict(bucket))
        if scope[0] == "spec.nodeName":
            keys = sorted(self._pods_by_node.get(scope[1], ()))
        else:
            every = self._sorted_keys(rt)
            lo = bisect_left(every, (scope[1], ""))
            keys = every[lo : bisect_left(every, (scope[1] + "\0", ""), lo)]
        return Snapshot(self._rv, keys, {k: bucket[k] for k in keys})

    # -- writes ----------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, obj: JsonObject, namespace: str | None = None) -> JsonObject:
        """Store a new object: name (or generateName), uid, resourceVersion, timestamps and defaults."""
        with self.transaction():
            return json_copy(self._insert(rt, json_copy(obj), namespace, keep_status=False))

    def seed(
        self,
        rt: ResourceType,
        objects: Iterable[JsonObject],
        namespace: str | None = None,
        *,
        keep_status: bool = True,
    ) -> int:
        """Create many objects in one transaction, for tests and benches: each is checked, defaulted and
        announced (one ADDED event) as ``create`` does, without copying it in or out (the store takes
        ``objects`` over) and with one sort of the keys at the end. ``keep_status`` keeps the status
        of types whose status is a subresource, as if it had been written after the create. Returns
        how many were created."""
        count = 0
        with self.transaction():
            self._keys[rt.key] = None
            for obj in objects:
                self._insert(rt, obj, namespace, keep_status=keep_status)
                count += 1
        return count

    def _insert(
        self, rt: ResourceType, obj: JsonObject, namespace: str | None, *, keep_status: bool
    ) -> JsonObject:
        """The body of ``create`` on an object the store owns (under the lock)."""
        meta = _meta(obj)
        if rt.namespaced:
            ns = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") and meta["namespace"] != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
            if ("", ns) not in self._bucket(NAMESPACES):
                raise errors.not_found("namespaces", ns)
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rt.kind, "", "metadata.name: Required value: name or generateName is required"
                )
            meta["name"] = prefix + "".join(random.choices(_NAME_SUFFIX_ALPHABET, k=5))
        key = (meta.get("namespace", ""), meta["name"])
        if key in self._bucket(rt):
            raise errors.already_exists(rt.plural, meta["name"], rt.group)
        if rt.key == CUSTOM_RESOURCE_DEFINITIONS.key or (
            rt.custom and "status" in rt.subresources and not keep_status
        ):
            obj.pop("status", None)  # create cannot set status where status is a subresource
        _validate(rt, obj, None)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock())
        meta["generation"] = 1
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        _apply_defaults(rt, obj)
        meta["resourceVersion"] = self._next_rv()
        self._put(rt, key, obj)
        self._emit("ADDED", rt, obj, None)
        return obj

    def update(
        self, rt: ResourceType, obj: JsonObject, namespace: str | None = None, subresource: str | None = None
    ) -> JsonObject:
        """Replace an object (PUT). A ``metadata.resourceVersion`` other than the stored one is a 409.

        For types with a status subresource, the main resource keeps its stored status and ``status``
        changes only the status, as on a real server.
        """
        obj = json_copy(obj)
        meta = _meta(obj)
        name = meta.get("name")
        if not name:
            raise errors.invalid(rt.kind, "", "metadata.name: Required value: name is required")
        with self.transaction():
            current = self._find(rt, namespace if rt.namespaced else None, name)
            sent_rv = meta.get("resourceVersion")
            if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, name, rt.group)
            return self._replace(rt, current, obj, subresource)

    def mutate(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[JsonObject], JsonObject],
        subresource: str | None = None,
    ) -> JsonObject:
        """Read-modify-write under the lock (PATCH): ``change`` gets a copy and returns the new object.

        A resourceVersion left in the result that differs from the stored one is a 409, so patches that
        carry ``metadata.resourceVersion`` are conditional like on a real server.
        """
        with self.transaction():
            current = self._find(rt, namespace, name)
            updated = change(json_copy(current))
            meta = _meta(updated)
            if meta.get("resourceVersion") not in (None, current["metadata"]["resourceVersion"]):
                raise errors.conflict(rt.plural, name, rt.group)
            if meta.get("name") != name:
                raise errors.bad_request("the name of the object does not match the name on the URL")
            return self._replace(rt, current, updated, subresource)

    def _replace(
        self, rt: ResourceType, current: JsonObject, obj: JsonObject, subresource: str | None
    ) -> JsonObject:
        old = current
        meta = _meta(obj)
        has_status = "status" in rt.subresources
        if subresource == "status":
            new = json_copy(current)
            new["status"] = obj.get("status", {})
            obj = new
            meta = obj["metadata"]
        elif has_status:
            if "status" in current:
                obj["status"] = json_copy(current["status"])
            else:
                obj.pop("status", None)
        # Identity and server-owned fields cannot be changed by clients.
        for fixed in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if fixed in current["metadata"]:
                meta[fixed] = current["metadata"][fixed]
            else:
                meta.pop(fixed, None)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        _validate(rt, obj, current)
        generation = int(current["metadata"].get("generation", 1))
        meta["generation"] = generation + 1 if _spec_of(obj) != _spec_of(current) else generation
        if _without_rv(obj) == _without_rv(current):
            return json_copy(current)  # a no-op write keeps its resourceVersion, like a real server
        meta["resourceVersion"] = self._next_rv()
        key = (meta.get("namespace", ""), meta["name"])
        self._put(rt, key, obj)
        self._emit("MODIFIED", rt, obj, old)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and self._ready_to_go(rt, obj):
            self._remove(rt, obj, "Background")
        return json_copy(obj)

    def _ready_to_go(self, rt: ResourceType, obj: JsonObject) -> bool:
        """Whether an object marked for deletion may be removed once its finalizers are gone."""
        if rt.key != PODS.key or self.graceful_deletion == "immediate":
            return True
        deadline = parse_rfc3339(obj["metadata"]["deletionTimestamp"])
        return self.clock() >= deadline

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        grace_period: int | None = None,
        propagation: str | None = None,
        preconditions: JsonObject | None = None,
    ) -> JsonObject:
        """Delete an object, returning its last state.

        Pods with a grace period get ``deletionTimestamp`` first (see ``graceful_deletion``); objects with
        finalizers stay, marked, until the finalizers are removed. Removing an owner removes the objects
        whose ownerReferences name it, unless ``propagation`` is ``Orphan``.
        """
        with self.transaction():
            stored = self._find(rt, namespace, name)
            current = json_copy(stored)  # the next version; the stored one stays as it is
            meta = current["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise errors.conflict(rt.plural, name, rt.group)
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(rt.plural, name, rt.group)
            if rt.key == CUSTOM_RESOURCE_DEFINITIONS.key and self._objects.get(crds.resource_key(current)):
                # Its objects go first; the CRD waits for them behind this finalizer.
                finalizers = meta.setdefault("finalizers", [])
                if crds.CLEANUP_FINALIZER not in finalizers:
                    finalizers.append(crds.CLEANUP_FINALIZER)
            grace = self._grace_period(rt, current, grace_period)
            now = self.clock()
            deadline = rfc3339(now + grace)
            already = meta.get("deletionTimestamp")
            if already and (meta.get("finalizers") or (grace > 0 and parse_rfc3339(already) <= now + grace)):
                return json_copy(current)  # already going, and this request asks for nothing sooner
            if meta.get("finalizers") or grace > 0:
                meta["deletionTimestamp"] = deadline
                meta["deletionGracePeriodSeconds"] = grace
                meta["resourceVersion"] = self._next_rv()
                self._put(rt, (meta.get("namespace", ""), meta["name"]), current)
                self._emit("MODIFIED", rt, current, stored)
                if meta.get("finalizers"):
                    return json_copy(current)
                if grace > 0 and self.graceful_deletion == "timed":
                    self._schedule_removal(rt, current, grace, propagation)
                    return json_copy(current)
            gone = self._remove(rt, current, propagation)
            return json_copy(gone or current)

    def _grace_period(self, rt: ResourceType, obj: JsonObject, requested: int | None) -> int:
        if rt.key != PODS.key:
            return 0
        spec, status = obj.get("spec", {}), obj.get("status", {})
        # Pods that never reached a node, or have finished, have nothing to stop: a real server deletes
        # them at once.
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return max(0, int(requested))
        return int(spec.get("terminationGracePeriodSeconds", 30))

    def _schedule_removal(
        self, rt: ResourceType, obj: JsonObject, grace: int, propagation: str | None
    ) -> None:
        uid = obj["metadata"]["uid"]
        ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]

        def remove() -> None:
            with self.transaction():
                current = self._bucket(rt).get((ns or "", name))
                if current is None or current["metadata"]["uid"] != uid:
                    return
                if not current["metadata"].get("finalizers"):
                    self._remove(rt, current, propagation)

        timer = threading.Timer(grace, remove)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _remove(self, rt: ResourceType, obj: JsonObject, propagation: str | None) -> JsonObject | None:
        """Remove ``obj`` and cascade; returns its last state (with the DELETED resourceVersion), or None
        when it was already gone."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if self._pop(rt, key) is None:
            return None
        gone = {**obj, "metadata": {**meta, "resourceVersion": self._next_rv()}}
        self._emit("DELETED", rt, gone, None)
        if propagation == "Orphan":
            return gone
        if rt.key == NAMESPACES.key:
            for other in self.registry.types:
                if other.namespaced:
                    every = self._sorted_keys(other)
                    lo = bisect_left(every, (meta["name"], ""))
                    hi = bisect_left(every, (meta["name"] + "\0", ""), lo)
                    for child in [self._bucket(other)[k] for k in every[lo:hi]]:
                        self._remove(other, child, propagation)
            return gone
        uid = meta["uid"]
        dependents = sorted(self._dependents.get(uid, ()))
        for other in self.registry.types:
            for type_key, child_key in dependents:
                if type_key != other.key:
                    continue
                dependent = self._bucket(other).get(child_key)
                if dependent is None or not any(
                    r.get("uid") == uid for r in dependent["metadata"].get("ownerReferences") or []
                ):
                    continue
                if dependent["metadata"].get("finalizers"):
                    self._mark_deleted(other, dependent)  # as the garbage collector does: finalizers hold it
                else:
                    self._remove(other, dependent, propagation)
        return gone

    def _mark_deleted(self, rt: ResourceType, obj: JsonObject) -> None:
        """Give an object that finalizers hold a ``deletionTimestamp``; it goes once they are removed."""
        if obj["metadata"].get("deletionTimestamp"):
            return
        updated = json_copy(obj)
        meta = updated["metadata"]
        meta["deletionTimestamp"] = rfc3339(self.clock())
        meta["deletionGracePeriodSeconds"] = 0
        meta["resourceVersion"] = self._next_rv()
        self._put(rt, (meta.get("namespace", ""), meta["name"]), updated)
        self._emit("MODIFIED", rt, updated, obj)

    def stop(self) -> None:
        """Cancel pending timed deletions."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()


def _matcher(
    namespace: str | None, labels: LabelSelector, fields: FieldSelector
) -> Callable[[JsonObject], bool] | None:
    """The per-object check of a LIST, or None when there is nothing to check."""
    if namespace is None and not labels.requirements and not fields.terms:
        return None

    def matches(obj: JsonObject) -> bool:
        meta = obj["metadata"]
        return (
            (namespace is None or meta.get("namespace") == namespace)
            and labels.matches(meta.get("labels"))
            and fields.matches(obj)
        )

    return matches


def _spec_of(obj: JsonObject) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_rv(obj: JsonObject) -> JsonObject:
    clone = dict(obj)
    clone["metadata"] = {
        k: v for k, v in obj.get("metadata", {}).items() if k not in ("resourceVersion", "generation")
    }
    return clone


def _validate(rt: ResourceType, obj: JsonObject, current: JsonObject | None) -> None:
    """The few validations clients are likely to trip over; 422 like a real server. CRDs get their
    defaults and checks, custom objects are pruned, defaulted and checked against their schema
    (``fleetwright.local.apiserver.crds``); ``current`` is the stored object on updates."""
    name = obj["metadata"].get("name", "")
    if rt.key == CUSTOM_RESOURCE_DEFINITIONS.key:
        crds.default_definition(obj)
        crds.validate_definition(obj, current)
    elif rt.custom:
        crds.admit_object(rt, obj)
    elif rt.key == PODS.key:
        containers = obj.get("spec", {}).get("containers")
        if not containers:
            raise errors.invalid(rt.kind, name, "spec.containers: Required value")
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                raise errors.invalid(rt.kind, name, f"spec.containers[{i}].name: Required value")
    elif rt.kind in ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"):
        spec = obj.get("spec", {})
        selector = spec.get("selector")
        if not selector:
            raise errors.invalid(rt.kind, name, "spec.selector: Required value")
        labels = spec.get("template", {}).get("metadata", {}).get("labels") or {}
        if not selector_from_object(selector).matches(labels):
            raise errors.invalid(
                rt.kind,
                name,
                "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`",
            )


def _apply_defaults(rt: ResourceType, obj: JsonObject) -> None:
    if rt.custom or rt.key == CUSTOM_RESOURCE_DEFINITIONS.key:
        return
    spec = obj.setdefault("spec", {}) if rt.kind not in ("Event", "StorageClass") else {}
    if rt.key == PODS.key:
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        status = obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
    elif rt.key == NAMESPACES.key:
        obj.setdefault("status", {}).setdefault("phase", "Active")
    elif rt.kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        spec.setdefault("replicas", 1)
