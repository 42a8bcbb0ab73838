"""Disruption budget schedules: Karpenter's cron grammar, checked once here and evaluated by croniter, in UTC.

The NodePool model validates ``spec.disruption.budgets[].schedule`` with :func:`parse_schedule` and the
disruption budgets evaluate the same parsed value, so a schedule is read one way everywhere.

The grammar is Karpenter's (robfig/cron's standard parser): five fields, minute hour day-of-month month
day-of-week, with ``*``/``?``, lists, ranges, steps (``5/15`` is 5 to the top, every 15), month and weekday
names (JAN, MON; any case), and the ``@yearly``/``@annually``/``@monthly``/``@weekly``/``@daily``/
``@midnight``/``@hourly`` macros. When both day fields are restricted a day matches if either does (the
classic cron OR, as Kubernetes CronJobs); when either is ``*`` or ``?`` only the other restricts.

Checked here before croniter reads the expression, because croniter reads more than Karpenter does:
``L``, ``W``, ``#``, ``H`` and ``R``, six- or seven-field expressions and time zones are refused; ``?`` is
accepted in every field (as ``*``, like robfig/cron, where croniter takes it in the day fields only); an
equal range (``5-5``) means that one value, as in cron, where croniter widens it to the whole field. Beyond
Karpenter, on purpose: 7 is Sunday too, and a wrapping range (``FRI-MON``) is read as croniter reads it
(Friday to Monday) where Karpenter refuses it.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from functools import lru_cache
from typing import Final

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

MACROS: Final = frozenset(("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"))
FIELDS: Final = ("minute", "hour", "day-of-month", "month", "day-of-week")
_MONTHS: Final = frozenset(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
)
_WEEKDAYS: Final = frozenset(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
_NONE: Final[frozenset[str]] = frozenset()
_NAMES: Final = (_NONE, _NONE, _NONE, _MONTHS, _WEEKDAYS)
_FIELD: Final = re.compile(r"[0-9a-z*?/,\-]+")
_EQUAL_RANGE: Final = re.compile(r"\b([0-9a-z]+)-\1(?:/\d+)?\b")
_USAGE: Final = (
    "expected a cron expression with 5 fields (minute hour day-of-month month day-of-week) "
    "or @daily/@hourly/..."
)


class CronError(ValueError):
    """A budget schedule that is not Karpenter's cron; the message says what is wrong."""


class CronSchedule:
    """A checked budget schedule (UTC). Thread-safe: one parsed croniter, asked under a lock."""

    def __init__(self, expression: str, normalized: str) -> None:
        self.expression = expression
        self._cron = croniter(normalized, datetime(1970, 1, 1, tzinfo=UTC))
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        """The schedule ``expression`` stands for; :class:`CronError` when Karpenter would not read it."""
        return parse_schedule(expression)

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire time strictly after ``after``, or None when the schedule never fires (Feb 30)."""
        with self._lock:
            try:
                found: datetime = self._cron.get_next(datetime, start_time=_utc(after))
            except CroniterBadDateError:
                return None
        return found

    def last_fire(self, now: datetime, after: datetime) -> datetime | None:
        """The latest fire time in ``(after, now]``, or None when the schedule does not fire then."""
        now = _utc(now)
        fire = self.next_fire(after)
        if fire is None or fire > now:
            return None
        latest = fire
        while (following := self.next_fire(latest)) is not None and following <= now:
            latest = following
        return latest

    def fires_within(self, now: datetime, after: datetime) -> bool:
        """True when the schedule fires at some time in ``(after, now]`` (what a budget's window asks)."""
        fire = self.next_fire(after)
        return fire is not None and fire <= _utc(now)


@lru_cache(maxsize=256)
def parse_schedule(expression: str) -> CronSchedule:
    """Check ``expression`` against Karpenter's grammar and parse it (cached: budgets ask every pass)."""
    text = expression.strip().lower()
    if text.startswith(("tz=", "cron_tz=")):
        raise CronError("time zones are not supported in budget schedules (they are in UTC)")
    if text.startswith("@"):
        if text not in MACROS:
            raise CronError(f"invalid schedule {expression!r}: {_USAGE}")
        return CronSchedule(expression, text)
    fields = text.split()
    if len(fields) != len(FIELDS):
        raise CronError(f"invalid schedule {expression!r}: {_USAGE}, got {len(fields)}")
    for field, name, names in zip(fields, FIELDS, _NAMES, strict=True):
        unknown = [word for word in re.findall(r"[a-z]+", field) if word not in names]
        if not _FIELD.fullmatch(field) or unknown:
            what = repr(unknown[0].upper()) if unknown else repr(field)
            raise CronError(f"invalid schedule {expression!r}: {what} is not allowed in the {name} field")
    fields = [_EQUAL_RANGE.sub(r"\1", field.replace("?", "*")) for field in fields]
    try:
        croniter.expand(" ".join(fields))
    except CroniterBadCronError as error:
        raise CronError(f"invalid schedule {expression!r}: {_problem(fields, error)}") from None
    return CronSchedule(expression, " ".join(_day_fields(fields)))


def _day_fields(fields: list[str]) -> list[str]:
    """The fields with the two day fields written so croniter combines them as robfig/cron does.

    robfig/cron ANDs the day fields when either is a star (a list item ``*`` or ``?``, stepped by 1 at
    most) and ORs them otherwise. croniter decides on the expanded values instead: it ORs ``*/1`` with a
    weekday and ANDs ``1-31`` with ``*/2``. So a star field is written ``*`` (the same days), and when both
    are restrictions and one covers every day, every day matches and both are written ``*``.
    """
    minute, hour, day, month, weekday = fields
    if _is_star(day) or _is_star(weekday):
        day, weekday = ("*" if _is_star(day) else day), ("*" if _is_star(weekday) else weekday)
    elif _every_value(2, day) or _every_value(4, weekday):
        day = weekday = "*"
    return [minute, hour, day, month, weekday]


def _is_star(field: str) -> bool:
    """robfig/cron's star bit: some list item is ``*`` or ``?`` with no step above 1."""
    for item in field.split(","):
        span, _, step = item.partition("/")
        if span in ("*", "?") and (not step or int(step) <= 1):
            return True
    return False


def _every_value(index: int, field: str) -> bool:
    """True when ``field`` (at ``index``) takes every value of its range (``1-31``, ``SUN-SAT``, ``0-7``)."""
    alone = ["*"] * len(FIELDS)
    alone[index] = field
    return croniter.expand(" ".join(alone))[0][index] == ["*"]


def _problem(fields: list[str], error: CroniterBadCronError) -> str:
    """Which field croniter refused and why, found by reading each field alone (only on the error path)."""
    for index, (field, name) in enumerate(zip(fields, FIELDS, strict=True)):
        alone = ["*"] * len(FIELDS)
        alone[index] = field
        try:
            croniter.expand(" ".join(alone))
        except CroniterBadCronError as refused:
            return f"{field!r} in the {name} field: {_reason(refused)}"
    return _reason(error)


def _reason(error: CroniterBadCronError) -> str:
    """croniter's reason without the expression and field number it repeats."""
    message = str(error)
    if "out of range" in message or "out of bands" in message or "invalid range" in message:
        return "out of range"
    message = re.sub(r"^\[[^\]]*\]\s*|\s*in field \d+", "", message).strip()
    return message.removeprefix("is not acceptable").strip(" ,.") or "not readable"


def _utc(moment: datetime) -> datetime:
    # Naive datetimes are taken to be UTC already (budget schedules are in UTC).
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
