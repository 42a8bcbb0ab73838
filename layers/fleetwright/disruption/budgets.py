"""Disruption budgets: how many of a NodePool's nodes may be disrupted right now, for a given reason.

Semantics follow Karpenter v1:

* a budget applies to the reasons it lists, or to every reason when it lists none;
* a budget with ``schedule`` + ``duration`` is active only from each cron fire time (UTC) until
  ``duration`` later; a budget without a schedule is always active;
* ``nodes`` is a count or a percentage of the pool's nodes, rounded up;
* the most restrictive active budget wins; when no budget is active the pool is unlimited;
* the nodes already being disrupted use up the allowance.

The cron matcher understands five fields (minute hour day-of-month month day-of-week) with ``*``/``?``,
lists, ranges, steps, month and weekday names (JAN, MON) and the ``@yearly``/``@annually``/``@monthly``/
``@weekly``/``@daily``/``@midnight``/``@hourly`` aliases. As in classic cron, when both day fields are
restricted a day matches if either does. Not supported: ``L``, ``W``, ``#`` and time zones (the NodePool
model already rejects ``TZ=``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from fleetwright.model.nodepool import DEFAULT_BUDGET_NODES, Budget, NodePool
from fleetwright.model.quantity import parse_duration

REASONS: Final = ("Empty", "Drifted", "Underutilized")

_ALIASES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1
    )
}
_WEEKDAYS: Final = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}


class CronError(ValueError):
    """A budget schedule this matcher cannot read."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed five-field cron expression (UTC). Weekdays count from Sunday = 0."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day-of-month is * (then only day-of-week restricts)
    any_weekday: bool  # day-of-week is * (then only day-of-month restricts)

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        """Parse ``expression`` (five fields or an @-alias); raise :class:`CronError` when unreadable."""
        text = _ALIASES.get(expression.strip().lower(), expression)
        fields = text.split()
        if len(fields) != 5:
            raise CronError(f"schedule {expression!r}: expected 5 fields, got {len(fields)}")
        minute, hour, day, month, weekday = fields
        weekdays = _field(weekday, 0, 7, _WEEKDAYS, expression)
        return cls(
            minutes=_field(minute, 0, 59, {}, expression),
            hours=_field(hour, 0, 23, {}, expression),
            days=_field(day, 1, 31, {}, expression),
            months=_field(month, 1, 12, _MONTHS, expression),
            weekdays=frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
            any_day=day in ("*", "?"),
            any_weekday=weekday in ("*", "?"),
        )

    def day_matches(self, moment: datetime) -> bool:
        """True when the schedule fires on ``moment``'s date."""
        if moment.month not in self.months:
            return False
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def last_fire(self, now: datetime, after: datetime) -> datetime | None:
        """The latest fire time in ``(after, now]``, or None when the schedule does not fire then."""
        moment = _utc(now).replace(second=0, microsecond=0)
        after = _utc(after)
        while moment > after:
            # Skip whole days and hours that cannot match, so long windows stay cheap.
            if not self.day_matches(moment):
                moment = moment.replace(hour=0, minute=0) - timedelta(minutes=1)
            elif moment.hour not in self.hours:
                moment = moment.replace(minute=0) - timedelta(minutes=1)
            elif moment.minute not in self.minutes:
                moment -= timedelta(minutes=1)
            else:
                return moment
        return None


def _utc(moment: datetime) -> datetime:
    # Naive datetimes are taken to be UTC already (budget schedules are in UTC).
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _value(text: str, names: dict[str, int], expression: str) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise CronError(f"schedule {expression!r}: {text!r} is not a number")
    return int(text)


def _field(text: str, low: int, high: int, names: dict[str, int], expression: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = _value(step_text, {}, expression) if step_text else 1
        if step < 1:
            raise CronError(f"schedule {expression!r}: step must be at least 1")
        if span in ("*", "?"):
            start, end = low, high
        elif "-" in span:
            first, _, last = span.partition("-")
            start, end = _value(first, names, expression), _value(last, names, expression)
        else:
            start = _value(span, names, expression)
            end = high if step_text else start  # "5/15" means from 5 to the top, every 15
        if not low <= start <= end <= high:
            raise CronError(f"schedule {expression!r}: {part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def budget_is_active(budget: Budget, now: datetime) -> bool:
    """True when ``budget`` applies at ``now``: it has no schedule, or it fired within ``duration``."""
    if budget.schedule is None or budget.duration is None:
        return True
    window = timedelta(seconds=parse_duration(budget.duration) or 0)
    return CronSchedule.parse(budget.schedule).last_fire(now, now - window) is not None


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
