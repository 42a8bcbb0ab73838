"""Drift: nodes that no longer look like what their NodePool and EC2NodeClass would launch today.

A node has drifted when its recorded NodePool or EC2NodeClass hash differs from the current one (only when
both are known), when the AMI it booted is no longer among those its EC2NodeClass resolves to, when its
instance's security groups are not exactly those the class's ``securityGroupSelectorTerms`` resolve to
now, when its instance's subnet is not among those the ``subnetSelectorTerms`` resolve to now, or when
its well-known labels (instance type, zone, capacity type, architecture, ...) no longer satisfy the
NodePool's requirements. Labels a node lacks are not held against it.

A drifted node whose NodeClaim has a ``terminationGracePeriod`` is not held by ``karpenter.sh/do-not-disrupt``
pods or PodDisruptionBudgets (Karpenter's eventual disruption: its drain respects them until that deadline,
then deletes what is left); without one they hold it. The node's own annotation always holds it.

Empty drifted nodes go together in one command within the ``Drifted`` budget. Otherwise one drifted node
per pass is replaced: its pods are simulated without it and the NodeClaims the scheduler opens (any
number, any price) are its replacements; a node whose pods cannot all be placed is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from fleetwright.model.labels import NODEPOOL, WELL_KNOWN_LABELS


def drift_reason(cluster: Cluster, state: NodeState) -> str | None:
    """Why ``state`` has drifted, or None when it has not (or is not ours)."""
    pool = cluster.pool_of(state)
    if pool is None:
        return None
    inp = cluster.input
    node_class = pool.node_class_name()
    version = state.hash_version
    if state.nodepool_hash:
        current = cluster.current_hash("nodepool", pool.name, version)
        if current and state.nodepool_hash != current:
            return f"NodePool {pool.name} changed"
    if state.nodeclass_hash:
        current = cluster.current_hash("nodeclass", node_class, version)
        if current and state.nodeclass_hash != current:
            return f"EC2NodeClass {node_class} changed"
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
    labels = state.node.labels
    for requirement in pool.requirements():
        key = requirement.key
        if (
            key in WELL_KNOWN_LABELS
            and key != NODEPOOL
            and key in labels
            and not requirement.has(labels[key])
        ):
            return f"label {key}={labels[key]} no longer meets NodePool {pool.name}'s requirements"
    return None


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
