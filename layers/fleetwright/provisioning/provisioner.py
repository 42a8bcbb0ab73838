"""The provisioning loop: pending pods → scheduling simulation → NodeClaims launched and followed.

One :class:`Provisioner` per invocation (or per demo run). :meth:`Provisioner.run_until` watches
unschedulable pods, batches them, and runs a pass per batch until the deadline; :meth:`Provisioner.run_once`
is the economy mode's single pass. Each pass (reconcile, schedule, launch) holds the lease, and only the
pass: watching and batching run without it, so interruption and disruption replacements
(:meth:`Provisioner.launch_for`, :meth:`Provisioner.launch_claims`), which take the same lease, wait
seconds, not a minute.

Every write a pass makes to a claim it launches is fenced by the lease (``docs/state.md``): a pass that
lost the lease writes and launches nothing more. Claims are recorded, with their launch deadline, before
they are launched; each claim gets its own CreateFleet (tagged with its id) in a bounded thread pool, and
no AWS request of a launch is sent after the deadline. A claim left ``Launching`` by a launcher that died
or lost its lease counts as capacity in flight until its deadline plus a settle grace has passed; then
reconciliation adopts its instance (found by tag) or fails it.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from fleetwright.aws.deadline import Deadline, deadline_scope
from fleetwright.aws.networkinterfaces import EFA_RESOURCE
from fleetwright.cloud.errors import DEADLINE_EXCEEDED, FailureKind, LaunchError, LaunchFailure
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.cloud.provider import LaunchCloud
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube import reasons
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.events import Event, EventRecorder
from fleetwright.kube.resources import NODES
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.model import resources as res
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.hashes import nodeclass_hashes, nodepool_hashes
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import DISRUPTED_TAINT_KEY, ZONE_ID
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.model.volumes import volume_requirements
from fleetwright.observability import metrics as obs
from fleetwright.provisioning import static_pools
from fleetwright.provisioning.batcher import Batcher
from fleetwright.provisioning.claims import (
    claim_record,
    in_flight_node,
    launch_request,
    launched_fields,
    new_claim_id,
    offering_price,
)
from fleetwright.provisioning.nodeclaim_objects import SYNC_ERRORS as NODECLAIM_SYNC_ERRORS
from fleetwright.provisioning.nodeclaim_objects import NodeClaimObjects
from fleetwright.provisioning.registration import (
    NODE_SYNC_ERRORS,
    initialization_change,
    is_initialized,
    node_name,
    nodes_by_instance,
    registration_change,
)
from fleetwright.provisioning.reports import PassReport, ReconcileReport, RunReport
from fleetwright.provisioning.watcher import CachePodWatcher, PodWatcher
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates, own_reservations, with_reserved_offerings
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate, Results, SchedulingInput
from fleetwright.state.lease import LeaseLostError, LeaseUnavailableError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.state.store import StateStore

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache
    from fleetwright.provisioning.nodepool_source import NodePoolSource

MAX_LOGGED_PODS = 20
RETRY_MIN_SECONDS = 2.0
RETRY_MAX_SECONDS = 30.0

# A launch needs at least this long before its deadline, or it is not started.
MIN_LAUNCH_SECONDS = 1.0


class Provisioner:
    """Launches nodes for unschedulable pods in one cluster.

    ``kube`` reads pods and nodes, ``cloud`` launches and terminates instances (:class:`LaunchCloud`),
    ``state`` records claims and holds the lease. ``clock`` is monotonic (deadlines, batching);
    ``wall_clock`` gives epoch seconds (records, the lease, registration timeouts). ``holder`` names this
    run in the lease (default: a random id). ``cache``: the watch-fed :class:`ClusterCache` to read nodes
    and pods from (synced once per pass; pending pods found from its watch events); without it every pass
    lists them.

    One pass at a time per provisioner (passes of one object are serialized); launches within a pass run
    in parallel.
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: LaunchCloud,
        state: StateStore,
        config: ProvisionerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        metrics: obs.MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        spans: obs.Spans | None = None,
        holder: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        events: EventRecorder | None = None,
        nodepool_source: NodePoolSource | None = None,
        cache: ClusterCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self._synced = False  # the cache was synced at the start of the pass under way
        self.cloud = cloud
        self.state = state
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.metrics = metrics or obs.NullMetrics()
        self.log = logger or logging.getLogger("fleetwright.provisioner")
        self.spans = spans or obs.NoSpans()
        self.holder = holder or f"provisioner-{uuid.uuid4().hex[:12]}"
        # Per EC2NodeClass, the capacity reservations it selects (set by catalogs()).
        self.reservations_by_class: dict[str, set[str]] = {}
        self.sleep = sleep
        # Nominated / FailedScheduling on pods, launch failures on NodeClaims (never breaks a pass).
        self.events = events or EventRecorder(kube.client, metrics=self.metrics, logger=self.log)
        # NodeClaim objects mirroring the claim records (when the CRD is installed).
        self.nodeclaim_objects = NodeClaimObjects(
            kube.client, clock=self.clock, metrics=self.metrics, logger=self.log, cache=cache
        )
        self.lease = state.lease(self.holder, seconds=config.lease_seconds)
        # NodePools from the cluster, re-read (and their status written) at the start of each pass.
        self.nodepool_source = nodepool_source
        self._launching: set[str] = set()  # claims this process is launching right now
        self._retry_delay = RETRY_MIN_SECONDS
        self._pass_lock = threading.RLock()
        self._lease_depth = 0  # > 0 while a pass of this provisioner holds the lease
        self._run_deadline: float | None = None  # epoch seconds: the invocation's end, during run_until

    # -- runs ------------------------------------------------------------------------------------------

    def run_until(self, deadline: float) -> RunReport:
        """Watch and provision until ``deadline`` (on ``clock``), taking the lease for each pass; with
        ``config.economy`` make one pass instead (waiting for the lease up to the deadline). Launches end
        by ``deadline`` plus ``deadline_margin_seconds`` (the invocation's end) less the launch margin."""
        report = RunReport()
        # The invocation ends ``deadline_margin_seconds`` after the watch deadline (the handler keeps that
        # margin): launches started before the deadline may run until then.
        left = max(0.0, deadline - self.clock()) + self.config.deadline_margin_seconds
        self._run_deadline = self.wall_clock() + left
        try:
            if self.config.economy:
                if not self._locked_pass(report, deadline, provision=True):
                    self.log.info(
                        "lease held by another launcher; nothing to do", extra={"holder": self.holder}
                    )
            else:
                self._loop(deadline, report)
        except LeaseLostError as lost:
            self._lease_lost(report, lost)
        except Exception as error:  # stop acting, the next run resumes
            report.error = f"{type(error).__name__}: {error}"
            self.log.exception("provisioner stopped", extra={"error": report.error})
        finally:
            self._run_deadline = None
        return report

    def run_once(self) -> RunReport:
        """Take the lease (without waiting), reconcile and make one provisioning pass, release."""
        report = RunReport()
        try:
            self._locked_pass(report, self.clock(), provision=True)
        except LeaseLostError as lost:
            self._lease_lost(report, lost)
        return report

    def _locked_pass(
        self, report: RunReport, wait_until: float, *, provision: bool, batch_size: int = 0
    ) -> bool:
        """Take the lease (waiting up to ``wait_until`` on ``clock``), reconcile and, with ``provision``,
        make a provisioning pass; release the lease. False when the lease could not be taken."""
        try:
            with self._lease_held(wait_until), self._pass_sync():
                report.lease_acquired = True
                if self.nodepool_source is not None:
                    self.nodepool_source.refresh()
                report.reconciles.append(self.reconcile())
                static_pools.keep_replicas(self, report)
                if provision:
                    report.passes.append(self.provision(batch_size=batch_size))
        except LeaseUnavailableError:
            return False
        return True

    @contextlib.contextmanager
    def _pass_sync(self) -> Iterator[None]:
        """Sync the cache once for everything the pass reads (reconciliation and provisioning see the
        cluster as of the pass's start or later). When the sync fails, each step syncs (and fails, and
        reports it) on its own."""
        if self.cache is None or self._synced:
            yield
            return
        try:
            self.cache.sync()
        except Exception as error:
            self.log.warning("cluster cache not synced", extra={"error": f"{type(error).__name__}: {error}"})
            yield
            return
        self._synced = True
        try:
            yield
        finally:
            self._synced = False

    def _ensure_synced(self) -> None:
        """Sync the cache unless this pass already did (raises when it cannot be brought up to date)."""
        if self.cache is not None and not self._synced:
            self.cache.sync()

    def _node_objects(self) -> list[dict[str, Any]]:
        """Every Node object: from the cache (synced), else one LIST."""
        if self.cache is None:
            return self.kube.list_nodes()
        self._ensure_synced()
        return self.cache.node_objects()

    def _read_snapshot(self) -> ClusterSnapshot:
        if self.cache is None:
            return read_snapshot(self.kube)
        self._ensure_synced()
        return self.cache.snapshot(sync=False)

    def _lease_lost(self, report: RunReport, lost: LeaseLostError) -> None:
        report.lease_lost = True
        self.metrics.add(obs.LEASE_LOST, 1)
        self.log.warning("lease lost; stopping", extra={"holder": self.holder, "reason": str(lost)})

    @contextlib.contextmanager
    def _lease_held(self, wait_until: float) -> Iterator[None]:
        """Hold the lease for a pass: take it (waiting up to ``wait_until`` on ``clock``) unless a pass of
        this provisioner already holds it, and release it at the end. Raises
        :class:`LeaseUnavailableError` when another launcher keeps it."""
        with self._pass_lock:
            if self._lease_depth:
                self._lease_depth += 1
                try:
                    yield
                finally:
                    self._lease_depth -= 1
                return
            if not self._acquire(wait_until):
                raise LeaseUnavailableError(
                    f"the launch lease is held by another launcher ({self.lease.name})"
                )
            self._lease_depth = 1
            try:
                yield
            finally:
                self._lease_depth = 0
                self._release()

    def _acquire(self, deadline: float) -> bool:
        try:
            return self.lease.acquire(deadline, sleep=self.sleep, clock=self.clock)
        except Exception as error:
            self.log.error("cannot take the lease", extra={"error": str(error)})
            return False

    def _release(self) -> None:
        try:
            self.lease.release()
        except Exception as error:  # it expires by itself
            self.log.warning("cannot release the lease", extra={"error": str(error)})

    def _loop(self, deadline: float, report: RunReport) -> None:
        watch_until = time.monotonic() + max(0.0, deadline - self.clock())
        watcher: PodWatcher | CachePodWatcher = (
            CachePodWatcher(self.cache) if self.cache is not None else PodWatcher(self.kube, watch_until)
        )
        watcher.start()
        self.warm_up()
        batcher = Batcher(self.config.batch_idle_seconds, self.config.batch_max_seconds)
        next_reconcile = self.clock()
        retry_at: float | None = None
        try:
            while True:
                now = self.clock()
                if now >= deadline and not batcher.open:
                    break
                wake = min(deadline, next_reconcile, batcher.closes_at() or deadline, retry_at or deadline)
                self._collect(watcher, batcher, max(0.0, wake - now))
                now = self.clock()
                provision = (
                    batcher.ready(now)
                    or (batcher.open and now >= deadline)
                    or (retry_at is not None and now >= retry_at)
                )
                if not provision and now < next_reconcile:
                    continue
                size = batcher.reset() if provision else 0
                # A pass waits a while for a lease another launcher holds; a reconciliation alone does not.
                wait_until = min(deadline, now + self.config.lease_wait_seconds) if provision else now
                taken = self._locked_pass(report, wait_until, provision=provision, batch_size=size)
                next_reconcile = self.clock() + self.config.reconcile_interval_seconds
                if provision:
                    retry_at = None
                    if not taken or report.passes[-1].needs_retry:
                        retry_at = self.clock() + self._retry_delay
                        self._retry_delay = min(RETRY_MAX_SECONDS, self._retry_delay * 2)
                    else:
                        self._retry_delay = RETRY_MIN_SECONDS
                elif taken and (report.reconciles[-1].freed_pods or report.reconciles[-1].error):
                    retry_at = self.clock() if retry_at is None else retry_at
        finally:
            watcher.stop()

    def _collect(self, watcher: PodWatcher | CachePodWatcher, batcher: Batcher, timeout: float) -> None:
        """Wait up to ``timeout`` for watch signals and feed them to the batcher."""
        try:
            signal = watcher.signals.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            if signal.new:
                batcher.add(self.clock(), signal.new)
            try:
                signal = watcher.signals.get_nowait()
            except queue.Empty:
                return

    # -- one provisioning pass -------------------------------------------------------------------------

    def provision(self, batch_size: int = 0) -> PassReport:
        """Read the cluster, schedule the pending pods, launch the claims the scheduler opens (holding the
        lease: a pass of ``run_until``/``run_once`` already does, otherwise it is taken without waiting).

        Errors are reported (``PassReport.error``), never raised, except :class:`LeaseLostError`: the next
        pass or run starts over from the cluster and the state table.
        """
        report = PassReport(batch_size=batch_size)
        if batch_size:
            self.metrics.add(obs.BATCH_SIZE, batch_size)
        try:
            with self._lease_held(self.clock()), self.spans.span("provision"):
                self._provision(report)
        except LeaseLostError:
            raise
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(obs.PASS_ERRORS, 1)
            self.log.exception("provisioning pass failed", extra={"error": report.error})
        return report

    def _provision(self, report: PassReport) -> None:
        snapshot = self._read_snapshot()
        for problem in snapshot.errors:
            self.log.warning("object ignored", extra={"error": problem.render()})
        report.pending = len(snapshot.pending_pods)
        self.metrics.add(obs.PENDING_PODS, report.pending)
        if snapshot.pending_pods:
            self._schedule_and_launch(snapshot, list(snapshot.pending_pods), list(snapshot.nodes), report)

    def launch_for(
        self,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        nodes: Sequence[Node],
        *,
        deadline: float | None = None,
    ) -> PassReport:
        """Schedule ``pods`` against ``nodes`` (and the claims in flight) and launch what the scheduler opens,
        recording claims exactly as a provisioning pass does. The interruption handler uses it for the pods
        of a node about to go (``nodes`` then leaves that node out).

        Takes the provisioner's lease first, waiting at most ``lease_wait_seconds`` (and not past
        ``deadline``, epoch seconds, which also bounds the launches). Errors are raised:
        :class:`LeaseUnavailableError` when the lease stays taken, :class:`LeaseLostError` when it is lost.
        """
        report = PassReport(pending=len(pods))
        if pods:
            with self._replacement_pass(deadline):
                self._schedule_and_launch(snapshot, list(pods), list(nodes), report)
        return report

    def launch_claims(self, claims: Sequence[NewNodeClaim], *, deadline: float | None = None) -> PassReport:
        """Launch NodeClaims decided elsewhere (the disruption controller's replacements), recording and
        launching them exactly as a provisioning pass does, under the same lease as :meth:`launch_for`.
        Claims that could not launch are in ``PassReport.failed``; other errors are raised."""
        report = PassReport(pending=sum(len(c.pods) for c in claims))
        if claims:
            with self._replacement_pass(deadline):
                catalog, accepted = self.catalogs()
                templates = own_reservations(
                    nodepool_templates(
                        self.config.nodepools, self.config.nodeclasses, (), self._node_class_requirements()
                    ),
                    self.reservations_by_class,
                )
                by_name = {t.name: t for t in catalog}
                self._launch(claims, {t.name: t for t in templates}, by_name, accepted, report)
        return report

    @contextlib.contextmanager
    def _replacement_pass(self, deadline: float | None) -> Iterator[None]:
        """The lease for a replacement launch, waited for at most ``lease_wait_seconds`` (and not past
        ``deadline``); the deadline also bounds the launch."""
        wait = self.config.lease_wait_seconds
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - self.wall_clock()))
        saved = self._run_deadline
        if deadline is not None:
            self._run_deadline = deadline if saved is None else min(saved, deadline)
        try:
            with self._lease_held(self.clock() + wait):
                yield
        except LeaseLostError as lost:
            self.metrics.add(obs.LEASE_LOST, 1)
            self.log.warning("lease lost during a replacement launch", extra={"reason": str(lost)})
            raise
        finally:
            self._run_deadline = saved

    def _schedule_and_launch(
        self, snapshot: ClusterSnapshot, pods: list[Pod], cluster_nodes: list[Node], report: PassReport
    ) -> None:
        records = self.state.nodeclaims.list()
        catalog, accepted = self.catalogs()
        by_name = {t.name: t for t in catalog}
        nodes = cluster_nodes + self._in_flight_nodes(records, cluster_nodes, by_name)
        self._reserve_promised_pods(nodes, records, snapshot, cluster_nodes, pods)
        templates = own_reservations(
            nodepool_templates(
                self.config.nodepools, self.config.nodeclasses, nodes, self._node_class_requirements()
            ),
            self.reservations_by_class,
        )
        inp = SchedulingInput(
            pods=pods,
            nodepools=templates,
            instance_types=catalog,
            nodes=nodes,
            daemonsets=list(snapshot.daemonsets),
            volumes=self._volumes(pods),
        )
        started = time.perf_counter()
        with self.spans.span("schedule"):
            results = schedule(inp)
        report.scheduling_seconds = time.perf_counter() - started
        self.metrics.add(obs.SCHEDULING_DURATION, report.scheduling_seconds * 1000, obs.MILLISECONDS)
        report.placed_on_existing = sum(len(p.pods) for p in results.existing)
        report.unschedulable = len(results.errors)
        self._log_decision(results, report)
        if results.new_claims:
            self._launch(
                results.new_claims, {t.name: t for t in templates}, by_name, accepted, report, nominate=True
            )
        self.events.publish(*self._decision_events(results, nodes, records))

    def catalogs(self) -> tuple[list[InstanceType], dict[str, set[str]]]:
        """The instance types the NodePools' EC2NodeClasses can boot (their union, for the scheduler)
        and, per node class, the names it accepts (a claim only launches types its node class boots).

        One provider call per node class in use; the provider caches the EC2 listings between passes.
        """
        names = sorted({np.node_class_name() for np in self.config.nodepools})
        catalog: dict[str, InstanceType] = {}
        accepted: dict[str, set[str]] = {}
        reservations: dict[str, set[str]] = {}
        for name in names:
            node_class = self.config.nodeclass(name)
            types = self.cloud.instance_types(node_class)
            accepted[name] = {t.name for t in types}
            reservations[name] = {o.reservation_id for t in types for o in t.offerings if o.reservation_id}
            for instance_type in types:
                catalog[instance_type.name] = with_reserved_offerings(
                    catalog.get(instance_type.name), instance_type
                )
        self.reservations_by_class = reservations
        return sorted(catalog.values(), key=lambda t: t.name), accepted

    def _template_annotations(self, nodepool: str) -> dict[str, str]:
        """The NodePool template's annotations, which its NodeClaims and Nodes carry (as Karpenter)."""
        pool = next((np for np in self.config.nodepools if np.name == nodepool), None)
        return pool.annotations() if pool is not None else {}

    def _node_class_requirements(self) -> dict[str, Requirements]:
        """What each node class in use adds to its NodePools' requirements (its placement group), when the
        cloud says; a node class whose lookup fails adds nothing (its launches report why)."""
        lookup = getattr(self.cloud, "node_class_requirements", None)
        if lookup is None:
            return {}
        found: dict[str, Requirements] = {}
        for name in sorted({np.node_class_name() for np in self.config.nodepools}):
            node_class = self.config.nodeclass(name)
            if node_class is None or node_class.spec.placement_group_selector is None:
                continue
            try:
                found[name] = lookup(node_class)
            except Exception as error:
                self.log.warning(
                    "placement group lookup failed",
                    extra={"nodeClass": name, "error": f"{type(error).__name__}: {error}"},
                )
        return found

    def warm_up(self) -> None:
        """Fill the provider's caches (instance types, prices, AMIs) before the first pod arrives."""
        try:
            with self.spans.span("warm_up"):
                self.catalogs()
        except Exception as error:  # the first pass will try again and report it
            self.log.warning("warm-up failed", extra={"error": f"{type(error).__name__}: {error}"})

    def _in_flight_nodes(
        self, records: Sequence[NodeClaimRecord], nodes: Sequence[Node], by_name: Mapping[str, InstanceType]
    ) -> list[Node]:
        """Claims launching or launched whose node has not registered yet, as nodes (so the pods waiting
        for them trigger nothing new, and they count against their NodePool's limits)."""
        registered = {n.provider_id.rstrip("/").rsplit("/", 1)[-1] for n in nodes if n.provider_id}
        return [
            in_flight_node(r, by_name)
            for r in records
            if r.in_flight and not (r.instance_id and r.instance_id in registered)
        ]

    @staticmethod
    def _reserve_promised_pods(
        nodes: Sequence[Node],
        records: Sequence[NodeClaimRecord],
        snapshot: ClusterSnapshot,
        usable: Sequence[Node],
        batch: Sequence[Pod],
    ) -> None:
        """Put on each in-flight claim the pods it was launched for that still run on a node that is going
        (left out of ``usable``, cordoned or marked disrupted: the pods of a node being replaced), unless
        they are in this simulation: another replacement must not count the room they were promised as free.
        Pending pods a claim was launched for are simulated again and land on it as before, and pods that
        found a place on a node that stays need no room on it, so neither is reserved."""
        simulated = {p.key for p in batch}
        kept = {n.name for n in usable}
        going = [
            n
            for n in snapshot.nodes
            if n.name not in kept or n.unschedulable or any(t.key == DISRUPTED_TAINT_KEY for t in n.taints)
        ]
        running = {p.key: p for n in going for p in n.pods}
        promised = {r.id: r.pods for r in records}
        for node in nodes:
            if not node.in_flight:
                continue
            for key in promised.get(node.name, ()):
                pod = running.get(key)
                if pod is not None and key not in simulated:
                    node.pods.append(pod)

    def _volumes(self, pods: Sequence[Pod]) -> dict[str, Any]:
        if not any(p.volume_claims for p in pods):
            return {}
        return dict(
            volume_requirements(self.kube.list_pvcs(), self.kube.list_pvs(), self.kube.list_storage_classes())
        )

    def _log_decision(self, results: Results, report: PassReport) -> None:
        if results.existing:
            self.log.info(
                "pods fit existing or launching nodes",
                extra={
                    "pods": report.placed_on_existing,
                    "nodes": {p.node: len(p.pods) for p in results.existing},
                },
            )
        if results.errors:
            self.metrics.add(obs.UNSCHEDULABLE_PODS, len(results.errors))
            reasons = Counter(e.reason for e in results.errors)
            for reason, count in reasons.most_common():
                keys = [e.pod.key for e in results.errors if e.reason == reason][:MAX_LOGGED_PODS]
                self.log.warning(
                    "pods cannot be scheduled", extra={"reason": reason, "count": count, "pods": keys}
                )

    @staticmethod
    def _decision_events(
        results: Results, nodes: Sequence[Node], records: Sequence[NodeClaimRecord]
    ) -> list[Event]:
        """Nominated for pods placed on nodes and claims in flight (``nodeclaim/X, node/Y`` as Karpenter
        writes it), FailedScheduling with the scheduler's reason for pods no NodePool can run."""
        in_flight = {n.name for n in nodes if n.in_flight}
        claim_of_node = {r.node_name: r.id for r in records if r.node_name and r.active}
        found: list[Event] = []
        for placement in results.existing:
            if placement.node in in_flight:
                where = {"nodeclaim": placement.node}
            else:
                where = {"nodeclaim": claim_of_node.get(placement.node, ""), "node": placement.node}
            found.extend(reasons.nominated(pod, **where) for pod in placement.pods)
        found.extend(reasons.failed_scheduling(e.pod, e.reason) for e in results.errors)
        return found

    # -- launching ---------------------------------------------------------------------------------------

    def _launch_deadline(self) -> float:
        """When this pass's launches must be done (epoch seconds): the lease's expiry or the invocation's
        end, whichever comes first, less a safety margin."""
        limit = self.lease.expires_at
        if self._run_deadline is not None:
            limit = min(limit, self._run_deadline)
        return limit - self.config.launch_margin_seconds

    def _launch(
        self,
        claims: Sequence[NewNodeClaim],
        templates: Mapping[str, NodePoolTemplate],
        by_name: Mapping[str, InstanceType],
        accepted: Mapping[str, set[str]],
        report: PassReport,
        *,
        nominate: bool = False,
    ) -> None:
        # Renewing proves the lease is still ours and gives the launches a full lease to finish in.
        self.lease.renew()
        deadline = self._launch_deadline()
        if deadline - self.wall_clock() < MIN_LAUNCH_SECONDS:
            for claim in claims:
                report.failed[claim.name] = f"{DEADLINE_EXCEEDED}: no time left to launch before the deadline"
            self.log.warning("no time left to launch", extra={"claims": len(claims)})
            return
        planned: list[tuple[NewNodeClaim, NodeClaimRecord, LaunchRequest]] = []
        pool_hashes = nodepool_hashes(self.config.nodepools)
        class_hashes = nodeclass_hashes(self.config.nodeclasses)
        try:
            for claim in claims:
                template = templates[claim.nodepool]
                node_class = self.config.nodeclass(template.node_class)
                bootable = accepted.get(template.node_class, set())
                candidates = [t for t in claim.instance_types if t.name in bootable]
                if not candidates:
                    reason = (
                        f"EC2NodeClass {template.node_class}: no AMI boots any of the claim's instance types"
                    )
                    report.failed[claim.name] = reason
                    self.log.error("cannot launch", extra={"nodePool": claim.nodepool, "reason": reason})
                    continue
                record = claim_record(
                    claim,
                    new_claim_id(claim.nodepool),
                    template,
                    candidates,
                    holder=self.holder,
                    now=self.wall_clock(),
                )
                record.launch_deadline = deadline
                record.annotations = self._template_annotations(claim.nodepool)
                # What the node is meant to look like, so the disruption controller can tell drift.
                record.nodepool_hash = pool_hashes.get(claim.nodepool, "")
                record.nodeclass_hash = class_hashes.get(template.node_class, "")
                # Recorded before the launch, fenced: a crash after CreateFleet leaves a claim to match by
                # tag, and a launcher that lost the lease records (and so launches) nothing.
                if not self.state.nodeclaims.create(record, fence=self.lease):
                    report.failed[claim.name] = f"claim id {record.id} already exists"
                    continue
                self._launching.add(record.id)
                efa = claim.requests.get(EFA_RESOURCE, 0) > 0
                planned.append((claim, record, launch_request(record, candidates, node_class, efa=efa)))
            refused_before = self._refused_offerings()
            self._launch_parallel(planned, deadline, templates, by_name, report, refused_before)
            for claim, record, _ in planned:
                if record.id not in report.failed:
                    self.nodeclaim_objects.write(record, requests=claim.requests)
            if nominate:
                self.events.publish(
                    *(
                        reasons.nominated(pod, nodeclaim=record.id)
                        for claim, record, _ in planned
                        if record.id not in report.failed
                        for pod in claim.pods
                    )
                )
        finally:
            # Claims recorded but not settled here stay Launching: reconciliation adopts their instance
            # (found by tag) or fails them once their deadline and the settle grace have passed.
            self._launching.difference_update(r.id for _, r, _ in planned)

    def _launch_parallel(
        self,
        planned: Sequence[tuple[NewNodeClaim, NodeClaimRecord, LaunchRequest]],
        deadline: float,
        templates: Mapping[str, NodePoolTemplate],
        by_name: Mapping[str, InstanceType],
        report: PassReport,
        refused_before: set[tuple[str, str, str]],
    ) -> None:
        """One CreateFleet per claim, ``launch_parallelism`` at a time, each bounded by ``deadline``;
        outcomes are recorded (fenced) as they come in."""
        if not planned:
            return
        stop = threading.Event()  # set when the lease is lost: launches not started yet are skipped
        workers = max(1, min(self.config.launch_parallelism, len(planned)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleetwright-launch") as pool:
            futures: dict[Future[LaunchedInstance | BaseException], int] = {
                pool.submit(self._launch_one, request, deadline, stop): i
                for i, (_, _, request) in enumerate(planned)
            }
            try:
                for future in as_completed(futures):
                    claim, record, _ = planned[futures[future]]
                    outcome = future.result()
                    if isinstance(outcome, LeaseLostError):
                        raise outcome
                    # Still ours? (Renews when the launch took most of the lease; proves no one took it.)
                    self.lease.ensure(self.config.launch_margin_seconds)
                    if isinstance(outcome, LaunchedInstance):
                        refused = self._refused_offerings() - refused_before
                        self._record_launched(
                            claim, record, outcome, templates[claim.nodepool], by_name, report
                        )
                        self._record_recovery(record, outcome, refused)
                    elif isinstance(outcome, LaunchError):
                        self._record_failed(record, outcome, report)
                    else:
                        self._record_unknown(record, outcome, report)
            except LeaseLostError:
                stop.set()
                raise

    def _launch_one(
        self, request: LaunchRequest, deadline: float, stop: threading.Event
    ) -> LaunchedInstance | BaseException:
        """One claim's launch (in a pool thread): the instance, or what went wrong (returned, not raised)."""
        if stop.is_set():
            return LeaseLostError("the lease was lost before this launch started")
        try:
            # The lease must outlast the launch: renew now if it would expire before the deadline.
            self.lease.ensure(max(0.0, deadline - self.wall_clock()) + self.config.launch_margin_seconds)
        except LeaseLostError as lost:
            return lost
        except Exception as error:  # the lease could not be checked: do not launch
            return LaunchError(
                request.nodeclaim, [LaunchFailure(FailureKind.UNKNOWN, "LeaseCheckFailed", str(error))]
            )
        try:
            with deadline_scope(Deadline(deadline, self.wall_clock)), self.spans.span("launch"):
                return self.cloud.launch(request)
        except Exception as error:  # LaunchError, or an unexpected error after which the outcome is unknown
            return error

    def _record_launched(
        self,
        claim: NewNodeClaim,
        record: NodeClaimRecord,
        instance: LaunchedInstance,
        template: NodePoolTemplate,
        by_name: Mapping[str, InstanceType],
        report: PassReport,
    ) -> None:
        now = self.wall_clock()
        price = offering_price(by_name, instance.instance_type, instance.zone, instance.capacity_type)
        changes = launched_fields(instance, now, price, record.labels)
        launched_type = by_name.get(instance.instance_type)
        if launched_type is not None:
            changes["allocatable"] = {
                k: max(0, v)
                for k, v in res.subtract(
                    instance_type_allocatable(launched_type, template.kubelet), claim.daemon_requests
                ).items()
            }
            changes["capacity"] = dict(launched_type.capacity)
        for name, value in changes.items():
            setattr(record, name, value)
        if not self.state.nodeclaims.transition(
            record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=self.lease, **changes
        ):
            # Settled by someone else meanwhile (it should not happen: settling waits for the deadline).
            self.log.error(
                "instance launched for a claim that is no longer launching",
                extra={"nodeclaim": record.id, "instanceId": instance.instance_id},
            )
            return
        record.status = str(ClaimStatus.LAUNCHED)
        self.nodeclaim_objects.remember_image(record.id, instance.image_id)
        report.launched.append(record)
        dimensions = {
            "NodePool": record.nodepool,
            "InstanceType": record.instance_type,
            "CapacityType": record.capacity_type,
        }
        self.metrics.add(obs.CLAIMS_LAUNCHED, 1, obs.COUNT, dimensions)
        self.metrics.add(
            obs.HOURLY_COST_LAUNCHED, record.price or 0.0, obs.NONE, {"NodePool": record.nodepool}
        )
        self.log.info(
            "nodeclaim launched",
            extra={
                "nodeclaim": record.id,
                "nodePool": record.nodepool,
                "podCount": record.pod_count,
                "pods": record.pods[:MAX_LOGGED_PODS],
                "instanceType": record.instance_type,
                "candidates": record.instance_types[:10],
                "zone": record.zone,
                "capacityType": record.capacity_type,
                "pricePerHour": record.price,
                "instanceId": record.instance_id,
                "reused": instance.reused,
            },
        )

    def _refused_offerings(self) -> set[tuple[str, str, str]]:
        """The offerings (type, zone, capacity type) the unavailable-offerings cache holds now."""
        return {(e.instance_type, e.zone, e.capacity_type) for e in self.state.unavailable.entries()}

    def _record_recovery(
        self, record: NodeClaimRecord, instance: LaunchedInstance, refused: set[tuple[str, str, str]]
    ) -> None:
        """Count a claim launched although EC2 refused one of its candidate offerings during this launch
        (capacity or quota): the launch fell back to another type, zone or capacity type. Refusals are
        read from the shared cache, so two claims launched in parallel with common candidates may both
        count one refusal."""
        if instance.reused:
            return
        candidates = set(record.instance_types)
        capacity_types = set(record.capacity_types)
        if any(t in candidates and (not capacity_types or c in capacity_types) for t, _, c in refused):
            self.metrics.add(obs.INSUFFICIENT_CAPACITY_RECOVERED, 1, obs.COUNT, {"NodePool": record.nodepool})

    def _record_failed(self, record: NodeClaimRecord, error: LaunchError, report: PassReport) -> None:
        reason = "; ".join(error.reasons) or str(error)
        for code in error.codes or ["Unknown"]:
            self.metrics.add(
                obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": record.nodepool, "ErrorCode": code}
            )
        if error.may_have_launched:
            # A request may have created the instance without telling us: only its tag can tell, once
            # DescribeInstances shows it. Reconciliation settles the claim after its deadline and grace.
            report.failed[record.id] = f"{reason} (the instance may exist; settled after the launch deadline)"
            self.log.warning(
                "nodeclaim launch outcome unknown; left for reconciliation",
                extra={"nodeclaim": record.id, "nodePool": record.nodepool, "reason": reason},
            )
            return
        now = self.wall_clock()
        if not self.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHING,
            ClaimStatus.FAILED,
            fence=self.lease,
            reason=reason[:1000],
            expires_at=int(now + self.config.failed_claim_ttl_seconds),
        ):
            self.log.warning("failed claim was settled by another writer", extra={"nodeclaim": record.id})
        report.failed[record.id] = reason
        capacity = bool(error.failures) and all(
            f.kind == FailureKind.INSUFFICIENT_CAPACITY for f in error.failures
        )
        self.events.publish(
            reasons.launch_failed(reasons.nodeclaim_ref(record.id), reason, capacity=capacity)
        )
        self.log.error(
            "nodeclaim launch failed",
            extra={
                "nodeclaim": record.id,
                "nodePool": record.nodepool,
                "podCount": record.pod_count,
                "candidates": record.instance_types[:10],
                "reason": reason,
                "kinds": sorted({str(f.kind) for f in error.failures}),
            },
        )

    def _record_unknown(self, record: NodeClaimRecord, error: BaseException, report: PassReport) -> None:
        """A launch that ended with an unexpected error: whether CreateFleet took effect is unknown, so the
        claim stays Launching for reconciliation to settle."""
        reason = f"{type(error).__name__}: {error}"
        report.failed[record.id] = f"{reason} (the instance may exist; settled after the launch deadline)"
        self.metrics.add(
            obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": record.nodepool, "ErrorCode": "Unknown"}
        )
        self.log.error(
            "nodeclaim launch ended with an unexpected error",
            extra={"nodeclaim": record.id, "nodePool": record.nodepool, "error": reason},
            exc_info=error,
        )

    # -- following launched claims -----------------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Match registering nodes to claims, mark them initialized, terminate claims that never
        registered, and settle claims a dead launcher left ``Launching`` (holding the lease: a pass of
        ``run_until``/``run_once`` already does, otherwise it is taken without waiting). Errors are
        reported, not raised, except :class:`LeaseLostError`."""
        report = ReconcileReport()
        try:
            with self._lease_held(self.clock()), self.spans.span("reconcile"):
                self._reconcile(report)
                self._sync_nodeclaim_objects()
        except LeaseLostError:
            raise
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(obs.PASS_ERRORS, 1)
            self.log.exception("reconciliation failed", extra={"error": report.error})
        return report

    def _reconcile(self, report: ReconcileReport) -> None:
        records = self.state.nodeclaims.list()
        following = [r for r in records if r.status in (ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)]
        orphans = [r for r in records if r.status == ClaimStatus.LAUNCHING and r.id not in self._launching]
        if orphans:
            self._settle_orphans(orphans, report)
            following += [r for r in orphans if r.status == ClaimStatus.LAUNCHED]
        if not following:
            return
        nodes = nodes_by_instance(self._node_objects())
        now = self.wall_clock()
        type_labels = _TypeLabels(self.catalogs)
        for record in following:
            node = nodes.get(record.instance_id)
            if record.status == ClaimStatus.LAUNCHED and node is None:
                self._check_timeout(record, now, report)
                continue
            if node is not None and record.status in (ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED):
                # Labels, finalizer and registered label go on the Node before the claim says Registered.
                node = self._sync_node(node, registration_change(record, type_labels(record)))
                if node is None:
                    continue  # the Node went away meanwhile: the next reconciliation looks again
            if record.status == ClaimStatus.LAUNCHED and node is not None:
                if not self.state.nodeclaims.transition(
                    record.id,
                    ClaimStatus.LAUNCHED,
                    ClaimStatus.REGISTERED,
                    registered_at=now,
                    node_name=node_name(node),
                ):
                    self._lost_transition(record, ClaimStatus.REGISTERED)
                else:
                    record.status = str(ClaimStatus.REGISTERED)
                    report.registered.append(record.id)
                    self.metrics.add(obs.NODES_REGISTERED, 1, obs.COUNT, {"NodePool": record.nodepool})
                    self.log.info(
                        "node registered",
                        extra={
                            "nodeclaim": record.id,
                            "node": node_name(node),
                            "instanceId": record.instance_id,
                        },
                    )
            if record.status != ClaimStatus.REGISTERED or node is None or not is_initialized(node, record):
                continue
            if self._sync_node(node, initialization_change) is None:
                continue
            if not self.state.nodeclaims.transition(
                record.id, ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED, initialized_at=now
            ):
                self._lost_transition(record, ClaimStatus.INITIALIZED)
            else:
                report.initialized.append(record.id)
                self.metrics.add(obs.NODES_INITIALIZED, 1, obs.COUNT, {"NodePool": record.nodepool})
                self.log.info("node initialized", extra={"nodeclaim": record.id, "node": node_name(node)})

    def _sync_node(
        self, node: Mapping[str, Any], change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> Mapping[str, Any] | None:
        """Apply ``change`` to the Node unless the listed object already has it; the Node as written, or
        None when it no longer exists or the API refused (logged and counted: the next reconciliation
        tries again, and the claim does not move on meanwhile)."""
        if change(dict(node)) is None:
            return node
        try:
            return self.kube.modify(NODES, node_name(node), change)
        except Exception as error:
            self.metrics.add(NODE_SYNC_ERRORS, 1, obs.COUNT)
            self.log.warning(
                "cannot update the node; the next reconciliation tries again",
                extra={"node": node_name(node), "error": f"{type(error).__name__}: {error}"[:500]},
            )
            return None

    def _sync_nodeclaim_objects(self) -> None:
        """Bring the NodeClaim objects in line with the records (after the table, which stays right)."""
        try:
            self._ensure_synced()
            if self.nodeclaim_objects.installed():
                self.nodeclaim_objects.sync(self.state.nodeclaims.list())
        except Exception as error:  # the mirror never fails a reconciliation
            self.metrics.add(NODECLAIM_SYNC_ERRORS, 1, obs.COUNT, {"Operation": "Reconcile"})
            self.log.warning(
                "NodeClaim objects not reconciled", extra={"error": f"{type(error).__name__}: {error}"}
            )

    def _check_timeout(self, record: NodeClaimRecord, now: float, report: ReconcileReport) -> None:
        since = record.launched_at or record.created_at
        if now - since < self.config.registration_timeout_seconds:
            return
        self.cloud.terminate([record.instance_id])
        if not self.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHED,
            ClaimStatus.TERMINATED,
            reason=f"node did not register within {self.config.registration_timeout_seconds:.0f} s",
            expires_at=int(now + self.config.terminated_claim_ttl_seconds),
        ):
            self._lost_transition(record, ClaimStatus.TERMINATED)
        else:
            report.timed_out.append(record.id)
            self.metrics.add(obs.REGISTRATION_TIMEOUTS, 1, obs.COUNT, {"NodePool": record.nodepool})
            self.log.warning(
                "node never registered; instance terminated",
                extra={
                    "nodeclaim": record.id,
                    "instanceId": record.instance_id,
                    "instanceType": record.instance_type,
                    "zone": record.zone,
                    "secondsSinceLaunch": round(now - since),
                },
            )

    def _lost_transition(self, record: NodeClaimRecord, status: ClaimStatus) -> None:
        self.log.info(
            "claim changed meanwhile; transition skipped",
            extra={"nodeclaim": record.id, "from": record.status, "to": str(status)},
        )

    def settle_at(self, record: NodeClaimRecord) -> float:
        """When a ``Launching`` claim no live launcher holds may be settled (epoch seconds): its launch
        deadline plus the settle grace (the last request's read timeout, and DescribeInstances showing a
        new instance late); for claims recorded without a deadline, ``orphan_grace_seconds`` after
        creation."""
        if record.launch_deadline is not None:
            return float(record.launch_deadline) + self.config.settle_grace_seconds
        return record.created_at + self.config.orphan_grace_seconds

    def _settle_orphans(self, orphans: Sequence[NodeClaimRecord], report: ReconcileReport) -> None:
        """Claims recorded but never marked launched or failed: their launcher died, lost the lease, or
        does not know whether CreateFleet took effect. Once past their settle time each is adopted (its
        instance found by tag) or failed, fenced by the lease."""
        now = self.wall_clock()
        due = [r for r in orphans if now >= self.settle_at(r)]
        if not due:
            return
        instances: dict[str, LaunchedInstance] = {}
        for instance in self.cloud.list():
            claim = getattr(instance, "nodeclaim", "")
            if claim:
                instances.setdefault(
                    claim,
                    LaunchedInstance(
                        nodeclaim=claim,
                        instance_id=instance.id,
                        instance_type=instance.instance_type,
                        zone=instance.zone,
                        capacity_type=instance.capacity_type,
                        reused=True,
                    ),
                )
        missing = [r.id for r in due if r.id not in instances]
        find = getattr(self.cloud, "find_claimed", None)
        if missing and find is not None:
            # Look once more, by tag, before failing a claim: a listing can miss a new instance.
            instances.update(find(missing))
        for record in due:
            launched = instances.get(record.id)
            if launched is not None:
                changes = launched_fields(launched, now, record.expected_price, record.labels)
                if self.state.nodeclaims.transition(
                    record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=self.lease, **changes
                ):
                    for name, value in changes.items():
                        setattr(record, name, value)
                    record.status = str(ClaimStatus.LAUNCHED)
                    report.adopted.append(record.id)
                    self.log.info(
                        "interrupted launch found its instance",
                        extra={"nodeclaim": record.id, "instanceId": launched.instance_id},
                    )
                else:
                    self._lost_transition(record, ClaimStatus.LAUNCHED)
            elif self.state.nodeclaims.transition(
                record.id,
                ClaimStatus.LAUNCHING,
                ClaimStatus.FAILED,
                fence=self.lease,
                reason="launch interrupted before an instance was created",
                expires_at=int(now + self.config.failed_claim_ttl_seconds),
            ):
                report.abandoned.append(record.id)
                self.log.warning(
                    "interrupted launch had no instance; claim failed", extra={"nodeclaim": record.id}
                )
            else:
                self._lost_transition(record, ClaimStatus.FAILED)


class _TypeLabels:
    """The catalog's labels of a claim's instance type, the catalog read once and only when needed."""

    def __init__(self, catalogs: Callable[[], tuple[list[InstanceType], dict[str, set[str]]]]) -> None:
        self._catalogs = catalogs
        self._by_name: dict[str, InstanceType] | None = None

    def __call__(self, record: NodeClaimRecord) -> dict[str, str]:
        if self._by_name is None:
            self._by_name = {t.name: t for t in self._catalogs()[0]}
        found = self._by_name.get(record.instance_type)
        if found is None:
            return {}
        labels = dict(found.labels)
        zone_id = next((o.zone_id for o in found.offerings if o.zone == record.zone and o.zone_id), "")
        if zone_id:
            labels[ZONE_ID] = zone_id
        return labels
