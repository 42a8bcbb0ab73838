"""Disruption budgets: counts, percentages, schedules, reasons, and nodes already disrupting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from fleetwright.disruption.budgets import allowed_disruptions
from fleetwright.model.cron import CronError, CronSchedule
from fleetwright.model.nodepool import NodePool

# A Wednesday.
NOON = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)


def pool(budgets: list[dict[str, Any]] | None = None, name: str = "default") -> NodePool:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            }
        }
    }
    if budgets is not None:
        spec["disruption"] = {"consolidateAfter": "0s", "budgets": budgets}
    return NodePool.model_validate(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}
    )


@pytest.mark.parametrize(("total", "allowed"), [(5, 1), (10, 1), (11, 2), (40, 4), (0, 0)])
def test_default_budget_is_ten_percent_rounded_up(total: int, allowed: int) -> None:
    assert allowed_disruptions(pool(), "Empty", total, 0, NOON) == allowed


def test_empty_budget_list_falls_back_to_ten_percent() -> None:
    assert allowed_disruptions(pool([]), "Empty", 30, 0, NOON) == 3


def test_zero_blocks_every_disruption() -> None:
    assert allowed_disruptions(pool([{"nodes": "0"}]), "Drifted", 100, 0, NOON) == 0


def test_count_budget() -> None:
    assert allowed_disruptions(pool([{"nodes": "3"}]), "Empty", 100, 0, NOON) == 3


def test_percentage_budget_rounds_up() -> None:
    assert allowed_disruptions(pool([{"nodes": "25%"}]), "Empty", 9, 0, NOON) == 3


def test_nodes_already_disrupting_use_up_the_budget() -> None:
    nodepool = pool([{"nodes": "3"}])
    assert allowed_disruptions(nodepool, "Empty", 10, 2, NOON) == 1
    assert allowed_disruptions(nodepool, "Empty", 10, 5, NOON) == 0


def test_most_restrictive_active_budget_wins() -> None:
    nodepool = pool([{"nodes": "50%"}, {"nodes": "2"}, {"nodes": "30%"}])
    assert allowed_disruptions(nodepool, "Empty", 10, 0, NOON) == 2
    assert allowed_disruptions(nodepool, "Empty", 3, 0, NOON) == 1  # 30% of 3 rounds up to 1


def test_budget_applies_only_to_the_reasons_it_lists() -> None:
    nodepool = pool([{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "5"}])
    assert allowed_disruptions(nodepool, "Drifted", 20, 0, NOON) == 0
    assert allowed_disruptions(nodepool, "Empty", 20, 0, NOON) == 5


def test_no_applicable_budget_means_every_node() -> None:
    nodepool = pool([{"nodes": "0", "reasons": ["Underutilized"]}])
    assert allowed_disruptions(nodepool, "Empty", 7, 2, NOON) == 5


def test_unknown_reason_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown disruption reason"):
        allowed_disruptions(pool(), "Expired", 10, 0, NOON)


def test_scheduled_budget_is_active_inside_its_window_only() -> None:
    # Business hours freeze: from 09:00 on weekdays, for 8 hours, nothing may be disrupted.
    nodepool = pool([{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}, {"nodes": "4"}])
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 9, 0, tzinfo=UTC)) == 0
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 16, 59, tzinfo=UTC)) == 0
    # The window ends after exactly 8 hours, and before 09:00 it has not opened.
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 17, 0, tzinfo=UTC)) == 4
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 8, 59, tzinfo=UTC)) == 4
    # Saturday: the schedule does not fire.
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 18, 12, 0, tzinfo=UTC)) == 4


def test_scheduled_window_crosses_midnight() -> None:
    nodepool = pool([{"nodes": "1", "schedule": "@daily", "duration": "30m"}, {"nodes": "6"}])
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 16, 0, 29, 59, tzinfo=UTC)) == 1
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 16, 0, 30, tzinfo=UTC)) == 6
    late = pool([{"nodes": "1", "schedule": "0 22 * * *", "duration": "4h"}, {"nodes": "6"}])
    assert allowed_disruptions(late, "Empty", 10, 0, datetime(2025, 1, 16, 1, 0, tzinfo=UTC)) == 1


def test_schedule_is_read_in_utc() -> None:
    nodepool = pool([{"nodes": "0", "schedule": "0 9 * * *", "duration": "1h"}, {"nodes": "4"}])
    # 10:30 in UTC+2 is 08:30 UTC: before the window.
    plus_two = timezone(timedelta(hours=2))
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 10, 30, tzinfo=plus_two)) == 4
    assert allowed_disruptions(nodepool, "Empty", 10, 0, datetime(2025, 1, 15, 11, 30, tzinfo=plus_two)) == 0


@pytest.mark.parametrize(
    ("expression", "moment", "fires"),
    [
        ("*/15 * * * *", datetime(2025, 1, 15, 12, 45), True),
        ("*/15 * * * *", datetime(2025, 1, 15, 12, 46), False),
        ("5/20 * * * *", datetime(2025, 1, 15, 12, 45), True),
        ("0,30 8-10 * * *", datetime(2025, 1, 15, 10, 30), True),
        ("0,30 8-10 * * *", datetime(2025, 1, 15, 11, 0), False),
        ("0 0 * JAN-MAR MON", datetime(2025, 1, 13, 0, 0), True),
        ("0 0 * JAN-MAR MON", datetime(2025, 4, 14, 0, 0), False),
        ("0 0 * * 7", datetime(2025, 1, 19, 0, 0), True),  # 7 is Sunday
        ("@monthly", datetime(2025, 2, 1, 0, 0), True),
        ("@hourly", datetime(2025, 2, 1, 7, 0), True),
        ("@weekly", datetime(2025, 1, 18, 0, 0), False),
        # Both day fields restricted: either one matches (the 1st, or any Friday).
        ("0 0 1 * FRI", datetime(2025, 1, 17, 0, 0), True),
        ("0 0 1 * FRI", datetime(2025, 1, 1, 0, 0), True),
        ("0 0 1 * FRI", datetime(2025, 1, 16, 0, 0), False),
        # Only day-of-month restricted: weekday does not widen it.
        ("0 0 1 * *", datetime(2025, 1, 17, 0, 0), False),
    ],
)
def test_cron_matching(expression: str, moment: datetime, fires: bool) -> None:
    moment = moment.replace(tzinfo=UTC)
    schedule = CronSchedule.parse(expression)
    assert (schedule.last_fire(moment, moment - timedelta(minutes=1)) == moment) is fires


@pytest.mark.parametrize("expression", ["0 9 * *", "61 * * * *", "0 9 L * *", "*/0 * * * *"])
def test_unreadable_schedules_are_rejected(expression: str) -> None:
    with pytest.raises(CronError):
        CronSchedule.parse(expression)


def test_long_window_finds_a_fire_time_far_back() -> None:
    # Yearly schedule with a 720h window: January 20th is still inside the window opened on January 1st.
    schedule = CronSchedule.parse("@yearly")
    now = datetime(2025, 1, 20, 12, 0, tzinfo=UTC)
    assert schedule.last_fire(now, now - timedelta(hours=720)) == datetime(2025, 1, 1, tzinfo=UTC)
    assert schedule.last_fire(now, now - timedelta(hours=24)) is None
