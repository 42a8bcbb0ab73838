"""Following launched claims to their node: registration (the claim's labels, taints and the termination
finalizer put on the Node), initialization, claims whose node never registered (instance terminated), and
claims a launcher left ``Launching`` (adopted by their instance's tag, or failed, once past their launch
deadline and the settle grace). Every claim transition is conditional, and those of ``Launching`` claims are
fenced by the lease.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetwright.claims.admission import count_timeouts
from fleetwright.claims.consistency import shape_issues
from fleetwright.claims.nodeclaim_objects import SYNC_ERRORS as NODECLAIM_SYNC_ERRORS
from fleetwright.claims.records import launched_fields
from fleetwright.claims.registration import (
    NODE_SYNC_ERRORS,
    initialization_change,
    is_initialized,
    node_name,
    nodes_by_instance,
    registration_change,
)
from fleetwright.claims.reports import ReconcileReport
from fleetwright.cloud.launch import LaunchedInstance
from fleetwright.kube import reasons
from fleetwright.kube.resources import NODES
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import ZONE_ID
from fleetwright.observability import metrics as obs
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.claims.lifecycle import ClaimLifecycle


class Reconciler:
    """Brings ``life``'s claims in line with the cluster and the cloud (under the lease its caller holds)."""

    def __init__(self, life: ClaimLifecycle) -> None:
        self.life = life
        # The Nodes of the claims this reconciliation followed, by instance id, as last written: the
        # NodeClaim objects' Initialized condition says from them why a node is not initialized yet.
        self._nodes: dict[str, Mapping[str, Any]] = {}

    def reconcile(self, report: ReconcileReport) -> None:
        """One reconciliation of every claim launching, launched or registered."""
        life = self.life
        self._nodes = {}
        records = life.state.nodeclaims.list_active()  # ended claims have nothing to follow
        following = [r for r in records if r.status in (ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)]
        orphans = [r for r in records if r.status == ClaimStatus.LAUNCHING and r.id not in life.launching]
        if orphans:
            self._settle_orphans(orphans, report)
            following += [r for r in orphans if r.status == ClaimStatus.LAUNCHED]
        if not following:
            return
        nodes = nodes_by_instance(life.node_objects())
        now = life.wall_clock()
        type_labels = _TypeLabels(life.catalogs)
        timed_out = len(report.timed_out)
        self._follow(following, nodes, now, type_labels, report)
        if len(report.timed_out) > timed_out:
            ended = set(report.timed_out[timed_out:])
            count_timeouts(life, [r for r in following if r.id in ended], records)

    def _follow(
        self,
        following: Sequence[NodeClaimRecord],
        nodes: Mapping[str, Mapping[str, Any]],
        now: float,
        type_labels: _TypeLabels,
        report: ReconcileReport,
    ) -> None:
        """Registration, initialization and timeouts of the claims launched or registered."""
        for record in following:
            node = nodes.get(record.instance_id)
            if record.status == ClaimStatus.LAUNCHED and node is None:
                self._check_timeout(record, now, report)
                continue
            if node is None:
                continue
            self._nodes[record.instance_id] = node
            # Labels, finalizer and registered label go on the Node before the claim says Registered.
            node = self._sync_node(node, registration_change(record, type_labels(record)))
            if node is None:
                continue  # the Node went away meanwhile: the next reconciliation looks again
            self._nodes[record.instance_id] = node
            if record.status == ClaimStatus.LAUNCHED:
                self._register(record, node, now, report)
            if record.status != ClaimStatus.REGISTERED:
                continue
            if is_initialized(node, record):
                self._initialize(record, node, now, report)
            else:
                self._check_timeout(record, now, report, registered=True)

    def _register(
        self, record: NodeClaimRecord, node: Mapping[str, Any], now: float, report: ReconcileReport
    ) -> None:
        """The claim's node has registered: the claim says so."""
        life = self.life
        if not life.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHED,
            ClaimStatus.REGISTERED,
            registered_at=now,
            node_name=node_name(node),
        ):
            self._lost_transition(record, ClaimStatus.REGISTERED)
            return
        record.status = str(ClaimStatus.REGISTERED)
        report.registered.append(record.id)
        life.metrics.add(obs.NODES_REGISTERED, 1, obs.COUNT, {"NodePool": record.nodepool})
        life.log.info(
            "node registered",
            extra={"nodeclaim": record.id, "node": node_name(node), "instanceId": record.instance_id},
        )

    def _initialize(
        self, record: NodeClaimRecord, node: Mapping[str, Any], now: float, report: ReconcileReport
    ) -> None:
        """The claim's node is Ready without startup taints: the Node and the claim say initialized."""
        life = self.life
        if self._sync_node(node, initialization_change) is None:
            return
        if not life.state.nodeclaims.transition(
            record.id, ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED, initialized_at=now
        ):
            self._lost_transition(record, ClaimStatus.INITIALIZED)
            return
        report.initialized.append(record.id)
        life.metrics.add(obs.NODES_INITIALIZED, 1, obs.COUNT, {"NodePool": record.nodepool})
        startup = max(0.0, now - record.created_at)
        life.metrics.add(obs.NODE_STARTUP_DURATION, startup, obs.SECONDS, {"NodePool": record.nodepool})
        life.log.info("node initialized", extra={"nodeclaim": record.id, "node": node_name(node)})
        self._check_shape(record, node)

    def _check_shape(self, record: NodeClaimRecord, node: Mapping[str, Any]) -> None:
        """FailedConsistencyCheck on the NodeClaim when its node is much smaller than the launched type."""
        try:
            catalog, _ = self.life.catalogs()
        except Exception as error:  # a check, not a duty: the claim is initialized either way
            self.life.log.warning(
                "cannot check the node's shape", extra={"nodeclaim": record.id, "error": str(error)}
            )
            return
        launched = next((t for t in catalog if t.name == record.instance_type), None)
        if launched is None:
            return
        issues = shape_issues(node, launched.capacity)
        self.life.nodeclaim_objects.consistency_checked(record.id, issues, self.life.wall_clock())
        for issue in issues:
            self.life.log.warning("failed consistency check", extra={"nodeclaim": record.id, "issue": issue})
        ref = reasons.nodeclaim_ref(record.id)
        self.life.events.publish(*(reasons.failed_consistency_check(ref, issue) for issue in issues))

    def _sync_node(
        self, node: Mapping[str, Any], change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> Mapping[str, Any] | None:
        """Apply ``change`` to the Node unless the listed object already has it; the Node as written, or
        None when it no longer exists or the API refused (logged and counted: the next reconciliation
        tries again, and the claim does not move on meanwhile)."""
        if change(dict(node)) is None:
            return node
        try:
            return self.life.kube.modify(NODES, node_name(node), change)
        except Exception as error:
            self.life.metrics.add(NODE_SYNC_ERRORS, 1, obs.COUNT)
            self.life.log.warning(
                "cannot update the node; the next reconciliation tries again",
                extra={"node": node_name(node), "error": f"{type(error).__name__}: {error}"[:500]},
            )
            return None

    def sync_nodeclaim_objects(self) -> None:
        """Bring the NodeClaim objects in line with the records (after the table, which stays right)."""
        life = self.life
        try:
            life.ensure_synced()
            if life.nodeclaim_objects.installed():
                # The objects of ended claims are deleted whether their records are listed or not.
                life.nodeclaim_objects.sync(life.state.nodeclaims.list_active(), self._nodes)
        except Exception as error:  # the mirror never fails a reconciliation
            life.metrics.add(NODECLAIM_SYNC_ERRORS, 1, obs.COUNT, {"Operation": "Reconcile"})
            life.log.warning(
                "NodeClaim objects not reconciled", extra={"error": f"{type(error).__name__}: {error}"}
            )

    def _check_timeout(
        self, record: NodeClaimRecord, now: float, report: ReconcileReport, *, registered: bool = False
    ) -> None:
        """Terminate the instance of a claim whose node has not registered (``registered``: registered but
        not initialized) within ``registration_timeout_seconds`` of its launch. A starting node keeps the
        pods it was launched for (``claims/starting.py``), so one that never becomes Ready must end: its
        pods are then launched for once more."""
        life = self.life
        since = record.launched_at or record.created_at
        timeout = life.config.registration_timeout_seconds
        if now - since < timeout:
            return
        life.cloud.terminate([record.instance_id])
        what = "initialize" if registered else "register"
        if not life.state.nodeclaims.transition(
            record.id,
            ClaimStatus.REGISTERED if registered else ClaimStatus.LAUNCHED,
            ClaimStatus.TERMINATED,
            reason=f"node did not {what} within {timeout:.0f} s",
            expires_at=int(now + life.config.terminated_claim_ttl_seconds),
        ):
            self._lost_transition(record, ClaimStatus.TERMINATED)
            return
        record.status = str(ClaimStatus.TERMINATED)
        report.timed_out.append(record.id)
        life.metrics.add(obs.REGISTRATION_TIMEOUTS, 1, obs.COUNT, {"NodePool": record.nodepool})
        life.log.warning(
            f"node never {'initialized' if registered else 'registered'}; instance terminated",
            extra={
                "nodeclaim": record.id,
                "instanceId": record.instance_id,
                "instanceType": record.instance_type,
                "zone": record.zone,
                "secondsSinceLaunch": round(now - since),
            },
        )

    def _lost_transition(self, record: NodeClaimRecord, status: ClaimStatus) -> None:
        self.life.log.info(
            "claim changed meanwhile; transition skipped",
            extra={"nodeclaim": record.id, "from": record.status, "to": str(status)},
        )

    def settle_at(self, record: NodeClaimRecord) -> float:
        """When a ``Launching`` claim no live launcher holds may be settled (epoch seconds): its launch
        deadline plus the settle grace (the last request's read timeout, and DescribeInstances showing a
        new instance late); for claims recorded without a deadline, ``orphan_grace_seconds`` after
        creation."""
        if record.launch_deadline is not None:
            return float(record.launch_deadline) + self.life.config.settle_grace_seconds
        return record.created_at + self.life.config.orphan_grace_seconds

    def _settle_orphans(self, orphans: Sequence[NodeClaimRecord], report: ReconcileReport) -> None:
        """Claims recorded but never marked launched or failed: their launcher died, lost the lease, or
        does not know whether CreateFleet took effect. Once past their settle time each is adopted (its
        instance found by tag) or failed, fenced by the lease."""
        now = self.life.wall_clock()
        due = [r for r in orphans if now >= self.settle_at(r)]
        if not due:
            return
        instances = self._claimed_instances([r.id for r in due])
        for record in due:
            launched = instances.get(record.id)
            if launched is not None:
                self._adopt(record, launched, now, report)
            else:
                self._abandon(record, now, report)

    def _claimed_instances(self, claims: Sequence[str]) -> dict[str, LaunchedInstance]:
        """The live instances tagged with a claim, by claim; ``claims`` missing from the listing are looked
        for once more by tag (a listing can miss a new instance)."""
        cloud = self.life.cloud
        instances: dict[str, LaunchedInstance] = {}
        for instance in cloud.list():
            claim = instance.nodeclaim
            # Without the NodePool tag the controller writes, someone else tagged it: never a claim's.
            if claim and instance.nodepool:
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
        missing = [c for c in claims if c not in instances]
        if missing:
            instances.update(cloud.find_claimed(missing))
        return instances

    def _adopt(
        self, record: NodeClaimRecord, launched: LaunchedInstance, now: float, report: ReconcileReport
    ) -> None:
        """An interrupted launch whose instance exists: the claim is Launched with it (fenced)."""
        life = self.life
        changes = launched_fields(launched, now, record.expected_price, record.labels)
        if not life.state.nodeclaims.transition(
            record.id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=life.lease, **changes
        ):
            self._lost_transition(record, ClaimStatus.LAUNCHED)
            return
        for name, value in changes.items():
            setattr(record, name, value)
        record.status = str(ClaimStatus.LAUNCHED)
        report.adopted.append(record.id)
        life.log.info(
            "interrupted launch found its instance",
            extra={"nodeclaim": record.id, "instanceId": launched.instance_id},
        )

    def _abandon(self, record: NodeClaimRecord, now: float, report: ReconcileReport) -> None:
        """An interrupted launch without an instance: the claim fails (fenced)."""
        life = self.life
        if not life.state.nodeclaims.transition(
            record.id,
            ClaimStatus.LAUNCHING,
            ClaimStatus.FAILED,
            fence=life.lease,
            reason="launch interrupted before an instance was created",
            expires_at=int(now + life.config.failed_claim_ttl_seconds),
        ):
            self._lost_transition(record, ClaimStatus.FAILED)
            return
        report.abandoned.append(record.id)
        life.log.warning("interrupted launch had no instance; claim failed", extra={"nodeclaim": record.id})


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
