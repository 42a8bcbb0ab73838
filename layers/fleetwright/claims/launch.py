"""Launching claims: each recorded (fenced by the lease, with its launch deadline) before its own CreateFleet,
tagged with its id, in a bounded thread pool; no AWS request of a launch is sent after the deadline, and
each outcome is recorded (fenced) as it comes in.

A claim whose launch outcome is unknown (the request may have created the instance) stays ``Launching``;
reconciliation settles it after its deadline and the settle grace (:mod:`fleetwright.claims.reconcile`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING

from fleetwright.claims.admission import Admission
from fleetwright.claims.records import (
    claim_record,
    launch_request,
    launched_fields,
    new_claim_id,
    offering_price,
)
from fleetwright.claims.reports import PassReport
from fleetwright.claims.terms import copy_terms
from fleetwright.cloud.deadline import Deadline, deadline_scope
from fleetwright.cloud.errors import DEADLINE_EXCEEDED, FailureKind, LaunchError, LaunchFailure
from fleetwright.cloud.launch import EFA_RESOURCE, MAX_INSTANCE_TYPES, LaunchedInstance, LaunchRequest
from fleetwright.kube import reasons
from fleetwright.model import resources as res
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.hashes import HASH_VERSION, nodeclass_hashes, nodepool_hashes
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.nodepool import NodePool
from fleetwright.observability import metrics as obs
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate
from fleetwright.state.lease import LeaseLostError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.claims.lifecycle import ClaimLifecycle

MAX_LOGGED_PODS = 20

# A launch needs at least this long before its deadline, or it is not started.
MIN_LAUNCH_SECONDS = 1.0

# A claim to launch: what the scheduler opened, its record, and its CreateFleet request.
Planned = tuple[NewNodeClaim, NodeClaimRecord, LaunchRequest]


class Launcher:
    """Records and launches claims for ``life`` (its lease, state table, cloud and clocks), under the lease
    its caller holds."""

    def __init__(self, life: ClaimLifecycle) -> None:
        self.life = life
        # The launch-rate cap and the registration breakers, checked before anything is recorded.
        self.admission = Admission(life)

    def deadline(self) -> float:
        """When this pass's launches must be done (epoch seconds): the lease's expiry or the invocation's
        end, whichever comes first, less a safety margin."""
        limit = self.life.lease.expires_at
        if self.life.run_deadline is not None:
            limit = min(limit, self.life.run_deadline)
        return limit - self.life.config.launch_margin_seconds

    def launch(
        self,
        claims: Sequence[NewNodeClaim],
        templates: Mapping[str, NodePoolTemplate],
        by_name: Mapping[str, InstanceType],
        accepted: Mapping[str, set[str]],
        report: PassReport,
        *,
        nominate: bool = False,
    ) -> None:
        """Record ``claims`` and launch them; outcomes go to ``report`` (``launched``, ``failed``). With
        ``nominate`` the pods of each launched claim are told which claim they wait for (and those of a claim
        held back by the launch-rate cap or a registration breaker, why they wait: claims/admission.py)."""
        life = self.life
        # Renewing proves the lease is still ours and gives the launches a full lease to finish in.
        life.lease.renew()
        deadline = self.deadline()
        if deadline - life.wall_clock() < MIN_LAUNCH_SECONDS:
            for claim in claims:
                report.failed[claim.name] = f"{DEADLINE_EXCEEDED}: no time left to launch before the deadline"
            life.log.warning("no time left to launch", extra={"claims": len(claims)})
            return
        claims = self.admission.admit(claims, report, nominate=nominate)
        if not claims:
            return
        planned: list[Planned] = []
        try:
            self._plan(claims, templates, accepted, deadline, report, planned)
            refused_before = self._refused_offerings()
            self._launch_parallel(planned, deadline, templates, by_name, report, refused_before)
            launched = [(claim, record) for claim, record, _ in planned if record.id not in report.failed]
            for claim, record in launched:
                life.nodeclaim_objects.write(record, requests=claim.requests)
            if nominate:
                life.events.publish(
                    *(reasons.nominated(pod, nodeclaim=r.id) for claim, r in launched for pod in claim.pods)
                )
        finally:
            # Claims recorded but not settled here stay Launching: reconciliation adopts their instance
            # (found by tag) or fails them once their deadline and the settle grace have passed.
            life.launching.difference_update(r.id for _, r, _ in planned)

    def _plan(
        self,
        claims: Sequence[NewNodeClaim],
        templates: Mapping[str, NodePoolTemplate],
        accepted: Mapping[str, set[str]],
        deadline: float,
        report: PassReport,
        planned: list[Planned],
    ) -> None:
        """Record each claim its node class can boot (fenced) and add it to ``planned``; the others fail."""
        life = self.life
        pool_hashes = nodepool_hashes(life.config.nodepools)
        class_hashes = nodeclass_hashes(life.config.nodeclasses)
        for claim in claims:
            template = templates[claim.nodepool]
            bootable = accepted.get(template.node_class, set())
            # The cheapest the node class boots, as many as a launch offers.
            candidates = [t for t in claim.instance_types if t.name in bootable][:MAX_INSTANCE_TYPES]
            if not candidates:
                reason = f"EC2NodeClass {template.node_class}: no AMI boots any of the claim's instance types"
                report.failed[claim.name] = reason
                life.log.error("cannot launch", extra={"nodePool": claim.nodepool, "reason": reason})
                continue
            record = claim_record(
                claim,
                new_claim_id(claim.nodepool),
                template,
                candidates,
                holder=life.holder,
                now=life.wall_clock(),
            )
            record.launch_deadline = deadline
            nodepool = self._nodepool(claim.nodepool)
            record.annotations = nodepool.annotations() if nodepool is not None else {}
            if nodepool is not None:
                copy_terms(record, nodepool)  # its own expireAfter and terminationGracePeriod
            # What the node is meant to look like, so the disruption controller can tell drift.
            record.nodepool_hash = pool_hashes.get(claim.nodepool, "")
            record.nodeclass_hash = class_hashes.get(template.node_class, "")
            record.hash_version = HASH_VERSION
            # Recorded before the launch, fenced: a crash after CreateFleet leaves a claim to match by
            # tag, and a launcher that lost the lease records (and so launches) nothing.
            if not life.state.nodeclaims.create(record, fence=life.lease):
                report.failed[claim.name] = f"claim id {record.id} already exists"
                continue
            life.launching.add(record.id)
            efa = claim.requests.get(EFA_RESOURCE, 0) > 0
            node_class = life.config.nodeclass(template.node_class)
            planned.append((claim, record, launch_request(record, candidates, node_class, efa=efa)))

    def _nodepool(self, nodepool: str) -> NodePool | None:
        """The NodePool a claim launches for: its template's annotations, which its NodeClaims and Nodes
        carry, and its expireAfter and terminationGracePeriod, which its NodeClaims keep (as Karpenter)."""
        return next((np for np in self.life.config.nodepools if np.name == nodepool), None)

    def _launch_parallel(
        self,
        planned: Sequence[Planned],
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
        life = self.life
        stop = threading.Event()  # set when the lease is lost: launches not started yet are skipped
        workers = max(1, min(life.config.launch_parallelism, len(planned)))
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
                    life.lease.ensure(life.config.launch_margin_seconds)
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
        life = self.life
        if stop.is_set():
            return LeaseLostError("the lease was lost before this launch started")
        try:
            # The lease must outlast the launch: renew now if it would expire before the deadline.
            life.lease.ensure(max(0.0, deadline - life.wall_clock()) + life.config.launch_margin_seconds)
        except LeaseLostError as lost:
            return lost
        except Exception as error:  # the lease could not be checked: do not launch
            return LaunchError(
                request.nodeclaim, [LaunchFailure(FailureKind.UNKNOWN, "LeaseCheckFailed", str(error))]
            )
        try:
            with deadline_scope(Deadline(deadline, life.wall_clock)), life.spans.span("launch"):
                return life.cloud.launch(request)
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
        life = self.life
        now = life.wall_clock()
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
        if not life.state.nodeclaims.transition(
            record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=life.lease, **changes
        ):
            # Settled by someone else meanwhile (it should not happen: settling waits for the deadline).
            life.log.error(
                "instance launched for a claim that is no longer launching",
                extra={"nodeclaim": record.id, "instanceId": instance.instance_id},
            )
            return
        record.status = str(ClaimStatus.LAUNCHED)
        life.nodeclaim_objects.remember_image(record.id, instance.image_id)
        report.launched.append(record)
        self._count_launched(record, instance)

    def _count_launched(self, record: NodeClaimRecord, instance: LaunchedInstance) -> None:
        """The metrics and the log line of a claim launched."""
        life = self.life
        dimensions = {
            "NodePool": record.nodepool,
            "InstanceType": record.instance_type,
            "CapacityType": record.capacity_type,
        }
        life.metrics.add(obs.CLAIMS_LAUNCHED, 1, obs.COUNT, dimensions)
        life.metrics.add(
            obs.HOURLY_COST_LAUNCHED, record.price or 0.0, obs.NONE, {"NodePool": record.nodepool}
        )
        life.log.info(
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
        return {(e.instance_type, e.zone, e.capacity_type) for e in self.life.state.unavailable.entries()}

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
            self.life.metrics.add(
                obs.INSUFFICIENT_CAPACITY_RECOVERED, 1, obs.COUNT, {"NodePool": record.nodepool}
            )

    def _record_failed(self, record: NodeClaimRecord, error: LaunchError, report: PassReport) -> None:
        life = self.life
        reason = "; ".join(error.reasons) or str(error)
        for code in error.codes or ["Unknown"]:
            life.metrics.add(
                obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": record.nodepool, "ErrorCode": code}
            )
        if error.may_have_launched:
            # A request may have created the instance without telling us: only its tag can tell, once
            # DescribeInstances shows it. Reconciliation settles the claim after its deadline and grace.
            report.failed[record.id] = f"{reason} (the instance may exist; settled after the launch deadline)"
            life.log.warning(
                "nodeclaim launch outcome unknown; left for reconciliation",
                extra={"nodeclaim": record.id, "nodePool": record.nodepool, "reason": reason},
            )
            return
        now = life.wall_clock()
        if not life.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHING,
            ClaimStatus.FAILED,
            fence=life.lease,
            reason=reason[:1000],
            expires_at=int(now + life.config.failed_claim_ttl_seconds),
        ):
            life.log.warning("failed claim was settled by another writer", extra={"nodeclaim": record.id})
        report.failed[record.id] = reason
        # Capacity refused, and nothing else but "no offering left to try".
        capacity = error.insufficient_capacity
        life.events.publish(
            reasons.launch_failed(reasons.nodeclaim_ref(record.id), reason, capacity=capacity)
        )
        life.log.error(
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
        life = self.life
        reason = f"{type(error).__name__}: {error}"
        report.failed[record.id] = f"{reason} (the instance may exist; settled after the launch deadline)"
        life.metrics.add(
            obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": record.nodepool, "ErrorCode": "Unknown"}
        )
        life.log.error(
            "nodeclaim launch ended with an unexpected error",
            extra={"nodeclaim": record.id, "nodePool": record.nodepool, "error": reason},
            exc_info=error,
        )
