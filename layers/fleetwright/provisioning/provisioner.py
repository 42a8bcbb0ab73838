"""The provisioning loop: pending pods → scheduling simulation → NodeClaims launched and followed.

One :class:`Provisioner` per invocation (or per demo run). :meth:`Provisioner.run_until` takes the lease,
watches unschedulable pods, batches them, and runs a pass per batch until the deadline;
:meth:`Provisioner.run_once` is the economy mode's single pass. Every step leaves the state table
consistent: claims are recorded before they are launched, status changes are conditional, and whatever
a crash leaves half done is finished by the next run's reconciliation.
"""

from __future__ import annotations

import logging
import queue
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleetwright.aws.request import LaunchedInstance, LaunchError, LaunchRequest
from fleetwright.disruption.hashes import nodeclass_hashes, nodepool_hashes
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.model import resources as res
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.volumes import volume_requirements
from fleetwright.provisioning import observability as obs
from fleetwright.provisioning.batcher import Batcher
from fleetwright.provisioning.claims import (
    claim_record,
    in_flight_node,
    launch_request,
    launched_fields,
    new_claim_id,
    offering_price,
)
from fleetwright.provisioning.cloud import Cloud
from fleetwright.provisioning.config import ProvisionerConfig
from fleetwright.provisioning.registration import is_initialized, node_name, nodes_by_instance
from fleetwright.provisioning.reports import PassReport, ReconcileReport, RunReport
from fleetwright.provisioning.watcher import PodWatcher
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate, Results, SchedulingInput
from fleetwright.state.lease import LeaseLostError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.state.store import StateStore

MAX_LOGGED_PODS = 20
RETRY_MIN_SECONDS = 2.0
RETRY_MAX_SECONDS = 30.0


def error_code(reason: str) -> str:
    """The EC2 error code a launch failure reason starts with (``InsufficientInstanceCapacity: ...``)."""
    head = reason.split(":", 1)[0].split(" ", 1)[0].strip()
    return head if head and head[0].isupper() and head.isalnum() else "Other"


