"""The provisioning loop: pending pods → scheduling simulation → NodeClaims launched and followed.

One :class:`Provisioner` per invocation (or per demo run). :meth:`Provisioner.run_until` watches
unschedulable pods, batches them, and runs a pass per batch until the deadline; :meth:`Provisioner.run_once`
is the economy mode's single pass. Each pass (reconcile, schedule, launch) holds the lease, and only the
pass: watching and batching run without it, so interruption and disruption replacements
(:meth:`Provisioner.launch_for`, :meth:`~fleetwright.claims.lifecycle.ClaimLifecycle.launch_claims`),
which take the same lease, wait seconds, not a minute.

The lease, the launches (recorded and fenced before each CreateFleet) and the following of launched claims
are the shared claim lifecycle (:class:`~fleetwright.claims.lifecycle.ClaimLifecycle`); this module decides
what to launch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetwright.claims.lifecycle import ClaimLifecycle
from fleetwright.claims.records import in_flight_node
from fleetwright.claims.reports import PassReport, ReconcileReport, RunReport
from fleetwright.claims.starting import scheduling_nodes
from fleetwright.cloud.provider import LaunchCloud
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube import reasons
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.events import Event, EventRecorder
from fleetwright.kube.snapshot import ClusterSnapshot
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import DISRUPTED_TAINT_KEY
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.volumes import volume_requirements
from fleetwright.observability import metrics as obs
from fleetwright.provisioning import static_pools
from fleetwright.provisioning.batcher import Batcher
from fleetwright.provisioning.clock import LoopClock, RealClock
from fleetwright.provisioning.compatible import incompatible_pools
from fleetwright.provisioning.watcher import CachePodWatcher, PodWatcher
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NewNodeClaim, Results, SchedulingInput
from fleetwright.state.lease import LeaseLostError, LeaseUnavailableError
from fleetwright.state.nodeclaims import NodeClaimRecord
from fleetwright.state.store import StateStore

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache
    from fleetwright.provisioning.nodepool_source import NodePoolSource

MAX_LOGGED_PODS = 20
RETRY_MIN_SECONDS = 2.0
RETRY_MAX_SECONDS = 30.0


class Provisioner:
    """Launches nodes for unschedulable pods in one cluster.

    ``kube`` reads pods and nodes, ``cloud`` launches and terminates instances (:class:`LaunchCloud`),
    ``state`` records claims and holds the lease. ``clock`` is monotonic (deadlines, batching);
    ``wall_clock`` gives epoch seconds (records, the lease, registration timeouts). ``holder`` names this
    run in the lease (default: a random id). ``loop_clock`` is what the watching loop waits on for pod
    signals (default: real time, blocking on the watch's queue); given, it is also ``clock`` and ``sleep``
    (a virtual clock moves when the loop waits or sleeps). ``cache``: the watch-fed :class:`ClusterCache`
    to read nodes and pods from (synced once per pass; pending pods found from its watch events); without
    it every pass lists them.

    One pass at a time per provisioner (passes of one object are serialized); launches within a pass run
    in parallel. The lease, launches and reconciliation are :attr:`lifecycle`'s.
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
        loop_clock: LoopClock | None = None,
    ) -> None:
        if loop_clock is not None:
            clock, sleep = loop_clock.monotonic, loop_clock.sleep
        self.loop_clock: LoopClock = loop_clock or RealClock(clock, sleep)
        self.kube = kube
        self.cache = cache
        self.state = state
        self.config = config
        self.wall_clock = wall_clock
        self.metrics = metrics or obs.NullMetrics()
        self.log = logger or logging.getLogger("fleetwright.provisioner")
        self.spans = spans or obs.NoSpans()
        self.holder = holder or f"provisioner-{uuid.uuid4().hex[:12]}"
        self.lifecycle = ClaimLifecycle(
            kube,
            cloud,
            state,
            config,
            clock=clock,
            wall_clock=wall_clock,
            metrics=self.metrics,
            logger=self.log,
            spans=self.spans,
            holder=self.holder,
            sleep=sleep,
            events=events,
            cache=cache,
        )
        # Nominated / FailedScheduling on pods, launch failures on NodeClaims (never breaks a pass).
        self.events = self.lifecycle.events
        # NodePools from the cluster, re-read (and their status written) at the start of each pass.
        self.nodepool_source = nodepool_source
        self._retry_delay = RETRY_MIN_SECONDS

    @property
    def clock(self) -> Callable[[], float]:
        """The monotonic clock of deadlines, batching and lease waits (shared with :attr:`lifecycle`)."""
        return self.lifecycle.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.lifecycle.clock = clock

    # -- runs ------------------------------------------------------------------------------------------

    def run_until(self, deadline: float) -> RunReport:
        """Watch and provision until ``deadline`` (on ``clock``), taking the lease for each pass; with
        ``config.economy`` make one pass instead (waiting for the lease up to the deadline). Launches end
        by ``deadline`` plus ``deadline_margin_seconds`` (the invocation's end) less the launch margin."""
        report = RunReport()
        # The invocation ends ``deadline_margin_seconds`` after the watch deadline (the handler keeps that
        # margin): launches started before the deadline may run until then.
        left = max(0.0, deadline - self.clock()) + self.config.deadline_margin_seconds
        self.lifecycle.run_deadline = self.wall_clock() + left
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
            self.lifecycle.run_deadline = None
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
            with self.lifecycle.lease_held(wait_until), self.lifecycle.pass_sync():
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

    def _lease_lost(self, report: RunReport, lost: LeaseLostError) -> None:
        report.lease_lost = True
        self.metrics.add(obs.LEASE_LOST, 1)
        self.log.warning("lease lost; stopping", extra={"holder": self.holder, "reason": str(lost)})

    def _loop(self, deadline: float, report: RunReport) -> None:
        # The pod watch is an HTTP watch on real time; on a virtual clock it ends when the loop stops it.
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
                if taken and report.reconciles[-1].initialized:
                    retry_at = after_initialized(retry_at, self.clock() + self.config.batch_idle_seconds)
        finally:
            watcher.stop()

    def _collect(self, watcher: PodWatcher | CachePodWatcher, batcher: Batcher, timeout: float) -> None:
        """Wait up to ``timeout`` (on :attr:`loop_clock`) for watch signals and feed them to the batcher."""
        signal = self.loop_clock.wait(watcher.signals, timeout)
        while signal is not None:
            if signal.new:
                batcher.add(self.clock(), signal.new)
            signal = self.loop_clock.wait(watcher.signals, 0.0)

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
            with self.lifecycle.lease_held(self.clock()), self.spans.span("provision"):
                self._provision(report)
        except LeaseLostError:
            raise
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(obs.PASS_ERRORS, 1)
            self.log.exception("provisioning pass failed", extra={"error": report.error})
        return report

    def _provision(self, report: PassReport) -> None:
        snapshot = self.lifecycle.read_snapshot()
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
            with self.lifecycle.replacement_pass(deadline):
                self._schedule_and_launch(snapshot, list(pods), list(nodes), report)
        return report

    def launch_claims(self, claims: Sequence[NewNodeClaim], *, deadline: float | None = None) -> PassReport:
        """Launch NodeClaims decided elsewhere, under this provisioner's lease
        (:meth:`ClaimLifecycle.launch_claims`)."""
        return self.lifecycle.launch_claims(claims, deadline=deadline)

    def reconcile(self) -> ReconcileReport:
        """Follow the launched claims to their nodes (:meth:`ClaimLifecycle.reconcile`)."""
        return self.lifecycle.reconcile()

    def catalogs(self) -> tuple[list[InstanceType], dict[str, set[str]]]:
        """The instance types the node classes boot, and per node class their names
        (:meth:`ClaimLifecycle.catalogs`)."""
        return self.lifecycle.catalogs()

    def _schedule_and_launch(
        self, snapshot: ClusterSnapshot, pods: list[Pod], cluster_nodes: list[Node], report: PassReport
    ) -> None:
        records = self.state.nodeclaims.list()
        catalog, accepted = self.catalogs()
        by_name = {t.name: t for t in catalog}
        # Nodes launched for pods and still starting keep them, whatever not-ready or startup taints they
        # carry meanwhile (claims/starting.py): those pods are on their way, not unschedulable.
        cluster_nodes = scheduling_nodes(cluster_nodes, records, snapshot.daemonsets)
        nodes = cluster_nodes + self._in_flight_nodes(records, cluster_nodes, by_name)
        self._reserve_promised_pods(nodes, records, snapshot, cluster_nodes, pods)
        templates = self.lifecycle.templates(nodes)
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
            self.lifecycle.launch(
                results.new_claims, {t.name: t for t in templates}, by_name, accepted, report, nominate=True
            )
        self.events.publish(*self._decision_events(results, nodes, records))
        self.events.publish(
            *(
                reasons.no_compatible_instance_types(reasons.nodepool_ref(pool), min_values=min_values)
                for pool, min_values in incompatible_pools(templates, catalog, accepted)
            )
        )

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


def after_initialized(retry_at: float | None, settled: float) -> float:
    """When the next pass runs once claims became initialized: one batching idle window later (``settled``),
    when the kube-scheduler has bound what fits on the new nodes, unless a pass is due sooner.

    The kube-scheduler binds in its own order, not in the pass's: pods a pass placed on a claim can find its
    node taken by others once it is Ready (several nodes of one launch become Ready one after another, and
    the first takes every pod that fits). Those pods stay Pending with a condition the watch has already
    seen, so without this pass they would wait for the next invocation.
    """
    return settled if retry_at is None else min(retry_at, settled)
