"""Emptiness (reason ``Empty``): nodes holding nothing but DaemonSet, static and finished pods are removed
once they have been empty for their NodePool's ``consolidateAfter``: since the pass that first saw them
empty, and since their last pod event (:mod:`fleetwright.disruption.podevents`), whichever is later.

Every such node the ``Empty`` budgets, PodDisruptionBudgets and do-not-disrupt allow goes in one command,
longest empty first; no replacement is launched. A static NodePool's nodes are never empty for this
method: the pool keeps them (:mod:`fleetwright.disruption.static_pools` scales it down).
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    describe_seconds,
    is_empty,
    node_is_empty,
    type_summary,
)
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.types import EMPTINESS, EMPTY, Command, NodeState

# ``is_empty`` is the cluster reader's test for its "empty since" markers too.
__all__ = ["Emptiness", "emptiness_command", "empty_for", "is_empty"]


def empty_for(cluster: Cluster, state: NodeState) -> float | None:
    """How long ``state`` has been empty past its NodePool's consolidateAfter allowance: the seconds it has
    been empty when that is at least consolidateAfter, else None (also for nodes that are not empty, and for
    a static pool's nodes: it keeps them)."""
    pool = cluster.pool_of(state)
    if pool is None or state.empty_since is None or not node_is_empty(state) or cluster.is_static(state):
        return None
    after = cluster.consolidate_after[pool.name]
    empty = cluster.now - max(state.empty_since, state.last_pod_event or state.empty_since)
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
    total = cluster.bill_of(nodes)
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


class Emptiness:
    """Emptiness as a disruption method (graceful, one command per pass)."""

    name = EMPTINESS
    reason = EMPTY
    forceful = False

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Empty for at least its NodePool's consolidateAfter."""
        return empty_for(cluster, state) is not None

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """The one command removing the empty nodes the budgets allow, or none."""
        command = emptiness_command(ctx.cluster, ctx.static, ctx.skipped)
        return [command] if command is not None else []

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Every node is still empty for its consolidateAfter."""
        late = [s.name for s in fresh if not self.should_disrupt(cluster, s)]
        return f"node {late[0]} is no longer empty long enough" if late else None
