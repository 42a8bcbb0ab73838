"""Static NodePools (``spec.replicas``) in disruption: scale-down to the replica count, no consolidation,
drift and expiration with a replacement of the pool's own.

A static pool keeps its node count whatever its nodes hold, so emptiness and consolidation leave its nodes
alone. A drifted or expired node of it is replaced like for like: the command launches one claim of the
pool (its template, every type its requirements allow) before the node goes, never past ``limits.nodes``
(a drifted node then stays; an expired one goes first and the provisioner refills the pool). Its pods are
evicted without a simulation: the pool's replacement is there for them and the provisioner places them.
Drift keeps the ``Drifted`` budgets, PDBs and ``karpenter.sh/do-not-disrupt``; expiration is forceful.

When a static pool has more nodes than ``replicas`` (its non-terminating nodes and its claims still
launching, less those expiring this pass), the surplus goes, as Karpenter's static deprovisioning picks
it: empty nodes first, then nodes without ``karpenter.sh/do-not-disrupt`` pods, then the lowest
rescheduling cost (evictable pods × the share of the node's lifetime left); ties youngest first, then by
name. A pool with claims still launching waits for them to register, so a launching claim is never what
tips a running node out.

Like Karpenter's, scale-down is not limited by the NodePool's disruption budgets: each surplus node gets
its own command and the termination workflow, which drains through the Eviction API (PodDisruptionBudgets
hold), with the NodePool's ``terminationGracePeriod`` as its only deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    describe_seconds,
    evictable_pods,
    is_terminal,
    node_is_empty,
    type_summary,
)
from fleetwright.disruption.drift import drift_reason, drifted_nodes, still_drifted
from fleetwright.disruption.expiration import expire_after_text, expired_nodes, is_expired, still_expired
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.types import DRIFT, DRIFTED, EXPIRATION, EXPIRED, Command, NodeState
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION, NODEPOOL
from fleetwright.model.nodepool import NodePool
from fleetwright.scheduling.static import static_claims
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NODES, NewNodeClaim

SCALE_DOWN: Final = "static-scale-down"
OVERPROVISIONED: Final = "Overprovisioned"


def _static_pools(cluster: Cluster) -> list[NodePool]:
    return [p for _, p in sorted(cluster.pools.items()) if p.spec.replicas is not None]


def _launching(cluster: Cluster, pool: str) -> int:
    return sum(1 for n in cluster.input.in_flight if n.labels.get(NODEPOOL) == pool)


def _do_not_disrupt(state: NodeState) -> bool:
    return any(
        p.annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true" for p in state.node.pods if not is_terminal(p)
    )


def _lifetime_left(cluster: Cluster, state: NodeState) -> float:
    lifetime = cluster.terms(state).expire_after
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


def over_limit(cluster: Cluster, pool: NodePool) -> bool:
    """True when one more node would take ``pool`` past ``limits.nodes`` (counting its nodes still
    draining and its claims launching, as the provisioner does)."""
    limit = (pool.limits() or {}).get(NODES)
    if limit is None:
        return False
    return len(cluster.pool_nodes.get(pool.name, [])) + _launching(cluster, pool.name) + 1 > limit


def replacement(cluster: Cluster, state: NodeState) -> list[NewNodeClaim]:
    """One claim of ``state``'s static pool (none when no instance type meets its requirements)."""
    pool = cluster.pools[state.nodepool]
    [template] = nodepool_templates([pool], cluster.input.nodeclasses)
    return static_claims(template, cluster.input.instance_types, cluster.input.daemonsets, 1)


def static_expirations(cluster: Cluster) -> list[Command]:
    """One forceful command per expired node of a static pool, with its replacement."""
    commands = []
    for state in expired_nodes(cluster):
        if not cluster.is_static(state):
            continue
        pool = cluster.pools[state.nodepool]
        # At limits.nodes the node goes first; the provisioner then launches what the pool lacks.
        limited = over_limit(cluster, pool)
        then = "its NodePool's limits.nodes leaves no room for a replacement first" if limited else ""
        commands.append(
            Command(
                method=EXPIRATION,
                reason=EXPIRED,
                candidates=[state],
                replacements=[] if limited else replacement(cluster, state),
                explanation=(
                    f"node {state.name} ({state.instance_type}) expired: "
                    f"{describe_seconds(cluster.now - state.created_at)} old, "
                    f"{expire_after_text(cluster, state)}; "
                    + (then or f"replaced by a node of static NodePool {pool.name}")
                ),
            )
        )
    return commands


def static_drift_command(cluster: Cluster, skipped: dict[str, str]) -> Command | None:
    """The oldest drifted node of a static pool that budgets, PDBs and do-not-disrupt let go, with its
    replacement; None when there is none."""
    for state, why in drifted_nodes(cluster, set()):
        if not cluster.is_static(state):
            continue
        block = cluster.graceful_block(state, DRIFTED) or CommandBuilder(cluster, DRIFTED).refusal(state)
        if block is None and over_limit(cluster, cluster.pools[state.nodepool]):
            block = f"a replacement would exceed NodePool {state.nodepool}'s limits.nodes"
        if block is not None:
            skipped.setdefault(state.name, f"drifted ({why}) but {block}")
            continue
        claims = replacement(cluster, state)
        if not claims:
            skipped.setdefault(state.name, f"drifted ({why}) but no instance type meets its NodePool")
            continue
        return Command(
            method=DRIFT,
            reason=DRIFTED,
            candidates=[state],
            replacements=claims,
            explanation=(
                f"replace drifted node {state.name} ({state.instance_type}) of static NodePool "
                f"{state.nodepool}: {why}"
            ),
        )
    return None


class StaticScaleDown:
    """Static pools' scale-down to ``replicas`` as a disruption method (forceful, a command per node)."""

    name = SCALE_DOWN
    reason = OVERPROVISIONED
    forceful = True

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Any node of a static pool may be its surplus (which ones go is the pool's count's call)."""
        return cluster.is_static(state) and not state.terminating

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """One command per surplus node, counting the nodes already leaving this pass as gone."""
        return scale_down_commands(ctx.cluster, ctx.going, ctx.skipped)

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """The pools still have that many nodes beyond their replicas, none launching."""
        return still_surplus(cluster, fresh)


class StaticExpiration:
    """Expiration of static pools' nodes as a disruption method (forceful; replaced by the pool's own)."""

    name = EXPIRATION
    reason = EXPIRED
    forceful = True

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Expired, and of a static pool."""
        return cluster.is_static(state) and is_expired(cluster, state)

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """One command per expired node of a static pool, with its replacement."""
        return static_expirations(ctx.cluster)

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Every node has still expired (as for any expiration)."""
        return still_expired(cluster, fresh)


class StaticDrift:
    """Drift of static pools' nodes as a disruption method (graceful; replaced by the pool's own)."""

    name = DRIFT
    reason = DRIFTED
    forceful = False

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Drifted, and of a static pool."""
        return cluster.is_static(state) and drift_reason(cluster, state) is not None

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """The oldest drifted static node the budgets allow, with its replacement, or none."""
        command = static_drift_command(ctx.cluster, ctx.skipped)
        return [command] if command is not None else []

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Still drifted (as for any drift)."""
        return still_drifted(cluster, fresh)
