"""Reason text: why a pod cannot be placed, in the words ``kubectl describe`` and ``explain`` show.

Each function turns one kind of refusal (a NodePool's types, limits, minValues, DaemonSet host ports, a
topology constraint) into a sentence; :func:`explain` joins the NodePools' reasons into one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetwright.model import resources as res
from fleetwright.model.labels import HOSTNAME
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.pools import PreparedPool
from fleetwright.scheduling.topology import AFFINITY, Constraint


def daemon_port_reason(pool: PreparedPool, pod: Pod, indices: Sequence[int]) -> str:
    """Which DaemonSet binds which of the pod's host ports on the NodePool's nodes."""
    taken = sorted(
        {
            f"hostPort {mine.port}/{mine.protocol} is bound by DaemonSet {owner}"
            for i in indices
            for other, owner in pool.daemon_ports[i]
            for mine in pod.host_ports
            if mine.conflicts(other)
        }
    )
    return "; ".join(taken) + " on its nodes"


def no_types_reason(pool: PreparedPool) -> str:
    """Why a NodePool has no instance type at all."""
    if pool.dropped_for_daemons:
        return (
            f"no instance type has room for the DaemonSets that run on its nodes "
            f"({pool.dropped_for_daemons} types too small)"
        )
    reqs = pool.template.requirements.describe() or "none"
    return f"no instance type offered in this region satisfies the NodePool's requirements ({reqs})"


def too_big_reason(
    pool: PreparedPool, indices: Sequence[int], need: vec.Vector, dims: tuple[str, ...]
) -> str:
    """Which of the pod's requests no instance type of the NodePool holds (after DaemonSets)."""
    largest = vec.elementwise_max((pool.capacity[i] for i in indices), len(dims))
    short = {dims[d]: need[d] for d in range(len(dims)) if need[d] > largest[d]}
    overhead = vec.elementwise_max((vec.vector(pool.daemon_overhead[i], dims) for i in indices), len(dims))
    overhead_text = ""
    if any(overhead):
        shown = {dims[d]: overhead[d] for d in range(len(dims)) if overhead[d]}
        overhead_text = f" (after DaemonSet overhead {res.render(shown)})"
    if short:
        return f"no instance type has {res.render(short)} within the NodePool's requirements{overhead_text}"
    wanted = {dims[d]: need[d] for d in range(len(dims)) if need[d]}
    return (
        f"no instance type has {res.render(wanted)} at once within the NodePool's requirements{overhead_text}"
    )


def min_values_reason(
    pool: PreparedPool, requirements: Requirements, indices: Sequence[int], need: vec.Vector
) -> str:
    """Which ``minValues`` the instance types that fit the pod cannot meet."""
    fitting = [i for i in indices if vec.fits(need, pool.capacity[i])]
    problems = []
    for req in requirements:
        if req.min_values:
            values = {pool.types[i].labels.get(req.key) for i in fitting} - {None}
            if len(values) < req.min_values:
                problems.append(f"{req.key} minValues {req.min_values} but only {len(values)} value(s) fit")
    return "; ".join(problems) or "minValues cannot be met"


def explain(reasons: list[str]) -> str:
    """One NodePool's reason as it is, several joined."""
    if not reasons:
        return "no NodePool can run the pod"
    if len(reasons) == 1:
        return reasons[0]
    return "incompatible with every NodePool: " + "; ".join(reasons)


def topology_reason(
    constraint: Constraint, universe: list[str], undecided: Mapping[int, int], eligible: Sequence[str] = ()
) -> str:
    """Why a topology constraint allows no domain; ``undecided`` counts, per topology group, its pods
    on new claims that have not settled on a domain of its key yet."""
    group = constraint.group
    if constraint.kind == AFFINITY and group.total == 0 and undecided.get(id(group), 0) > 0:
        return (
            f"pod affinity on {group.describe()}: the matching pods are on new nodes whose "
            f"{group.describe()} is not decided yet"
        )
    if constraint.kind == AFFINITY and group.total > 0 and group.key == HOSTNAME and not universe:
        held = f"{group.total} matching pod{'s' if group.total > 1 else ''}"
        return f"pod affinity on hostname: no node holding a matching pod can take it ({held})"
    return constraint.explain(universe, eligible)
