"""The replay engine: a trace's pods arrive and leave on a virtual clock, and the cluster of a
:class:`~fleetwright.local.simulate.world.World` answers as a deployed one would.

Events, in time order (ties in the order they were scheduled): a trace pod is created (Pending) or
deleted at its end (the cluster settles once after the trace's pods of one instant, as kube-scheduler
sees a burst together); the emulator's kube-scheduler binds what fits and marks the rest Unschedulable; the
provisioner batches those (idle 1 s, at most 10 s, its own :class:`Batcher`) and makes a pass
(:meth:`Provisioner.run_once`: reconcile, schedule, launch through the claim lifecycle); launched
instances boot, register, become Ready and lose their startup taints (:class:`NodeStart`), and the
provisioner reconciles every ``reconcile_interval_seconds`` while a claim is still starting; the
disruption controller makes a pass every ``disruption_interval`` seconds and the termination workflows
it starts run step by step (:mod:`~fleetwright.local.simulate.workflows`). A trace pod evicted before its
end is created again at once (its controller's replacement), Pending, for the rest of its life.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetwright.claims import records as claim_records
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import PODS
from fleetwright.local.simulate.cloud import SimInstance, node_name
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.workflows import Task
from fleetwright.local.simulate.world import World
from fleetwright.provisioning.batcher import Batcher
from fleetwright.provisioning.provisioner import after_initialized

DISRUPTION_INTERVAL_SECONDS = 60.0  # the disruption function's schedule
SPOT_NOTICE_SECONDS = 120.0  # EC2 reclaims a spot instance two minutes after its interruption warning
INVOCATION_SECONDS = 60.0  # the provisioner's schedule and timeout
RETRY_MIN_SECONDS = 2.0  # the provisioner's back-off after a pass that left pods to retry
RETRY_MAX_SECONDS = 30.0
OWNER_KIND = "ReplicaSet"
TRACE_EVENTS = frozenset({"arrive", "leave"})

Handler = Callable[..., None]


@dataclass(slots=True)
class PodLife:
    """One trace pod's course in the replay: each incarnation's creation and start, evictions."""

    pod: TracePod
    end: float  # seconds from the replay's start
    created: list[float] = field(default_factory=list)
    started: list[float | None] = field(default_factory=list)
    uid: str = ""
    evictions: int = 0
    finished: bool = False


@dataclass(slots=True)
class Sample:
    """The cluster at one moment: seconds, nodes, their $/h, pods Pending."""

    at: float
    nodes: int
    hourly: float
    pending: int


@dataclass
class Outcome:
    """What a replay leaves for the report: pod lives, the cloud's instances, disruptions, samples."""

    duration: float
    lives: dict[str, PodLife]
    instances: list[SimInstance]
    disruptions: dict[str, int]
    samples: list[Sample]
    passes: int
    errors: list[str]
    interruptions: int = 0  # spot interruption warnings sent
    used_nodes: set[str] = field(default_factory=set)  # Nodes a trace pod was ever bound to


def _dns_name(name: str) -> str:
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    return cleaned[:253] or "pod"


def pod_object(pod: TracePod) -> dict[str, Any]:
    """The Pod a trace pod is: its requests, labels and owner (a ReplicaSet, so drains treat it as
    managed)."""
    requests = {"cpu": pod.cpu, "memory": pod.memory}
    if pod.gpu:
        requests["nvidia.com/gpu"] = str(pod.gpu)
    owner = _dns_name(pod.owner or pod.name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": _dns_name(pod.name),
            "namespace": pod.namespace,
            "labels": {"app": owner, **pod.labels},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": OWNER_KIND,
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [{"name": "main", "image": "pause", "resources": {"requests": requests}}],
            "terminationGracePeriodSeconds": 0,
        },
    }


@contextlib.contextmanager
def seeded_claim_ids(seed: int) -> Iterator[None]:
    """NodeClaim ids from a seeded generator while the replay runs (they are random in production), so
    a replay with the same seed names, and so orders, everything the same way."""
    saved = claim_records.__dict__["secrets"]
    setattr(claim_records, "secrets", random.Random(seed))  # noqa: B010 - a module global, on purpose
    try:
        yield
    finally:
        setattr(claim_records, "secrets", saved)  # noqa: B010


