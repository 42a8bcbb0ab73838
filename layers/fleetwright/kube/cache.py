"""``ClusterCache``: nodes, pods, DaemonSets, PodDisruptionBudgets and NodeClaims listed once and kept
current by watches, for the life of the process (a Lambda execution environment keeps it across warm
invocations).

NodeClaims (``karpenter.sh/v1``) are followed only while their CRD is installed: a LIST answered 404
means "not installed", asked again at most once per ``crd_check_seconds``; a watch answered 404 (the CRD
was removed) stops following them and empties what the cache held.

Each object is converted into the scheduler's model once, when it changes; raw pod objects are not kept.
:meth:`ClusterCache.snapshot` gives the same :class:`~fleetwright.kube.snapshot.ClusterSnapshot` that
``read_snapshot`` builds from three LISTs, after :meth:`ClusterCache.sync` has made sure the cache is at
least as new as the moment it was called (docs/kubernetes.md, "Cluster cache"):

1. a watch not heard from for ``resume_after_seconds``, or every watch after the process sat idle for
   ``idle_restart_seconds`` (a Lambda frozen between invocations), is reopened from its last
   resourceVersion, so the server replays what happened meanwhile; one silent for longer than
   ``relist_after_seconds`` is listed again (410 Gone relists as well);
2. a quorum read (``LIST pods?limit=1``, served from etcd) gives the cluster's current resourceVersion;
3. every watch must then either have applied that resourceVersion (events or bookmarks), or be open and
   have delivered nothing for ``quiet_seconds`` since the quorum read (what was written before it has
   been sent);
4. otherwise, after ``sync_timeout_seconds``, :class:`CacheStaleError`: the pass fails rather than decide
   on a stale view (the quorum read fails the same way while the API server is unreachable).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from fleetwright.kube.client import JsonObject, KubeClient
from fleetwright.kube.cluster import is_unschedulable
from fleetwright.kube.errors import KubeApiError, KubeError
from fleetwright.kube.informer import WATCH_SECONDS, Informer, Sink, resource_version_number
from fleetwright.kube.resources import DAEMON_SETS, NODE_CLAIMS, NODES, POD_DISRUPTION_BUDGETS, PODS, Resource
from fleetwright.kube.snapshot import TERMINAL_PHASES, ClusterSnapshot
from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import daemonset_pod, node_from_object, pod_from_object
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod

PendingListener = Callable[[int], None]

NODECLAIMS = "nodeclaims"
CRD_CHECK_SECONDS = 60.0

# Fields of a Node object nobody here reads and that make it large (image lists, field ownership).
_NODE_STATUS_DROPPED = ("images", "volumesInUse", "volumesAttached")


class CacheStaleError(KubeError):
    """The cache could not be brought up to date; nothing should be decided on it."""


def _key(obj: JsonObject) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name") or "")


def _rv(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def compact_object(obj: JsonObject) -> JsonObject:
    """The object without ``metadata.managedFields`` (field ownership nobody here reads)."""
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def compact_node(obj: JsonObject) -> JsonObject:
    """The Node object without ``managedFields`` and the status lists nobody here reads."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    status = {k: v for k, v in (obj.get("status") or {}).items() if k not in _NODE_STATUS_DROPPED}
    return {**obj, "metadata": meta, "status": status}


@dataclass(slots=True)
class _PodEntry:
    rv: str
    node: str  # bound to ("" when not bound)
    pod: Pod | None  # converted when the snapshot uses it (bound and live, or unschedulable)
    error: DocumentError | None = None


