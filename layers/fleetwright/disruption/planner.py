"""The disruption planner: one pass's decisions, from a :class:`DisruptionInput` alone (pure, deterministic).

:func:`plan` returns the repairs of unhealthy nodes (with node repair on), else the forceful expirations
(several may go at once), else at most one graceful command, trying the methods in Karpenter's order —
emptiness, drift, multi-node consolidation, single-node consolidation — and stopping at the first that finds
one. :func:`validate` re-checks a command against a fresh input before the controller acts on it. See
docs/disruption.md.
"""

from __future__ import annotations

from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    describe_seconds,
    evictable_pods,
    node_is_empty,
    price_of,
    type_summary,
)
from fleetwright.disruption.consolidation import (
    consolidatable,
    evaluate,
    multi_node_command,
    ordered_candidates,
    single_node_command,
)
from fleetwright.disruption.drift import drift_command, drift_reason
from fleetwright.disruption.expiration import expiration_commands, is_expired
from fleetwright.disruption.repair import repair_commands, still_due
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.static_pools import (
    SCALE_DOWN,
    is_static,
    scale_down_commands,
    static_drift_command,
    static_expirations,
    still_surplus,
)
from fleetwright.disruption.types import (
    DRIFT,
    EMPTINESS,
    EMPTY,
    EXPIRATION,
    MULTI_NODE,
    REPAIR,
    SINGLE_NODE,
    Command,
    DisruptionInput,
    NodeState,
    Plan,
)


def empty_for(cluster: Cluster, state: NodeState) -> float | None:
    """How long ``state`` has been empty past its NodePool's consolidateAfter allowance: the seconds it has
    been empty when that is at least consolidateAfter, else None (also for nodes that are not empty, and for
    a static pool's nodes: it keeps them)."""
    pool = cluster.pool_of(state)
    if pool is None or state.empty_since is None or not node_is_empty(state) or is_static(cluster, state):
        return None
    after = cluster.consolidate_after[pool.name]
    empty = cluster.now - state.empty_since
    return empty if after is not None and empty >= after else None


def emptiness_command(cluster: Cluster, excluded: set[str], skipped: dict[str, str]) -> Command | None:
    """Every node empty for at least consolidateAfter that the ``Empty`` budgets allow, longest first."""
    found: list[tuple[float, NodeState]] = []
    for state in cluster.ours:
        if state.name in excluded or state.terminating:
            continue
        empty = empty_for(cluster, state)
        if empty is not None:
            found.append((empty, state))
    builder = CommandBuilder(cluster, EMPTY)
    for empty, state in sorted(found, key=lambda item: (-item[0], item[1].name)):
        why = cluster.graceful_block(state) or builder.add(state)
        if why is not None:
            skipped.setdefault(state.name, f"empty for {describe_seconds(empty)} but {why}")
    if not builder.taken:
        return None
    nodes = builder.taken
    total = price_of(nodes)
    shortest = min(cluster.now - (s.empty_since or cluster.now) for s in nodes)
    return Command(
        method=EMPTINESS,
        reason=EMPTY,
        candidates=nodes,
        savings=total,
        explanation=(
            f"remove {len(nodes)} empty node{'s' if len(nodes) != 1 else ''} ({type_summary(nodes)}, "
            f"${total:.3f}/h), empty for {describe_seconds(shortest)} or longer: saves ${total:.3f}/h"
        ),
    )


def plan(inp: DisruptionInput) -> Plan:
    """Decide this pass's repairs, expirations and at most one graceful command (see the module
    docstring)."""
    cluster = Cluster(inp)
    result = Plan()
    if inp.settings.node_repair:
        result.repairs = repair_commands(cluster, result.repair_blocked)
        if result.repairs:
            # The other methods wait for the next pass, when the repaired nodes count as disrupting.
            repaired = {c.name for command in result.repairs for c in command.candidates}
            for state in cluster.ours:
                if state.name not in repaired and not state.terminating:
                    result.skipped.setdefault(state.name, "unhealthy nodes are repaired first this pass")
            return result
    simulator = Simulator(cluster)
    result.expirations = expiration_commands(cluster, simulator) + static_expirations(cluster)
    skipped = result.skipped
    expiring = {c.name for command in result.expirations for c in command.candidates}
    result.scale_down = scale_down_commands(cluster, expiring, skipped)
    if result.expirations or result.scale_down:
        # The graceful methods wait for the next pass: their simulations would count the leaving nodes
        # as room (and the expirations' simulation counted the graceful candidates), and the budgets
        # would not yet see the leaving nodes as disrupting.
        leaving = expiring | {c.name for command in result.scale_down for c in command.candidates}
        why = (
            "expirations go first this pass"
            if result.expirations
            else "static scale-down goes first this pass"
        )
        for state in cluster.ours:
            if state.name not in leaving and not state.terminating:
                skipped.setdefault(state.name, why)
        return result
    # Static pools' nodes: never empty or consolidatable; drifted, they are replaced by their own pool.
    excluded = {s.name for s in cluster.ours if is_static(cluster, s)}
    result.command = (
        emptiness_command(cluster, excluded, skipped)
        or static_drift_command(cluster, skipped)
        or drift_command(cluster, simulator, excluded, skipped)
    )
    if result.command is None:
        candidates = ordered_candidates(cluster, excluded, skipped)
        result.command = multi_node_command(cluster, simulator, candidates) or single_node_command(
            cluster, simulator, candidates, skipped, result.unconsolidatable
        )
    return result