class Replay:
    """Replays ``trace`` through ``world`` (see the module's docstring); :meth:`run` returns the
    :class:`Outcome`. ``progress`` is called with the fraction done now and then."""

    def __init__(
        self,
        world: World,
        trace: Trace,
        *,
        disruption_interval: float = DISRUPTION_INTERVAL_SECONDS,
        progress: Callable[[float], None] | None = None,
        spot_interruptions: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.world = world
        self.trace = trace
        self.disruption_interval = disruption_interval
        self.spot_rate = spot_interruptions
        self.random = random.Random(seed)
        self.interruptions = 0
        self.progress = progress
        self.clock = world.clock
        self.batcher = Batcher(world.config.batch_idle_seconds, world.config.batch_max_seconds)
        self._events: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self.lives: dict[str, PodLife] = {}
        self._by_uid: dict[str, str] = {}
        self._known: set[str] = set()
        self._ended: set[str] = set()
        self._invoked_at = 0.0
        self._dirty = False
        self._batch_check: float | None = None
        self._reconcile_at: float | None = None
        self._retry_at: float | None = None
        self._retry_delay = RETRY_MIN_SECONDS
        self._watching = False
        self._seen: set[str] = set()  # pods the current invocation's watch has signalled
        self._unschedulable: set[str] = set()  # pods the kube-scheduler left unschedulable
        self._unbound: set[str] = set()  # pods not bound to a node yet (the kube-scheduler's work)
        self.samples: list[Sample] = []
        self.used_nodes: set[str] = set()
        self.passes = 0
        self.errors: list[str] = []
        self._subscription = world.store.subscribe(self._on_pod_event, [PODS])

    # -- the event queue -----------------------------------------------------------------------------

    def at(self, seconds: float, kind: str, payload: Any = None) -> None:
        """Schedule ``kind`` at ``seconds`` from the replay's start."""
        heapq.heappush(self._events, (seconds, next(self._seq), kind, payload))

    def run(self) -> Outcome:
        """Replay the whole trace; raises ValueError when two pods of the trace share a name."""
        names: dict[tuple[str, str], str] = {}
        for pod in self.trace.pods:
            key = (pod.namespace, _dns_name(pod.name))
            if key in names:
                raise ValueError(f"trace pods {names[key]!r} and {pod.name!r} have the same name in {key[0]}")
            names[key] = pod.name
        for pod in self.trace.pods:
            end = self.trace.duration if pod.end is None else min(pod.end, self.trace.duration)
            if pod.start >= self.trace.duration or end <= pod.start:
                continue
            self.lives[pod.name] = PodLife(pod, end)
            self.at(pod.start, "arrive", pod.name)
            self.at(end, "leave", pod.name)
        self.at(0.0, "invoke")
        self.at(self.disruption_interval, "disrupt")
        self.at(0.0, "sample")
        try:
            self._loop()
        finally:
            self._subscription.cancel()
            self.world.workflows.close()
        return Outcome(
            self.trace.duration,
            self.lives,
            list(self.world.cloud.instances.values()),
            dict(self.world.workflows.reasons),
            self.samples,
            self.passes,
            self.errors,
            self.interruptions,
            self.used_nodes,
        )

    def _loop(self) -> None:
        handlers: dict[str, Handler] = {
            "arrive": self._arrive,
            "leave": self._leave,
            "invoke": self._invoke,
            "watch_end": self._watch_end,
            "batch": self._batch,
            "reconcile": self._reconcile,
            "disrupt": self._disrupt,
            "task": self._task,
            "register": self._register,
            "ready": self._ready,
            "untaint": self._untaint,
            "sample": self._sample,
            "interrupt": self._interrupt,
            "reclaim": self._reclaim,
        }
        end = self.trace.duration
        next_progress = 0.0
        while self._events and self._events[0][0] <= end:
            when, _, kind, payload = heapq.heappop(self._events)
            self.clock.advance_to(self.clock.start + when)
            handlers[kind](payload)
            if kind in TRACE_EVENTS and self._next_is_trace_event_at(when):
                continue  # pods created or deleted at one instant: the kube-scheduler sees them together
            self._settle()
            if self.progress is not None and when >= next_progress:
                self.progress(when / end if end else 1.0)
                next_progress = when + end / 200
        self.clock.advance_to(self.clock.start + end)

    def _next_is_trace_event_at(self, when: float) -> bool:
        return bool(self._events) and self._events[0][0] == when and self._events[0][2] in TRACE_EVENTS

    # -- trace pods ----------------------------------------------------------------------------------

    def _arrive(self, name: str) -> None:
        life = self.lives[name]
        if life.finished:
            return  # evicted at its very end: no replacement
        created = self.world.store.create(PODS, pod_object(life.pod), life.pod.namespace)
        life.uid = created["metadata"]["uid"]
        self._unbound.add(f"{life.pod.namespace}/{created['metadata']['name']}")
        self._by_uid[life.uid] = name
        life.created.append(self.clock.elapsed())
        life.started.append(None)
        self._dirty = True

    def _leave(self, name: str) -> None:
        life = self.lives[name]
        life.finished = True
        with contextlib.suppress(ApiError):
            self.world.store.delete(PODS, life.pod.namespace, _dns_name(life.pod.name), grace_period=0)
        self._dirty = True

    def _on_pod_event(self, event: Any) -> None:
        """A trace pod deleted before its end was evicted (or lost with its node): it comes back."""
        if event.type != "DELETED":
            return
        meta = event.object["metadata"]
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        self._unschedulable.discard(key)
        self._unbound.discard(key)
        self._seen.discard(key)
        name = self._by_uid.pop(str(event.object["metadata"].get("uid")), None)
        if name is None or self.lives[name].finished:
            return
        self.lives[name].evictions += 1
        self.at(self.clock.elapsed(), "arrive", name)

    # -- the cluster settles after every event -------------------------------------------------------

    def _settle(self) -> None:
        world = self.world
        for _ in range(20):  # each round may bind pods and start more; it converges in a few
            if self._dirty and self._unbound:
                self._dirty = False
                summary = world.scheduler.run_once()
                self._heard(summary)
                for uid in world.kubelet.run_pods(summary.bound.values()):
                    self._started(uid)
            self._dirty = False
            if not self._follow_instances() and not self._dirty:
                break
        closes = self.batcher.closes_at()
        if closes is not None and closes != self._batch_check:
            self._batch_check = closes
            self.at(closes - self.clock.monotonic() + self.clock.elapsed(), "batch")

    def _started(self, uid: str) -> None:
        name = self._by_uid.get(uid)
        if name is not None:
            life = self.lives[name]
            if life.started and life.started[-1] is None:
                life.started[-1] = self.clock.elapsed()

    def _follow_instances(self) -> bool:
        """Schedule the start of instances launched since the last look, and remove the Nodes of those
        shut down; True when something changed."""
        changed = False
        start = self.world.cloud.start
        for instance in self.world.cloud.instances.values():
            if instance.id not in self._known:
                self._known.add(instance.id)
                at = instance.running_at - self.clock.start + start.register_seconds
                self.at(at, "register", instance.id)
                self.at(at + start.ready_seconds, "ready", instance.id)
                self.at(at + start.ready_seconds + start.startup_taint_seconds, "untaint", instance.id)
                changed = True
            if instance.ended_at is not None and instance.id not in self._ended:
                self._ended.add(instance.id)
                self.world.kubelet.remove(instance.id)
                self._dirty = changed = True
        return changed

    # -- node start ----------------------------------------------------------------------------------

    def _alive(self, instance_id: str) -> bool:
        return self.world.cloud.instances[instance_id].ended_at is None

    def _register(self, instance_id: str) -> None:
        if self._alive(instance_id):
            self.world.kubelet.register(self.world.cloud.instances[instance_id])
            if self.world.interruptions is not None:
                self._interruptible(self.world.cloud.instances[instance_id])
            if self.world.daemonsets is not None:
                self.world.daemonsets.reconcile()
            self._reconcile_soon()

    def _ready(self, instance_id: str) -> None:
        if self._alive(instance_id):
            self.world.kubelet.ready(node_name(instance_id))
            self._dirty = True
            self._reconcile_soon()
            for uid in self.world.kubelet.run_pods([node_name(instance_id)]):
                self._started(uid)

    def _interruptible(self, instance: SimInstance) -> None:
        """A spot instance starts running: draw when EC2 warns it (exponential, the replay's rate)."""
        rate = self.spot_rate / 3600
        if rate > 0 and instance.launched.capacity_type == "spot":
            warned = instance.running_at - self.clock.start + self.random.expovariate(rate)
            self.at(warned, "interrupt", instance.id)

    def _interrupt(self, instance_id: str) -> None:
        """EC2's two-minute warning, through the interruption function's controller; the instance is
        reclaimed when the notice ends unless Fleetwright terminated it first."""
        from fleetwright.interruption import samples
        from fleetwright.interruption.events import parse_message

        instance = self.world.cloud.instances[instance_id]
        if instance.ended_at is not None:
            return
        now = datetime.fromtimestamp(self.clock.now(), UTC)
        event = samples.spot_interruption(instance_id, self.world.cloud.region, now)
        try:
            self.world.interruptions.handle(parse_message(json.dumps(event)))
        except Exception as error:  # reported; EC2 reclaims the instance anyway
            self.errors.append(f"interruption: {type(error).__name__}: {error}")
        self.interruptions += 1
        self.at(self.clock.elapsed() + SPOT_NOTICE_SECONDS, "reclaim", instance_id)
        for task in self.world.workflows.take_queued():
            self.at(self.clock.elapsed(), "task", task)

    def _reclaim(self, instance_id: str) -> None:
        instance = self.world.cloud.instances[instance_id]
        if instance.ended_at is None:
            instance.ended_at = self.clock.now()
            instance.interrupted = True

    def _untaint(self, instance_id: str) -> None:
        if self._alive(instance_id):
            instance = self.world.cloud.instances[instance_id]
            self.world.kubelet.clear_startup_taints(node_name(instance_id), instance.request.startup_taints)
            self._dirty = True
            self._reconcile_soon()

    # -- the provisioner: one invocation a minute, watching for all but its deadline margin -----------

    def _invoke(self, _: Any) -> None:
        """An invocation starts: its watch lists the pods already unschedulable (one signal for all of
        them), and its loop reconciles at once."""
        config = self.world.config
        self.at(self.clock.elapsed() + INVOCATION_SECONDS, "invoke")
        self.at(self.clock.elapsed() + INVOCATION_SECONDS - config.deadline_margin_seconds, "watch_end")
        self._watching = True
        self._invoked_at = self.clock.elapsed()
        self._retry_delay = RETRY_MIN_SECONDS
        self._seen = set(self._unschedulable)
        if self._seen:
            self.batcher.add(self.clock.monotonic(), len(self._seen))
        self._reconcile_at = None
        self.at(self.clock.elapsed(), "reconcile", True)

    def _watch_end(self, _: Any) -> None:
        """The invocation stops watching: an open batch is provisioned now, then nobody watches until
        the next invocation."""
        if self.batcher.open:
            self._provision()
        self._watching = False
        self._seen = set()
        self._retry_at = None

    def _heard(self, summary: Any) -> None:
        """What the provisioner's pod watch hears of a kube-scheduler pass: pods it has not seen
        unschedulable in this invocation open or extend the batch."""
        self.used_nodes.update(summary.bound.values())
        for key in summary.bound:
            self._unbound.discard(key)
            self._unschedulable.discard(key)
            self._seen.discard(key)
        fresh = [key for key in summary.unschedulable if key not in self._seen]
        self._unschedulable.update(summary.unschedulable)
        if self._watching and fresh:
            self._seen.update(fresh)
            self.batcher.add(self.clock.monotonic(), len(fresh))

    def _batch(self, _: Any) -> None:
        now = self.clock.monotonic()
        due = self._retry_at is not None and self.clock.elapsed() >= self._retry_at
        if self._watching and (self.batcher.ready(now) or due):
            self._provision()

    def _provision(self) -> None:
        self.batcher.reset()
        self._batch_check = None
        self._retry_at = None
        report = self.world.provisioner.run_once()
        self.passes += 1
        last = report.passes[-1] if report.passes else None
        if last is not None and last.error:
            self.errors.append(f"provisioner: {last.error}")
        if not report.lease_acquired or (last is not None and last.needs_retry):
            self._retry_at = self.clock.elapsed() + self._retry_delay
            self._retry_delay = min(RETRY_MAX_SECONDS, self._retry_delay * 2)
            self.at(self._retry_at, "batch")
        else:
            self._retry_delay = RETRY_MIN_SECONDS
        if any(r.initialized for r in report.reconciles):
            self._pass_after_initialized()

    def _pass_after_initialized(self) -> None:
        """Claims became initialized: a pass when the provisioner's loop makes it
        (:func:`~fleetwright.provisioning.provisioner.after_initialized`)."""
        settled = self.clock.elapsed() + self.world.config.batch_idle_seconds
        due = after_initialized(self._retry_at, settled)
        if due != self._retry_at:
            self._retry_at = due
            self.at(due, "batch")

    def _reconcile_soon(self) -> None:
        """A claim's node changed (registered, Ready, startup taints gone): the invocation's next
        reconciliation, on its ``reconcile_interval_seconds`` grid, will see it. The replay runs only
        those reconciliations (the others find nothing to do); between invocations, the next one's first
        reconciliation does it."""
        if not self._watching or self._reconcile_at is not None:
            return
        interval = self.world.config.reconcile_interval_seconds
        since = self.clock.elapsed() - self._invoked_at
        self._reconcile_at = self._invoked_at + math.ceil(since / interval) * interval
        self.at(self._reconcile_at, "reconcile", False)

    def _reconcile(self, first: bool) -> None:
        if not first and self._reconcile_at is None:
            return  # superseded by an invocation's first reconciliation
        self._reconcile_at = None
        if not self._watching:
            return
        report = self.world.provisioner.reconcile()
        if report.error:
            self.errors.append(f"reconcile: {report.error}")
        if (report.freed_pods or report.error) and self._retry_at is None:
            self._retry_at = self.clock.elapsed()
            self.at(self._retry_at, "batch")
        if report.initialized:
            self._pass_after_initialized()
        if report.registered or report.initialized or report.freed_pods:
            self._dirty = True

    def _disrupt(self, _: Any) -> None:
        self.at(self.clock.elapsed() + self.disruption_interval, "disrupt")
        try:
            report = self.world.disruption.run_once()
        except Exception as error:  # a failed pass is reported; the next one runs
            self.errors.append(f"disruption: {type(error).__name__}: {error}")
            return
        if report.error:
            self.errors.append(f"disruption: {report.error}")
        for task in self.world.workflows.take_queued():
            self.at(self.clock.elapsed(), "task", task)
        self._dirty = True

    def _task(self, task: Task) -> None:
        task.resume()
        if task.error is not None:
            self.errors.append(f"workflow {task.name}: {type(task.error).__name__}: {task.error}")
            task.error = None
        if not task.done:
            self.at(task.wake_at - self.clock.start, "task", task)
        else:
            self._dirty = True  # a node deleted, or given back

    def _sample(self, _: Any) -> None:
        live = [i for i in self.world.cloud.instances.values() if i.ended_at is None]
        pending = sum(1 for life in self.lives.values() if life.started and life.started[-1] is None)
        self.samples.append(Sample(self.clock.elapsed(), len(live), sum(i.price for i in live), pending))
        self.at(self.clock.elapsed() + 60.0, "sample")
