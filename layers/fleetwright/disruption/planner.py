"""The disruption planner: one pass's decisions, from a :class:`DisruptionInput` alone (pure, deterministic).

:func:`plan` tries the disruption methods (:class:`~fleetwright.disruption.method.DisruptionMethod`) in
order. Node repair (with ``node_repair`` on) goes first and alone: when it repairs anything, the other
methods wait for the next pass. Then :data:`METHODS`, in Karpenter's order: the forceful ones
(expiration, static pools' expiration and scale-down) all run and each keeps every command it finds;
when they found any, the graceful ones wait. Otherwise the graceful ones (emptiness, static pools' drift,
drift, multi-node consolidation, single-node consolidation) run until one finds a command, the pass's
only graceful command. :func:`validate` re-checks a command against a fresh input before the controller
acts on it. See docs/disruption.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from fleetwright.disruption.candidates import Cluster, CommandBuilder, evictable_pods
from fleetwright.disruption.consolidation import MultiNodeConsolidation, SingleNodeConsolidation
from fleetwright.disruption.drift import Drift
from fleetwright.disruption.emptiness import Emptiness
from fleetwright.disruption.expiration import Expiration
from fleetwright.disruption.method import DisruptionMethod, PassContext
from fleetwright.disruption.repair import Repair
from fleetwright.disruption.static_pools import (
    SCALE_DOWN,
    StaticDrift,
    StaticExpiration,
    StaticScaleDown,
)
from fleetwright.disruption.types import EXPIRATION, Command, DisruptionInput, NodeState, Plan

REPAIR: Final[DisruptionMethod] = Repair()

# Karpenter's order. Static pools' nodes are never empty or consolidatable; drifted, they are replaced by
# their own pool (static drift goes before drift, as in Karpenter).
METHODS: Final[tuple[DisruptionMethod, ...]] = (
    Expiration(),
    StaticExpiration(),
    StaticScaleDown(),
    Emptiness(),
    StaticDrift(),
    Drift(),
    MultiNodeConsolidation(),
    SingleNodeConsolidation(),
)

# Each command's method by name, for validation (methods sharing a name share their validation).
_BY_NAME: Final[dict[str, DisruptionMethod]] = {m.name: m for m in (REPAIR, *METHODS)}

# Why the nodes a forceful method leaves alone wait, by the first forceful method that decided.
_WAIT: Final = {
    EXPIRATION: "expirations go first this pass",
    SCALE_DOWN: "static scale-down goes first this pass",
}


def plan(inp: DisruptionInput) -> Plan:
    """Decide this pass's repairs, forceful commands and at most one graceful command (see the module
    docstring)."""
    result = Plan()
    ctx = PassContext(Cluster(inp), result)
    result.repairs = REPAIR.compute_commands(ctx)
    if result.repairs:
        # The other methods wait for the next pass, when the repaired nodes count as disrupting.
        _hold(ctx, result.repairs, "unhealthy nodes are repaired first this pass")
        return result
    forceful: list[Command] = []
    for method in METHODS:
        if method.forceful:
            commands = method.compute_commands(ctx)
            (result.scale_down if method.name == SCALE_DOWN else result.expirations).extend(commands)
            forceful.extend(commands)
            ctx.going.update(c.name for command in commands for c in command.candidates)
        elif forceful:
            break
        else:
            found = method.compute_commands(ctx)
            if found:
                result.command = found[0]
                break
    if forceful:
        # The graceful methods wait for the next pass: their simulations would count the leaving nodes as
        # room (and the expirations' simulation counted the graceful candidates), and the budgets would
        # not yet see the leaving nodes as disrupting.
        _hold(ctx, forceful, _WAIT[forceful[0].method])
    return result


def _hold(ctx: PassContext, commands: Sequence[Command], why: str) -> None:
    """Note ``why`` for every node of ours neither in ``commands`` nor already going."""
    leaving = {c.name for command in commands for c in command.candidates}
    for state in ctx.cluster.ours:
        if state.name not in leaving and not state.terminating:
            ctx.skipped.setdefault(state.name, why)


def validate(command: Command, inp: DisruptionInput) -> str | None:
    """None when ``command`` still holds against the fresh ``inp``; otherwise why it no longer does.

    Checks that every node is still there, ours and not already going; for graceful commands also the
    candidate rules, that its evictable pods are the same, the budgets and PDBs; then the method's own
    condition (:meth:`DisruptionMethod.validate`: still empty for its consolidateAfter, still drifted and
    its pods still placeable, the consolidation still valid with no dearer a replacement than planned, ...).
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
    method = _BY_NAME.get(command.method)
    if method is None:
        return f"unknown method {command.method!r}"
    if not method.forceful:
        why = _still_graceful(cluster, command, fresh)
        if why is not None:
            return why
    return method.validate(cluster, command, fresh)


def _still_graceful(cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
    """Why a graceful command's nodes may no longer go together (blocks, changed pods, budgets, PDBs)."""
    builder = CommandBuilder(cluster, command.reason)
    for planned, state in zip(command.candidates, fresh, strict=True):
        why = (
            cluster.graceful_block(state, command.reason)
            or _pods_changed(planned, state)
            or builder.add(state)
        )
        if why is not None:
            return f"node {state.name}: {why}"
    return None


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