def _pods_changed(before: NodeState, after: NodeState) -> str | None:
    old = {p.key for p in evictable_pods(before)}
    new = {p.key for p in evictable_pods(after)}
    if old == new:
        return None
    added = sorted(new - old)
    removed = sorted(old - new)
    parts = []
    if added:
        parts.append(f"added {', '.join(added[:3])}{' ...' if len(added) > 3 else ''}")
    if removed:
        parts.append(f"removed {', '.join(removed[:3])}{' ...' if len(removed) > 3 else ''}")
    return f"pods on node {after.name} changed ({'; '.join(parts)})"


def validate(command: Command, inp: DisruptionInput) -> str | None:
    """None when ``command`` still holds against the fresh ``inp``; otherwise why it no longer does.

    Checks that every node is still there, ours and not already going; for graceful commands also the
    candidate rules, that its evictable pods are the same, the budgets and PDBs, and the method's own
    condition (still empty for its consolidateAfter, still drifted and its pods still placeable, or the
    consolidation still valid with no dearer a replacement than planned).
    """
    cluster = Cluster(inp)
    fresh: list[NodeState] = []
    for planned in command.candidates:
        state = cluster.by_name.get(planned.name)
        if state is None:
            return f"node {planned.name} is gone"
        if cluster.pool_of(state) is None:
            return f"node {planned.name} no longer belongs to a known NodePool"
        if state.terminating:
            return f"node {planned.name} is already being disrupted"
        fresh.append(state)
    if command.method == REPAIR:
        return next((why for why in (still_due(cluster, s) for s in fresh) if why), None)
    if command.method == EXPIRATION:
        expired = [s.name for s in fresh if not is_expired(cluster, s)]
        return f"node {expired[0]} has not expired any more" if expired else None
    if command.method == SCALE_DOWN:
        return still_surplus(cluster, fresh)
    builder = CommandBuilder(cluster, command.reason)
    for planned, state in zip(command.candidates, fresh, strict=True):
        why = cluster.graceful_block(state) or _pods_changed(planned, state) or builder.add(state)
        if why is not None:
            return f"node {state.name}: {why}"
    if command.method == EMPTINESS:
        late = [s.name for s in fresh if empty_for(cluster, s) is None]
        return f"node {late[0]} is no longer empty long enough" if late else None
    simulator = Simulator(cluster)
    if command.method == DRIFT:
        steady = [s.name for s in fresh if drift_reason(cluster, s) is None]
        if steady:
            return f"node {steady[0]} has not drifted any more"
        if any(evictable_pods(s) for s in fresh) and not all(is_static(cluster, s) for s in fresh):
            results = simulator.run(fresh)
            if results.errors:
                return f"{len(results.errors)} pod(s) cannot be scheduled elsewhere any more"
        return None
    if command.method in (MULTI_NODE, SINGLE_NODE):
        if not all(consolidatable(cluster, s) for s in fresh):
            return "a node is no longer eligible for consolidation"
        again, why = evaluate(cluster, simulator, fresh, command.method)
        if again is None:
            return f"consolidation no longer valid: {why}"
        if len(again.replacements) != len(command.replacements):
            return (
                f"consolidation now needs {len(again.replacements)} new node(s) "
                f"instead of {len(command.replacements)}"
            )
        if again.replacements and again.replacements[0].price > command.replacements[0].price + 1e-9:
            return (
                f"the replacement would now cost ${again.replacements[0].price:.3f}/h "
                f"instead of ${command.replacements[0].price:.3f}/h"
            )
        return None
    return f"unknown method {command.method!r}"
