"""Drift: nodes that no longer look like what their NodePool and EC2NodeClass would launch today.

A node has drifted, as Karpenter judges it, when

* its recorded NodePool or EC2NodeClass hash differs from the current one at the recorded version (only
  when both are known; see :mod:`fleetwright.model.hashes` for what the hashes cover);
* its labels no longer satisfy the NodePool's requirements (requirement drift, per node, custom labels
  included); a label it lacks counts only when the NodePool now puts it on every new node;
* its instance type, as the catalog describes it, is no longer allowed by the NodePool's requirements, is
  no longer one its EC2NodeClass boots, or has no offering in its zone and capacity type
  (InstanceTypeNotFound);
* what its EC2NodeClass selects now leaves its instance out: the AMI it booted, exactly its security
  groups, its subnet, the capacity reservation it runs in (each only when resolved this pass).

A drifted node whose NodeClaim has a ``terminationGracePeriod`` is not held by ``karpenter.sh/do-not-disrupt``
pods or PodDisruptionBudgets (Karpenter's eventual disruption: its drain respects them until that deadline,
then deletes what is left); without one they hold it. The node's own annotation always holds it.

Empty drifted nodes go together in one command within the ``Drifted`` budget. Otherwise one drifted node
per pass is replaced: its pods are simulated without it and the NodeClaims the scheduler opens (any
number, any price) are its replacements; a node whose pods cannot all be placed is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    claims_summary,
    evictable_pods,
    node_is_empty,
)
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.types import DRIFT, DRIFTED, Command, NodeState
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import (
    CAPACITY_RESERVATION_ID,
    NODEPOOL,
    ON_DEMAND,
    RESERVED,
    WELL_KNOWN_LABELS,
)
from fleetwright.model.nodepool import NodePool
from fleetwright.model.requirements import Requirements

# Karpenter's drift reasons (core's and the AWS provider's), by how Fleetwright's explanation begins: the
# reason of a NodeClaim's Drifted condition.
_KINDS: Final = (
    ("NodePool ", "NodePoolDrifted"),
    ("EC2NodeClass ", "NodeClassDrift"),
    ("label ", "RequirementsDrifted"),
    ("instance type ", "InstanceTypeNotFound"),
    ("AMI ", "AMIDrift"),
    ("security groups ", "SecurityGroupDrift"),
    ("subnet ", "SubnetDrift"),
    ("capacity reservation ", "CapacityReservationDrift"),
)


def drift_kind(reason: str) -> str:
    """Karpenter's drift reason (``NodePoolDrifted``, ``AMIDrift``, ...) for one of :func:`drift_reason`'s
    explanations (``Drifted`` for one it does not name)."""
    return next((kind for prefix, kind in _KINDS if reason.startswith(prefix)), DRIFTED)


def drift_reason(cluster: Cluster, state: NodeState) -> str | None:
    """Why ``state`` has drifted, or None when it has not (or is not ours)."""
    pool = cluster.pool_of(state)
    if pool is None:
        return None
    return (
        _hash_drift(cluster, state, pool)
        or requirement_drift(pool, state.node.labels, cluster.requirements(pool))
        or instance_type_drift(cluster, state, pool)
        or _node_class_drift(cluster, state, pool.node_class_name())
    )


def _hash_drift(cluster: Cluster, state: NodeState, pool: NodePool) -> str | None:
    """NodePool or EC2NodeClass hash drift: the hash recorded at launch differs from the current one at the
    recorded version (nothing when either is unknown)."""
    version = state.hash_version
    if state.nodepool_hash:
        current = cluster.current_hash("nodepool", pool.name, version)
        if current and state.nodepool_hash != current:
            return f"NodePool {pool.name} changed"
    node_class = pool.node_class_name()
    if state.nodeclass_hash:
        current = cluster.current_hash("nodeclass", node_class, version)
        if current and state.nodeclass_hash != current:
            return f"EC2NodeClass {node_class} changed"
    return None


def requirement_drift(
    pool: NodePool, labels: Mapping[str, str], requirements: Requirements | None = None
) -> str | None:
    """Karpenter's requirement drift, checked per node: a label the node has that a NodePool requirement
    on its key no longer allows, or a label the node lacks that the NodePool now puts on every new node (a
    custom key required ``In`` one value). A well-known label the node lacks, or a custom key the NodePool
    allows several values of, is not held against it: Fleetwright's nodes would not carry it either."""
    for requirement in requirements if requirements is not None else pool.requirements():
        key = requirement.key
        if key == NODEPOOL:
            continue
        value = labels.get(key)
        if value is not None and not requirement.has(value):
            return f"label {key}={value} no longer meets NodePool {pool.name}'s requirements"
        if value is None and key not in WELL_KNOWN_LABELS and requirement.single_value() is not None:
            wanted = requirement.single_value()
            return f"label {key} is missing: NodePool {pool.name} now requires {key}={wanted}"
    return None


