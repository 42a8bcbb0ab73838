"""Disruption budgets: how many of a NodePool's nodes may be disrupted right now, for a given reason.

Semantics follow Karpenter v1:

* a budget applies to the reasons it lists, or to every reason when it lists none;
* a budget with ``schedule`` + ``duration`` is active only from each cron fire time (UTC) until
  ``duration`` later; a budget without a schedule is always active;
* ``nodes`` is a count or a percentage of the pool's nodes, rounded up;
* the most restrictive active budget wins; when no budget is active the pool is unlimited;
* the nodes already being disrupted use up the allowance.

Schedules are read by ``fleetwright.model.cron`` (Karpenter's cron grammar on croniter), the same
parser the NodePool model validates them with.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from fleetwright.model.cron import parse_schedule
from fleetwright.model.nodepool import DEFAULT_BUDGET_NODES, Budget, NodePool
from fleetwright.model.quantity import parse_duration

REASONS: Final = ("Empty", "Drifted", "Underutilized")


def budget_is_active(budget: Budget, now: datetime) -> bool:
    """True when ``budget`` applies at ``now``: it has no schedule, or it fired within ``duration``."""
    if budget.schedule is None or budget.duration is None:
        return True
    window = timedelta(seconds=parse_duration(budget.duration) or 0)
    return parse_schedule(budget.schedule).fires_within(now, now - window)


def budget_limit(budget: Budget, total_nodes: int) -> int:
    """The number of nodes ``budget`` allows out of ``total_nodes`` (percentages rounded up)."""
    if budget.nodes.endswith("%"):
        percent = int(budget.nodes[:-1])
        return -(-total_nodes * percent // 100)
    return int(budget.nodes)


def active_budgets(nodepool: NodePool, reason: str, now: datetime) -> list[Budget]:
    """The budgets of ``nodepool`` that constrain ``reason`` at ``now``.

    A NodePool with an empty ``budgets`` list is treated like one that omits it: 10% of its nodes.
    """
    if reason not in REASONS:
        raise ValueError(f"unknown disruption reason {reason!r}: expected one of {', '.join(REASONS)}")
    budgets = nodepool.spec.disruption.budgets or [Budget(nodes=DEFAULT_BUDGET_NODES)]
    return [
        budget
        for budget in budgets
        if (budget.reasons is None or reason in budget.reasons) and budget_is_active(budget, now)
    ]


def allowed_disruptions(
    nodepool: NodePool, reason: str, total_nodes: int, disrupting_now: int, now: datetime
) -> int:
    """How many more of ``nodepool``'s ``total_nodes`` may be disrupted for ``reason`` at ``now``.

    ``disrupting_now`` (nodes of the pool already being disrupted, for any reason) is subtracted from the
    most restrictive active budget; when no budget is active the limit is every node of the pool.
    """
    limits = [budget_limit(budget, total_nodes) for budget in active_budgets(nodepool, reason, now)]
    limit = min(limits, default=total_nodes)
    return max(0, limit - disrupting_now)