class PodIndex:
    """Pods by node and the unschedulable ones, converted; pods the snapshot leaves out (finished, or not
    yet looked at by the kube-scheduler) are remembered by resourceVersion only."""

    def __init__(self) -> None:
        self.entries: dict[str, _PodEntry] = {}
        self.by_node: dict[str, dict[str, Pod]] = {}
        self.pending: dict[str, Pod] = {}
        self.errors: dict[str, DocumentError] = {}
        self.listeners: list[PendingListener] = []

    def replace(self, objects: Iterable[JsonObject]) -> None:
        before = set(self.pending)
        old = self.entries
        self.entries, self.by_node, self.pending, self.errors = {}, {}, {}, {}
        for obj in objects:
            key = _key(obj)
            entry = old.get(key)
            if entry is None or entry.rv != _rv(obj) or not entry.rv:
                entry = self._convert(obj)
            self._index(key, entry)
        self._announce(len(set(self.pending) - before))

    def upsert(self, obj: JsonObject) -> None:
        key = _key(obj)
        was_pending = key in self.pending
        self._unindex(key)
        self._index(key, self._convert(obj))
        if key in self.pending and not was_pending:
            self._announce(1)

    def remove(self, obj: JsonObject) -> None:
        self._unindex(_key(obj))

    @staticmethod
    def _convert(obj: JsonObject) -> _PodEntry:
        spec = obj.get("spec") or {}
        bound_to = str(spec.get("nodeName") or "")
        rv = _rv(obj)
        if bound_to and (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return _PodEntry(rv, bound_to, None)
        if not bound_to and not is_unschedulable(obj):
            return _PodEntry(rv, "", None)
        try:
            return _PodEntry(rv, bound_to, pod_from_object(obj))
        except DocumentError as err:
            return _PodEntry(rv, bound_to, None, err)

    def _index(self, key: str, entry: _PodEntry) -> None:
        self.entries[key] = entry
        if entry.error is not None:
            self.errors[key] = entry.error
        elif entry.pod is not None:
            if entry.node:
                self.by_node.setdefault(entry.node, {})[key] = entry.pod
            else:
                self.pending[key] = entry.pod

    def _unindex(self, key: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        self.errors.pop(key, None)
        self.pending.pop(key, None)
        on_node = self.by_node.get(entry.node)
        if on_node is not None:
            on_node.pop(key, None)
            if not on_node:
                del self.by_node[entry.node]

    def _announce(self, new: int) -> None:
        if new:
            for listener in list(self.listeners):
                listener(new)


@dataclass(slots=True)
class _Converted:
    rv: str
    value: Any
    obj: JsonObject | None = None
    error: DocumentError | None = None


@dataclass(slots=True)
class ObjectIndex:
    """Objects of one kind by key: converted by ``convert`` (None: none), the object kept (compacted by
    ``keep``) when ``keep`` is given."""

    convert: Callable[[JsonObject], Any] | None = None
    keep: Callable[[JsonObject], JsonObject] | None = None
    entries: dict[str, _Converted] = field(default_factory=dict)

    def replace(self, objects: Iterable[JsonObject]) -> None:
        old = self.entries
        self.entries = {}
        for obj in objects:
            key = _key(obj)
            entry = old.get(key)
            self.entries[key] = (
                entry if entry is not None and entry.rv and entry.rv == _rv(obj) else self._make(obj)
            )

    def upsert(self, obj: JsonObject) -> None:
        self.entries[_key(obj)] = self._make(obj)

    def remove(self, obj: JsonObject) -> None:
        self.entries.pop(_key(obj), None)

    def _make(self, obj: JsonObject) -> _Converted:
        kept = self.keep(obj) if self.keep is not None else None
        if self.convert is None:
            return _Converted(_rv(obj), None, kept)
        try:
            return _Converted(_rv(obj), self.convert(obj), kept)
        except DocumentError as err:
            return _Converted(_rv(obj), None, kept, err)

    def sorted_entries(self) -> list[_Converted]:
        return [self.entries[k] for k in sorted(self.entries)]


def _pdb_fields(obj: JsonObject) -> JsonObject:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "uid") if k in meta},
        "spec": {"selector": (obj.get("spec") or {}).get("selector")},
        "status": {"disruptionsAllowed": (obj.get("status") or {}).get("disruptionsAllowed")},
    }


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one :meth:`ClusterCache.sync` did: the quorum resourceVersion, seconds spent, the watches
    reopened and the resources listed."""

    resource_version: str
    seconds: float
    resumed: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()


class ClusterCache:
    """The cluster's nodes, pods, DaemonSets, PDBs and NodeClaims, kept current by watches (see the
    module doc).

    Thread-safe: watch threads apply events under one lock, and readers (the provisioning loop, the
    disruption pass) copy what they need under the same lock. Nothing is listed until the first
    :meth:`sync` (or :meth:`snapshot`).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        watch_seconds: int = WATCH_SECONDS,
        quiet_seconds: float = 0.2,
        sync_timeout_seconds: float = 10.0,
        resume_after_seconds: float = 30.0,
        idle_restart_seconds: float = 5.0,
        relist_after_seconds: float = 300.0,
        crd_check_seconds: float = CRD_CHECK_SECONDS,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.quiet_seconds = quiet_seconds
        self.sync_timeout_seconds = sync_timeout_seconds
        self.resume_after_seconds = resume_after_seconds
        self.idle_restart_seconds = idle_restart_seconds
        self.relist_after_seconds = relist_after_seconds
        self.crd_check_seconds = crd_check_seconds
        self.clock = clock
        self.monotonic = monotonic
        self.changed = threading.Condition(threading.RLock())
        self.pods = PodIndex()
        self.nodes = ObjectIndex(convert=node_from_object, keep=compact_node)
        self.daemonsets = ObjectIndex(convert=daemonset_pod)
        self.pdbs = ObjectIndex(keep=_pdb_fields)
        self.nodeclaims = ObjectIndex(keep=compact_object)
        self.informers = {
            name: self._informer(resource, sink, watch_seconds)
            for name, resource, sink in (
                ("pods", PODS, self.pods),
                ("nodes", NODES, self.nodes),
                ("daemonsets", DAEMON_SETS, self.daemonsets),
                ("pdbs", POD_DISRUPTION_BUDGETS, self.pdbs),
            )
        }
        # Joins ``informers`` while the NodeClaim CRD is installed (``nodeclaims_installed``).
        self.nodeclaim_informer = self._informer(NODE_CLAIMS, self.nodeclaims, watch_seconds)
        self.nodeclaim_informer.optional = True
        self.nodeclaims_installed: bool | None = None  # None: not asked yet
        self._nodeclaims_checked_at: float | None = None
        self._sync_lock = threading.Lock()
        self._last_sync: float | None = None
        self._writes_at_sync: int | None = None
        self._sync_started: float | None = None  # monotonic start of the last completed sync
        self._pass_started: float | None = None  # set by begin_pass()
        self.last_sync: SyncReport | None = None

    def _informer(self, resource: Resource, sink: Sink, watch_seconds: int) -> Informer:
        """An informer feeding ``sink``, waking waiters on ``changed``, on the cache's clocks."""
        return Informer(
            self.client,
            resource,
            sink,
            self.changed,
            watch_seconds=watch_seconds,
            clock=self.clock,
            monotonic=self.monotonic,
        )

    # -- freshness -------------------------------------------------------------------------------------

    def begin_pass(self) -> None:
        """A pass starts: ``sync(reuse=True)`` may reuse only syncs begun from now on."""
        with self._sync_lock:
            self._pass_started = self.monotonic()

    def sync(self, *, reuse: bool = False) -> SyncReport:
        """Bring the cache up to the cluster's state as of now (steps 1–4 of the module doc); raises
        :class:`CacheStaleError` or the API error that prevented it.

        With ``reuse``, the last sync is reused when it began after :meth:`begin_pass` and the client has
        sent no write since it began (the next step of one pass: the view is as new as the pass's start,
        and nothing this process wrote is missing from it)."""
        with self._sync_lock:
            writes = getattr(self.client, "writes", None)
            if reuse and self._reusable(writes):
                assert self.last_sync is not None
                return self.last_sync
            started = self.monotonic()
            idle = self._last_sync is not None and started - self._last_sync > self.idle_restart_seconds
            resumed: list[str] = []
            listed: list[str] = []
            now = self.clock()
            self._follow_nodeclaims(started, listed)
            for name, informer in self.informers.items():
                if name == NODECLAIMS and name in listed:
                    continue
                if not informer.started:
                    informer.start()
                    listed.append(name)
                elif now - informer.heard_at > self.relist_after_seconds:
                    informer.restart(relist=True)
                    listed.append(name)
                elif idle or now - informer.heard_at > self.resume_after_seconds:
                    informer.restart()
                    resumed.append(name)
            target = self._quorum_resource_version()
            read_at = self.monotonic()
            self._wait_for(target, read_at)
            if self.nodeclaim_informer.gone:
                self._forget_nodeclaims(self.monotonic())
            self._last_sync = self.monotonic()
            self._writes_at_sync = writes
            self._sync_started = started
            self.last_sync = SyncReport(target, self._last_sync - started, tuple(resumed), tuple(listed))
            return self.last_sync

    def _reusable(self, writes: int | None) -> bool:
        return (
            self.last_sync is not None
            and self._pass_started is not None
            and self._sync_started is not None
            and self._sync_started >= self._pass_started
            and writes is not None
            and writes == self._writes_at_sync
        )

    def _follow_nodeclaims(self, now: float, listed: list[str]) -> None:
        """List and watch NodeClaims when their CRD is installed (asked at most once per
        ``crd_check_seconds`` while it is not); stop when the watch found it removed."""
        informer = self.nodeclaim_informer
        if NODECLAIMS in self.informers:
            if not informer.gone:
                return
            self._forget_nodeclaims(now)
        checked = self._nodeclaims_checked_at
        if checked is not None and now - checked < self.crd_check_seconds:
            return
        self._nodeclaims_checked_at = now
        try:
            informer.restart(relist=True)
        except KubeApiError as error:
            if not error.not_found:
                raise
            self.nodeclaims_installed = False
            return
        with self.changed:
            self.informers[NODECLAIMS] = informer
            self.nodeclaims_installed = True
        listed.append(NODECLAIMS)

    def _forget_nodeclaims(self, now: float) -> None:
        with self.changed:
            self.informers.pop(NODECLAIMS, None)
            self.nodeclaims.replace(())
            self.nodeclaims_installed = False
        self._nodeclaims_checked_at = now

    def forget_nodeclaims(self) -> None:
        """A NodeClaim request was answered 404 for the resource itself: ask again at the next sync."""
        with self._sync_lock:
            self.nodeclaim_informer.stop()
            with self.changed:
                self.informers.pop(NODECLAIMS, None)
                self.nodeclaims.replace(())
                self.nodeclaims_installed = None
            self._nodeclaims_checked_at = None

    def _quorum_resource_version(self) -> str:
        page = self.client.request("GET", PODS.path(), query={"limit": 1})
        return str(((page or {}).get("metadata") or {}).get("resourceVersion") or "")

    def _caught_up(self, informer: Informer, target: int | None, read_at: float) -> bool:
        if informer.gone:
            return True  # the resource is no longer served (sync then stops following it)
        have = resource_version_number(informer.resource_version)
        if target is not None and have is not None and have >= target:
            return True
        if informer.opened_at is None:
            return False
        return self.monotonic() - max(informer.event_at, informer.opened_at, read_at) >= self.quiet_seconds

    def _wait_for(self, target_text: str, read_at: float) -> None:
        target = resource_version_number(target_text)
        deadline = read_at + self.sync_timeout_seconds
        with self.changed:
            while True:
                behind = [n for n, i in self.informers.items() if not self._caught_up(i, target, read_at)]
                if not behind:
                    return
                left = deadline - self.monotonic()
                if left <= 0:
                    errors = {n: self.informers[n].error for n in behind if self.informers[n].error}
                    raise CacheStaleError(
                        f"cluster cache not up to date with resourceVersion {target_text} after "
                        f"{self.sync_timeout_seconds:.0f} s: {', '.join(behind)} behind"
                        + (f" ({errors})" if errors else "")
                    )
                self.changed.wait(min(left, self.quiet_seconds / 2))

    # -- reads -----------------------------------------------------------------------------------------

    def snapshot(self, *, sync: bool = True) -> ClusterSnapshot:
        """The scheduler's view (what ``read_snapshot`` gives), after :meth:`sync` unless ``sync`` is
        False (the caller synced already). Each call gets its own Node objects and pod lists."""
        if sync:
            self.sync()
        snapshot = ClusterSnapshot()
        with self.changed:
            for entry in self.nodes.sorted_entries():
                if entry.error is not None:
                    snapshot.errors.append(entry.error)
                    continue
                node: Node = entry.value
                on_node = self.pods.by_node.get(node.name, {})
                snapshot.nodes.append(
                    replace(
                        node,
                        labels=dict(node.labels),
                        allocatable=dict(node.allocatable),
                        pods=[on_node[k] for k in sorted(on_node)],
                    )
                )
            snapshot.pending_pods = [self.pods.pending[k] for k in sorted(self.pods.pending)]
            snapshot.errors[:0] = [self.pods.errors[k] for k in sorted(self.pods.errors)]
            for entry in self.daemonsets.sorted_entries():
                if entry.error is not None:
                    snapshot.errors.append(entry.error)
                else:
                    snapshot.daemonsets.append(entry.value)
        return snapshot

    def node_objects(self) -> list[JsonObject]:
        """Every Node object (compacted), as of the last sync."""
        with self.changed:
            return [e.obj for e in self.nodes.sorted_entries() if e.obj is not None]

    def pdb_objects(self) -> list[JsonObject]:
        """Every PodDisruptionBudget (name, namespace, selector, disruptionsAllowed), as of the last sync."""
        with self.changed:
            return [e.obj for e in self.pdbs.sorted_entries() if e.obj is not None]

    def nodeclaim_objects(self) -> list[JsonObject] | None:
        """Every NodeClaim object (without managedFields) as of the last sync; None when they are not
        followed (the CRD is not installed, or the cache was never synced). Shared: do not modify."""
        with self.changed:
            if NODECLAIMS not in self.informers:
                return None
            return [e.obj for e in self.nodeclaims.sorted_entries() if e.obj is not None]

    def pending_keys(self) -> set[str]:
        """``namespace/name`` of the unschedulable pods the cache holds now."""
        with self.changed:
            return set(self.pods.pending)

    # -- pending pods as they come -----------------------------------------------------------------------

    def add_pending_listener(self, listener: PendingListener) -> None:
        """Call ``listener(n)`` (from a watch thread, under the cache's lock: keep it short) whenever ``n``
        pods become unschedulable that were not before."""
        with self.changed:
            self.pods.listeners.append(listener)

    def remove_pending_listener(self, listener: PendingListener) -> None:
        """Stop calling ``listener``."""
        with self.changed:
            if listener in self.pods.listeners:
                self.pods.listeners.remove(listener)

    def start(self) -> None:
        """List everything and start watching, without the freshness check (the pending-pod feed)."""
        with self._sync_lock:
            for informer in self.informers.values():
                if not informer.started:
                    informer.start()

    def stop(self) -> None:
        """Stop every watch."""
        for informer in list(self.informers.values()):
            informer.stop()
        self.nodeclaim_informer.stop()

    def stats(self) -> dict[str, Any]:
        """Counts for logs and the bench: objects held, LISTs and watch events per resource."""
        with self.changed:
            return {
                "pods": len(self.pods.entries),
                "pendingPods": len(self.pods.pending),
                "nodes": len(self.nodes.entries),
                "daemonSets": len(self.daemonsets.entries),
                "pdbs": len(self.pdbs.entries),
                "nodeClaims": len(self.nodeclaims.entries),
                "lists": {n: i.relists for n, i in self.informers.items()},
                "events": {n: i.events for n, i in self.informers.items()},
            }