def instance_type_drift(cluster: Cluster, state: NodeState, pool: NodePool) -> str | None:
    """Karpenter's InstanceTypeNotFound: the node's instance type (as the catalog describes it, whatever
    labels the node carries) is no longer allowed by the NodePool's requirements, is no longer one its
    EC2NodeClass boots, or has no offering in its zone and capacity type any more (a reserved node's
    on-demand offering also counts: it may have been demoted). The last two only when the class's types
    are known this pass."""
    if not state.instance_type:
        return None
    known = cluster.instance_type(state.instance_type)
    if known is not None:
        key = (pool.name, known.name)
        memo = cluster.memo_type_drift
        if key not in memo:
            memo[key] = _type_disallowed(cluster, pool, known)
        if memo[key] is not None:
            return memo[key]
    node_class = pool.node_class_name()
    bootable = cluster.input.bootable.get(node_class)
    if not bootable:
        return None
    if state.instance_type not in bootable or known is None:
        return f"instance type {state.instance_type} is no longer offered for EC2NodeClass {node_class}"
    accepted = {state.capacity_type, ON_DEMAND} if state.capacity_type == RESERVED else {state.capacity_type}
    if not any(o.zone == state.zone and o.capacity_type in accepted for o in known.offerings):
        kind = state.capacity_type
        return f"instance type {state.instance_type} has no {kind} offering in {state.zone} any more"
    return None


def _type_disallowed(cluster: Cluster, pool: NodePool, known: InstanceType) -> str | None:
    for requirement in cluster.requirements(pool):
        value = known.labels.get(requirement.key)
        if value is not None and not requirement.has(value):
            return (
                f"instance type {known.name} is no longer allowed by NodePool {pool.name}'s "
                f"requirements ({requirement.key}={value})"
            )
    return None


def _node_class_drift(cluster: Cluster, state: NodeState, node_class: str) -> str | None:
    """What the EC2NodeClass's selector terms resolve to now, against the node's instance: AMI, security
    groups, subnet, capacity reservation (each only when known)."""
    inp = cluster.input
    images = inp.amis.get(node_class)
    if state.image_id and images is not None and state.image_id not in images:
        return f"AMI {state.image_id} is no longer selected by EC2NodeClass {node_class}"
    groups = inp.security_groups.get(node_class)
    if groups and state.security_group_ids and set(state.security_group_ids) != groups:
        return (
            f"security groups {', '.join(sorted(state.security_group_ids))} differ from those EC2NodeClass "
            f"{node_class} selects ({', '.join(sorted(groups))})"
        )
    subnets = inp.subnets.get(node_class)
    if subnets and state.subnet_id and state.subnet_id not in subnets:
        return f"subnet {state.subnet_id} is no longer selected by EC2NodeClass {node_class}"
    return reservation_drift(cluster, state, node_class)


def reservation_drift(cluster: Cluster, state: NodeState, node_class: str) -> str | None:
    """Karpenter's capacity-reservation drift, per instance: the node runs in a reservation its EC2NodeClass
    no longer selects. Unknown (the class's reservations were not resolved this pass) is no drift, and a
    reservation about to end is expiration's."""
    reservation = state.node.labels.get(CAPACITY_RESERVATION_ID)
    if not reservation or state.capacity_type != RESERVED:
        return None
    inp = cluster.input
    selected = inp.reservations.get(node_class)
    if selected is None or reservation in selected or reservation in inp.expiring_reservations:
        return None
    return f"capacity reservation {reservation} is no longer selected by EC2NodeClass {node_class}"


