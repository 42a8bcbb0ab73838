"""Static NodePools (``spec.replicas``) in disruption: scale-down to the replica count, and no consolidation.

A static pool keeps its node count whatever its nodes hold, so emptiness and consolidation leave its nodes
alone (drift and expiration still apply; the provisioner then launches what the pool lacks). When it has
more nodes than ``replicas`` (its non-terminating nodes and its claims still launching, less those
expiring this pass), the surplus goes, as Karpenter's static deprovisioning picks it: empty nodes first,
then nodes without ``karpenter.sh/do-not-disrupt`` pods, then the lowest rescheduling cost (evictable pods
× the share of the node's lifetime left); ties by age, youngest first, then name. A pool with claims still
launching waits for them to register, so a launching claim is never what tips a running node out.

Like Karpenter's, scale-down is not limited by the NodePool's disruption budgets: each surplus node gets
its own command and the termination workflow, which drains through the Eviction API (PodDisruptionBudgets
hold), with the NodePool's ``terminationGracePeriod`` as its only deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from fleetwright.disruption.candidates import Cluster, evictable_pods, node_is_empty, type_summary
from fleetwright.disruption.emptiness import is_terminal
from fleetwright.disruption.types import Command, NodeState
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION, NODEPOOL
from fleetwright.model.nodepool import NodePool

SCALE_DOWN: Final = "static-scale-down"
OVERPROVISIONED: Final = "Overprovisioned"


def is_static(cluster: Cluster, state: NodeState) -> bool:
    """True when ``state`` belongs to a static NodePool of this cluster."""
    pool = cluster.pool_of(state)
    return pool is not None and pool.spec.replicas is not None


def _static_pools(cluster: Cluster) -> list[NodePool]:
    return [p for _, p in sorted(cluster.pools.items()) if p.spec.replicas is not None]


def _launching(cluster: Cluster, pool: str) -> int:
    return sum(1 for n in cluster.input.in_flight if n.labels.get(NODEPOOL) == pool)


def _do_not_disrupt(state: NodeState) -> bool:
    return any(
        p.annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true" for p in state.node.pods if not is_terminal(p)
    )


def _lifetime_left(cluster: Cluster, state: NodeState) -> float:
    lifetime = cluster.expire_after.get(state.nodepool)
    if not lifetime:
        return 1.0
    return min(1.0, max(0.0, 1.0 - (cluster.now - state.created_at) / lifetime))


def _order(cluster: Cluster, state: NodeState) -> tuple[int, int, float, float, str]:
    empty = node_is_empty(state) and not _do_not_disrupt(state)
    cost = len(evictable_pods(state)) * _lifetime_left(cluster, state)
    return (0 if empty else 1, 1 if _do_not_disrupt(state) else 0, cost, -state.created_at, state.name)


def surplus(cluster: Cluster, pool: NodePool, going: set[str]) -> tuple[int, list[NodeState]]:
    """How many nodes ``pool`` has beyond its replicas, and its nodes that may go, in the order they go."""
    staying = [s for s in cluster.pool_nodes.get(pool.name, []) if not s.terminating and s.name not in going]
    count = len(staying) + _launching(cluster, pool.name)
    return count - (pool.spec.replicas or 0), sorted(staying, key=lambda s: _order(cluster, s))


def scale_down_commands(cluster: Cluster, going: set[str], skipped: dict[str, str]) -> list[Command]:
    """One command per node a static pool has beyond its replicas (``going``: nodes already leaving this
    pass, e.g. expiring)."""
    commands: list[Command] = []
    for pool in _static_pools(cluster):
        excess, ordered = surplus(cluster, pool, going)
        if excess <= 0:
            continue
        launching = _launching(cluster, pool.name)
        if launching:
            for state in ordered:
                skipped.setdefault(
                    state.name,
                    f"NodePool {pool.name} has {excess} node(s) beyond its {pool.spec.replicas} replicas "
                    f"but waits for {launching} launching claim(s)",
                )
            continue
        for state in ordered[:excess]:
            commands.append(
                Command(
                    method=SCALE_DOWN,
                    reason=OVERPROVISIONED,
                    candidates=[state],
                    explanation=(
                        f"remove node {state.name} ({type_summary([state])}): static NodePool {pool.name} "
                        f"has {len(ordered)} node(s) for {pool.spec.replicas} replicas"
                    ),
                )
            )
    return commands


def still_surplus(cluster: Cluster, candidates: Sequence[NodeState]) -> str | None:
    """None when removing ``candidates`` (fresh states) still leaves each static pool at least its replicas
    and no claim of it is launching; otherwise why not."""
    for name in sorted({s.nodepool for s in candidates}):
        pool = cluster.pools.get(name)
        if pool is None or pool.spec.replicas is None:
            return f"NodePool {name} is no longer static"
        excess, _ = surplus(cluster, pool, set())
        if _launching(cluster, name):
            return f"NodePool {name} has claims launching"
        leaving = sum(1 for s in candidates if s.nodepool == name)
        if excess < leaving:
            return f"NodePool {name} has {excess} node(s) beyond its replicas now"
    return None
