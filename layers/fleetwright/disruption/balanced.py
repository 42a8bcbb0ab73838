"""``consolidationPolicy: Balanced``: a consolidation must save enough of its NodePool's cost for the
disruption it causes, as Karpenter v1.14 scores it.

For each Balanced NodePool a command touches::

    score = (savings / NodePool cost) / (disruption of the command's nodes / NodePool disruption)

and the command goes only when every Balanced pool scores at least ``1 / k`` with ``k = 2``. A node's
disruption is 1 (cordon, drain, replacement) plus each evictable pod's eviction cost: 1, raised or lowered
by ``controller.kubernetes.io/pod-deletion-cost`` (÷ 2²⁷) and the pod's priority (÷ 2²⁵), clamped to
[-10, 10], negative costs counting 0. The NodePool's totals count all its nodes; its cost is their whole
bill (:meth:`~fleetwright.disruption.candidates.Cluster.bill_of`), as are the savings. When one command
takes nodes of several pools, each pool is credited with the savings in proportion to its nodes' bill.
Other policies are not scored.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fleetwright.disruption.candidates import Cluster, evictable_pods
from fleetwright.disruption.types import NodeState
from fleetwright.model.pod import Pod

BALANCED: Final = "Balanced"
BALANCED_K: Final = 2
PER_NODE_DISRUPTION: Final = 1.0
POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
_MEMO: Final = "balanced-totals"


def is_balanced(cluster: Cluster, state: NodeState) -> bool:
    """``state``'s NodePool has ``consolidationPolicy: Balanced``."""
    pool = cluster.pool_of(state)
    return pool is not None and pool.spec.disruption.consolidation_policy == BALANCED


def eviction_cost(pod: Pod) -> float:
    """Karpenter's cost of evicting ``pod`` (1 by default; see the module docstring)."""
    cost = 1.0
    raw = pod.annotations.get(POD_DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):  # an unreadable deletion cost counts as none, as in Karpenter
            cost += float(raw) / 2.0**27
    cost += pod.priority / 2.0**25
    return min(10.0, max(-10.0, cost))


def disruption_cost(state: NodeState) -> float:
    """The cost of disrupting ``state``: 1 plus its evictable pods' positive eviction costs."""
    return PER_NODE_DISRUPTION + sum(max(0.0, eviction_cost(p)) for p in evictable_pods(state))


@dataclass(frozen=True, slots=True)
class PoolTotals:
    """A NodePool's hourly cost and disruption cost, summed over its nodes."""

    cost: float
    disruption: float


def pool_totals(cluster: Cluster) -> dict[str, PoolTotals]:
    """Totals of every Balanced NodePool (computed once per pass)."""
    found = cluster.memo.get(_MEMO)
    if isinstance(found, dict):
        return found
    totals = {
        name: PoolTotals(cluster.bill_of(states), sum(disruption_cost(s) for s in states))
        for name, states in cluster.pool_nodes.items()
        if cluster.pools[name].spec.disruption.consolidation_policy == BALANCED
    }
    cluster.memo[_MEMO] = totals
    return totals


@dataclass(frozen=True, slots=True)
class Score:
    """One pool's score of a command: the share of its cost saved over the share of its disruption."""

    pool: str
    savings_fraction: float
    disruption_fraction: float

    @property
    def value(self) -> float:
        """``savings_fraction / disruption_fraction`` (0 when nothing is saved)."""
        if self.savings_fraction <= 0:
            return 0.0
        if self.disruption_fraction == 0:
            return math.inf
        return self.savings_fraction / self.disruption_fraction

    @property
    def approved(self) -> bool:
        """At least ``1 / k``."""
        return self.value >= 1.0 / BALANCED_K

    def describe(self) -> str:
        """``NodePool web scores 0.31 (saves 4.0% of its cost for 12.9% of its disruption; needs 0.50)``."""
        return (
            f"NodePool {self.pool} scores {self.value:.2f} (saves {self.savings_fraction:.1%} of its cost "
            f"for {self.disruption_fraction:.1%} of its disruption; needs {1.0 / BALANCED_K:.2f})"
        )


def scores(cluster: Cluster, nodes: Sequence[NodeState], savings: float) -> list[Score]:
    """The score of removing ``nodes`` while saving ``savings`` per hour, for each Balanced pool among
    them (none for other policies)."""
    by_pool: dict[str, list[NodeState]] = {}
    for state in nodes:
        by_pool.setdefault(state.nodepool, []).append(state)
    totals = pool_totals(cluster)
    source = cluster.bill_of(nodes)
    found: list[Score] = []
    for name, states in sorted(by_pool.items()):
        pool_total = totals.get(name)
        if pool_total is None:
            continue
        share = savings
        if len(by_pool) > 1 and source > 0:
            share = savings * cluster.bill_of(states) / source
        if pool_total.cost <= 0 or pool_total.disruption <= 0:
            found.append(Score(name, 0.0, 0.0))
            continue
        found.append(
            Score(
                name,
                share / pool_total.cost,
                sum(disruption_cost(s) for s in states) / pool_total.disruption,
            )
        )
    return found


def rejection(cluster: Cluster, nodes: Sequence[NodeState], savings: float) -> str | None:
    """Why a Balanced pool refuses the command (None when every Balanced pool approves or none is in it)."""
    for score in scores(cluster, nodes, savings):
        if not score.approved:
            return f"consolidationPolicy Balanced: {score.describe()}"
    return None


def approval(cluster: Cluster, nodes: Sequence[NodeState], savings: float) -> str:
    """The scores of an approved command, for its explanation ("" when no Balanced pool is in it)."""
    return "; ".join(s.describe() for s in scores(cluster, nodes, savings))


def could_pass(cluster: Cluster, state: NodeState) -> bool:
    """Deleting ``state`` outright (the best any command removing it can do) would pass its pool's score;
    always True for other policies."""
    if not is_balanced(cluster, state):
        return True
    return rejection(cluster, [state], state.price) is None