def drifted_nodes(cluster: Cluster, excluded: set[str]) -> list[tuple[NodeState, str]]:
    """Our drifted nodes outside ``excluded``, oldest first, with why they drifted."""
    found = []
    for state in sorted(cluster.ours, key=lambda s: (s.created_at, s.name)):
        if state.name in excluded or state.terminating:
            continue
        why = drift_reason(cluster, state)
        if why is not None:
            found.append((state, why))
    return found


def drift_command(
    cluster: Cluster, simulator: Simulator, excluded: set[str], skipped: dict[str, str]
) -> Command | None:
    """The drift command of this pass (see the module docstring), or None."""
    empty: list[tuple[NodeState, str]] = []
    busy: list[tuple[NodeState, str]] = []
    for state, why in drifted_nodes(cluster, excluded):
        block = cluster.graceful_block(state, DRIFTED)
        if block is not None:
            skipped.setdefault(state.name, f"drifted ({why}) but {block}")
            continue
        (empty if node_is_empty(state) else busy).append((state, why))
    if empty:
        builder = CommandBuilder(cluster, DRIFTED)
        reasons = []
        for state, why in empty:
            refusal = builder.add(state)
            if refusal is None:
                reasons.append(why)
            else:
                skipped.setdefault(state.name, f"drifted ({why}) but {refusal}")
        if builder.taken:
            names = ", ".join(s.name for s in builder.taken)
            return Command(
                method=DRIFT,
                reason=DRIFTED,
                candidates=builder.taken,
                explanation=(
                    f"remove {len(builder.taken)} empty drifted node(s) ({names}): "
                    + "; ".join(sorted(set(reasons)))
                ),
            )
    for state, why in busy:
        refusal = CommandBuilder(cluster, DRIFTED).refusal(state)
        if refusal is not None:
            skipped.setdefault(state.name, f"drifted ({why}) but {refusal}")
            continue
        results = simulator.run([state])
        if results.errors:
            first = results.errors[0]
            skipped.setdefault(
                state.name,
                f"drifted ({why}) but {len(results.errors)} pod(s) cannot be scheduled elsewhere "
                f"({first.pod.key}: {first.reason})",
            )
            continue
        text = f"replace drifted node {state.name} ({state.instance_type}, ${state.price:.3f}/h): {why}"
        if results.new_claims:
            text += f"; launch {claims_summary(results.new_claims)}"
        else:
            text += "; its pods fit on existing nodes"
        return Command(
            method=DRIFT,
            reason=DRIFTED,
            candidates=[state],
            replacements=list(results.new_claims),
            explanation=text,
        )
    return None


def still_drifted(cluster: Cluster, fresh: Sequence[NodeState]) -> str | None:
    """None when every node of a drift command has still drifted and, unless all are a static pool's (whose
    replacement takes their pods), their pods still fit elsewhere; otherwise why not."""
    steady = [s.name for s in fresh if drift_reason(cluster, s) is None]
    if steady:
        return f"node {steady[0]} has not drifted any more"
    if any(evictable_pods(s) for s in fresh) and not all(cluster.is_static(s) for s in fresh):
        results = Simulator(cluster).run(fresh)
        if results.errors:
            return f"{len(results.errors)} pod(s) cannot be scheduled elsewhere any more"
    return None


class Drift:
    """Drift of dynamic NodePools' nodes as a disruption method (graceful, one command per pass)."""

    name = DRIFT
    reason = DRIFTED
    forceful = False

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Drifted, and not of a static pool (those are ``StaticDrift``'s)."""
        return not cluster.is_static(state) and drift_reason(cluster, state) is not None

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """The empty drifted nodes the budget allows, else one busy drifted node with its replacements."""
        command = drift_command(ctx.cluster, ctx.simulator, ctx.static, ctx.skipped)
        return [command] if command is not None else []

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Still drifted, the pods still placeable."""
        return still_drifted(cluster, fresh)