class Provisioner:
    """Launches nodes for unschedulable pods in one cluster.

    ``kube`` reads pods and nodes, ``cloud`` launches and terminates instances (:class:`Cloud`),
    ``state`` records claims and holds the lease. ``clock`` is monotonic (deadlines, batching);
    ``wall_clock`` gives epoch seconds (records, the lease, registration timeouts). ``holder`` names this
    run in the lease (default: a random id).
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: Cloud,
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
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.state = state
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.metrics = metrics or obs.NullMetrics()
        self.log = logger or logging.getLogger("fleetwright.provisioner")
        self.spans = spans or obs.NoSpans()
        self.holder = holder or f"provisioner-{uuid.uuid4().hex[:12]}"
        self.sleep = sleep
        self.lease = state.lease(self.holder, seconds=config.lease_seconds)
        self._launching: set[str] = set()  # claims this process is launching right now
        self._retry_delay = RETRY_MIN_SECONDS

    # -- runs ------------------------------------------------------------------------------------------

    def run_until(self, deadline: float) -> RunReport:
        """Take the lease (waiting for it up to ``deadline``), then watch and provision until ``deadline``
        (on ``clock``); with ``config.economy`` make one pass instead. Releases the lease at the end."""
        report = RunReport()
        if not self._acquire(deadline):
            self.log.info("lease held by another provisioner; nothing to do", extra={"holder": self.holder})
            return report
        report.lease_acquired = True
        try:
            if self.config.economy:
                self._single_pass(report)
            else:
                self._loop(deadline, report)
        except LeaseLostError as lost:
            report.lease_lost = True
            self.log.warning("lease lost; stopping", extra={"reason": str(lost)})
        except Exception as error:  # e.g. the lease could not be renewed: stop acting, the next run resumes
            report.error = f"{type(error).__name__}: {error}"
            self.log.exception("provisioner stopped", extra={"error": report.error})
        finally:
            self._release()
        return report

    def run_once(self) -> RunReport:
        """Take the lease (without waiting), reconcile and make one provisioning pass, release."""
        report = RunReport()
        if not self._acquire(self.clock()):
            return report
        report.lease_acquired = True
        try:
            self._single_pass(report)
        except LeaseLostError:
            report.lease_lost = True
        finally:
            self._release()
        return report

    def _single_pass(self, report: RunReport) -> None:
        report.reconciles.append(self.reconcile())
        report.passes.append(self.provision())

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
        watcher = PodWatcher(self.kube, watch_until).start()
        self.warm_up()
        batcher = Batcher(self.config.batch_idle_seconds, self.config.batch_max_seconds)
        next_reconcile = self.clock()
        retry_at: float | None = None
        try:
            while True:
                now = self.clock()
                if now >= next_reconcile:
                    self.lease.renew()
                    reconciled = self.reconcile()
                    report.reconciles.append(reconciled)
                    if reconciled.freed_pods or reconciled.error:
                        retry_at = self.clock() if retry_at is None else retry_at
                    next_reconcile = self.clock() + self.config.reconcile_interval_seconds
                if now >= deadline and not batcher.open:
                    break
                wake = min(deadline, next_reconcile, batcher.closes_at() or deadline, retry_at or deadline)
                self._collect(watcher, batcher, max(0.0, wake - self.clock()))
                now = self.clock()
                due = batcher.ready(now) or (batcher.open and now >= deadline)
                if due or (retry_at is not None and now >= retry_at):
                    size = batcher.reset()
                    retry_at = None
                    self.lease.renew()
                    done = self.provision(batch_size=size)
                    report.passes.append(done)
                    if done.needs_retry:
                        retry_at = self.clock() + self._retry_delay
                        self._retry_delay = min(RETRY_MAX_SECONDS, self._retry_delay * 2)
                    else:
                        self._retry_delay = RETRY_MIN_SECONDS
                if self.clock() >= deadline and not batcher.open:
                    break
        finally:
            watcher.stop()

    def _collect(self, watcher: PodWatcher, batcher: Batcher, timeout: float) -> None:
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
        """Read the cluster, schedule the pending pods, launch the claims the scheduler opens.

        Errors are reported (``PassReport.error``), never raised: the next pass or run starts over from
        the cluster and the state table.
        """
        report = PassReport(batch_size=batch_size)
        if batch_size:
            self.metrics.add(obs.BATCH_SIZE, batch_size)
        try:
            with self.spans.span("provision"):
                self._provision(report)
        except LeaseLostError:
            raise
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(obs.PASS_ERRORS, 1)
            self.log.exception("provisioning pass failed", extra={"error": report.error})
        return report

    def _provision(self, report: PassReport) -> None:
        snapshot = read_snapshot(self.kube)
        for problem in snapshot.errors:
            self.log.warning("object ignored", extra={"error": problem.render()})
        report.pending = len(snapshot.pending_pods)
        self.metrics.add(obs.PENDING_PODS, report.pending)
        if snapshot.pending_pods:
            self._schedule_and_launch(snapshot, list(snapshot.pending_pods), list(snapshot.nodes), report)

    def launch_for(self, pods: Sequence[Pod], snapshot: ClusterSnapshot, nodes: Sequence[Node]) -> PassReport:
        """Schedule ``pods`` against ``nodes`` (and the claims in flight) and launch what the scheduler opens,
        recording claims exactly as a provisioning pass does. The interruption handler uses it for the pods
        of a node about to go (``nodes`` then leaves that node out). Errors are raised."""
        report = PassReport(pending=len(pods))
        if pods:
            self._schedule_and_launch(snapshot, list(pods), list(nodes), report)
        return report

    def launch_claims(self, claims: Sequence[NewNodeClaim]) -> PassReport:
        """Launch NodeClaims decided elsewhere (the disruption controller's replacements), recording and
        launching them exactly as a provisioning pass does. Claims that could not launch are in
        ``PassReport.failed``; other errors are raised."""
        report = PassReport(pending=sum(len(c.pods) for c in claims))
        if claims:
            catalog, accepted = self.catalogs()
            templates = nodepool_templates(self.config.nodepools, self.config.nodeclasses)
            by_name = {t.name: t for t in catalog}
            self._launch(claims, {t.name: t for t in templates}, by_name, accepted, report)
        return report

    def _schedule_and_launch(
        self, snapshot: ClusterSnapshot, pods: list[Pod], cluster_nodes: list[Node], report: PassReport
    ) -> None:
        records = self.state.nodeclaims.list()
        catalog, accepted = self.catalogs()
        by_name = {t.name: t for t in catalog}
        nodes = cluster_nodes + self._in_flight_nodes(records, cluster_nodes, by_name)
        templates = nodepool_templates(self.config.nodepools, self.config.nodeclasses, nodes)
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
            self._launch(results.new_claims, {t.name: t for t in templates}, by_name, accepted, report)

    def catalogs(self) -> tuple[list[InstanceType], dict[str, set[str]]]:
        """The instance types the NodePools' EC2NodeClasses can boot (their union, for the scheduler)
        and, per node class, the names it accepts (a claim only launches types its node class boots).

        One provider call per node class in use; the provider caches the EC2 listings between passes.
        """
        names = sorted({np.node_class_name() for np in self.config.nodepools})
        catalog: dict[str, InstanceType] = {}
        accepted: dict[str, set[str]] = {}
        for name in names:
            node_class = self.config.nodeclass(name)
            types = self.cloud.instance_types(node_class)
            accepted[name] = {t.name for t in types}
            for instance_type in types:
                catalog.setdefault(instance_type.name, instance_type)
        return sorted(catalog.values(), key=lambda t: t.name), accepted

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

    # -- launching ---------------------------------------------------------------------------------------

    def _launch(
        self,
        claims: Sequence[NewNodeClaim],
        templates: Mapping[str, NodePoolTemplate],
        by_name: Mapping[str, InstanceType],
        accepted: Mapping[str, set[str]],
        report: PassReport,
    ) -> None:
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
                # What the node is meant to look like, so the disruption controller can tell drift.
                record.nodepool_hash = pool_hashes.get(claim.nodepool, "")
                record.nodeclass_hash = class_hashes.get(template.node_class, "")
                # Recorded before the launch: a crash after CreateFleet leaves a claim to match by tag.
                self.state.nodeclaims.create(record)
                self._launching.add(record.id)
                planned.append((claim, record, launch_request(record, candidates, node_class)))
            refused_before = self._refused_offerings()
            outcomes = self._launch_parallel([p[2] for p in planned])
            refused = self._refused_offerings() - refused_before
        except Exception:
            # Claims recorded but not launched stay Launching: the next reconciliation matches them to an
            # instance by tag (if CreateFleet went through) or fails them after the grace period.
            self._launching.clear()
            raise
        self._launching.clear()
        for (claim, record, _), outcome in zip(planned, outcomes, strict=True):
            if isinstance(outcome, LaunchedInstance):
                self._record_launched(claim, record, outcome, templates[claim.nodepool], by_name, report)
                self._record_recovery(record, outcome, refused)
            else:
                self._record_failed(record, outcome, report)

    def _launch_parallel(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch distinct claims in parallel (identical ones share a CreateFleet call in one group)."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.batch_key(), []).append(i)
        outcomes: list[LaunchedInstance | LaunchError | None] = [None] * len(requests)

        def run(indices: list[int]) -> None:
            with self.spans.span("launch"):
                results = self.cloud.launch_many([requests[i] for i in indices])
            for i, result in zip(indices, results, strict=True):
                outcomes[i] = result

        if len(groups) <= 1:
            for indices in groups.values():
                run(indices)
        else:
            workers = min(self.config.launch_parallelism, len(groups))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleetwright-launch") as pool:
                for future in [pool.submit(run, indices) for indices in groups.values()]:
                    future.result()
        return [
            o if o is not None else LaunchError(requests[i].nodeclaim, ["no result"])
            for i, o in enumerate(outcomes)
        ]

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
        changes = launched_fields(instance, now, price)
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
        record.status = str(ClaimStatus.LAUNCHED)
        self.state.nodeclaims.transition(record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, **changes)
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
        now = self.wall_clock()
        self.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHING,
            ClaimStatus.FAILED,
            reason=reason[:1000],
            expires_at=int(now + self.config.failed_claim_ttl_seconds),
        )
        report.failed[record.id] = reason
        for code in sorted({error_code(r) for r in error.reasons} or {"Other"}):
            self.metrics.add(
                obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": record.nodepool, "ErrorCode": code}
            )
        self.log.error(
            "nodeclaim launch failed",
            extra={
                "nodeclaim": record.id,
                "nodePool": record.nodepool,
                "podCount": record.pod_count,
                "candidates": record.instance_types[:10],
                "reason": reason,
            },
        )

    # -- following launched claims -----------------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Match registering nodes to claims, mark them initialized, terminate claims that never
        registered, and settle claims a dead run left ``Launching``. Errors are reported, not raised."""
        report = ReconcileReport()
        try:
            with self.spans.span("reconcile"):
                self._reconcile(report)
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
        nodes = nodes_by_instance(self.kube.list_nodes())
        now = self.wall_clock()
        for record in following:
            node = nodes.get(record.instance_id)
            if record.status == ClaimStatus.LAUNCHED:
                if node is None:
                    self._check_timeout(record, now, report)
                    continue
                if self.state.nodeclaims.transition(
                    record.id,
                    ClaimStatus.LAUNCHED,
                    ClaimStatus.REGISTERED,
                    registered_at=now,
                    node_name=node_name(node),
                ):
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
            if (
                record.status == ClaimStatus.REGISTERED
                and node is not None
                and is_initialized(node, record)
                and self.state.nodeclaims.transition(
                    record.id, ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED, initialized_at=now
                )
            ):
                report.initialized.append(record.id)
                self.metrics.add(obs.NODES_INITIALIZED, 1, obs.COUNT, {"NodePool": record.nodepool})
                self.log.info("node initialized", extra={"nodeclaim": record.id, "node": node_name(node)})

    def _check_timeout(self, record: NodeClaimRecord, now: float, report: ReconcileReport) -> None:
        since = record.launched_at or record.created_at
        if now - since < self.config.registration_timeout_seconds:
            return
        self.cloud.terminate([record.instance_id])
        if self.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHED,
            ClaimStatus.TERMINATED,
            reason=f"node did not register within {self.config.registration_timeout_seconds:.0f} s",
            expires_at=int(now + self.config.terminated_claim_ttl_seconds),
        ):
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

    def _settle_orphans(self, orphans: Sequence[NodeClaimRecord], report: ReconcileReport) -> None:
        """Claims recorded but never marked launched: a run died (or failed) around CreateFleet."""
        instances = {i.nodeclaim: i for i in self.cloud.list() if getattr(i, "nodeclaim", "")}
        now = self.wall_clock()
        for record in orphans:
            instance = instances.get(record.id)
            if instance is not None:
                launched = LaunchedInstance(
                    nodeclaim=record.id,
                    instance_id=instance.id,
                    instance_type=instance.instance_type,
                    zone=instance.zone,
                    capacity_type=instance.capacity_type,
                    reused=True,
                )
                changes = launched_fields(launched, now, record.expected_price)
                if self.state.nodeclaims.transition(
                    record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, **changes
                ):
                    for name, value in changes.items():
                        setattr(record, name, value)
                    record.status = str(ClaimStatus.LAUNCHED)
                    report.adopted.append(record.id)
                    self.log.info(
                        "interrupted launch found its instance",
                        extra={"nodeclaim": record.id, "instanceId": instance.id},
                    )
            elif now - record.created_at >= self.config.orphan_grace_seconds and (
                self.state.nodeclaims.transition(
                    record.id,
                    ClaimStatus.LAUNCHING,
                    ClaimStatus.FAILED,
                    reason="launch interrupted before an instance was created",
                    expires_at=int(now + self.config.failed_claim_ttl_seconds),
                )
            ):
                report.abandoned.append(record.id)
                self.log.warning(
                    "interrupted launch had no instance; claim failed", extra={"nodeclaim": record.id}
                )
