"""Budget schedules read as Karpenter reads them (robfig/cron's standard parser), in UTC, with croniter
underneath: the edges where croniter alone would read a schedule differently, clear refusals of what
Karpenter refuses, and a comparison with robfig/cron's documented rules on generated schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.model.cron import CronError, parse_schedule

WEDNESDAY = datetime(2025, 1, 15, tzinfo=UTC)
EVERY_DAY = [(WEDNESDAY + timedelta(days=offset)).strftime("%a %d") for offset in range(14)]


def midnights(expression: str, days: int = 14) -> list[str]:
    """The days among the two weeks from Wednesday 15 January 2025 on which ``expression`` fires at 00:00."""
    schedule = parse_schedule(expression)
    found = []
    for offset in range(days):
        moment = WEDNESDAY + timedelta(days=offset)
        if schedule.fires_within(moment, moment - timedelta(seconds=1)):
            found.append(moment.strftime("%a %d"))
    return found


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        # Both day fields restricted: either one (the 20th, or any Monday).
        ("0 0 20 * MON", ["Mon 20", "Mon 27"]),
        ("0 0 16 * MON", ["Thu 16", "Mon 20", "Mon 27"]),
        # A star day-of-month (also */1 and ?, and a list holding *): only the weekday restricts.
        ("0 0 * * MON", ["Mon 20", "Mon 27"]),
        ("0 0 */1 * MON", ["Mon 20", "Mon 27"]),  # croniter alone fires every day
        ("0 0 ? * MON", ["Mon 20", "Mon 27"]),
        ("0 0 1,* * MON", ["Mon 20", "Mon 27"]),
        # A stepped star is a restriction: OR again.
        ("0 0 */10 * MON", ["Mon 20", "Tue 21", "Mon 27"]),
        # A restriction covering every day, with another restriction: every day (croniter alone: weekdays).
        ("0 0 1-31 * */3", EVERY_DAY),
        ("0 0 20 * SUN-SAT", EVERY_DAY),
        # Weekday steps end at Saturday (6): 6/1 is Saturday only, not Sunday as well.
        ("0 0 * * 6/1", ["Sat 18", "Sat 25"]),
        # 7 is Sunday too; names in any case.
        ("0 0 * * 7", ["Sun 19", "Sun 26"]),
        ("0 0 * jan sun", ["Sun 19", "Sun 26"]),
        # An equal range is that one value (croniter alone: every day).
        ("0 0 20-20 * *", ["Mon 20"]),
        # A wrapping range, read as croniter reads it (Karpenter refuses it).
        ("0 0 * * FRI-SUN", ["Fri 17", "Sat 18", "Sun 19", "Fri 24", "Sat 25", "Sun 26"]),
        ("@weekly", ["Sun 19", "Sun 26"]),
        ("@MONTHLY", []),
    ],
)
def test_day_fields_combine_as_in_karpenter(expression: str, days: list[str]) -> None:
    assert midnights(expression) == days


def test_a_schedule_that_never_fires_is_never_active() -> None:
    # 30 February: accepted (Karpenter accepts it), and no window ever contains a fire time.
    schedule = parse_schedule("0 0 30 2 *")
    assert not schedule.fires_within(WEDNESDAY, WEDNESDAY - timedelta(days=400))
    assert schedule.last_fire(WEDNESDAY, WEDNESDAY - timedelta(days=400)) is None


def test_window_bounds_exclude_the_start_and_include_now() -> None:
    schedule = parse_schedule("0 9 * * *")
    nine = datetime(2025, 1, 15, 9, 0, tzinfo=UTC)
    assert schedule.fires_within(nine, nine - timedelta(hours=1))
    assert not schedule.fires_within(nine + timedelta(hours=1), nine)
    assert schedule.last_fire(nine + timedelta(days=2), nine) == nine + timedelta(days=2)
    # Naive moments are UTC; other zones are converted.
    assert schedule.fires_within(nine.replace(tzinfo=None), nine.replace(tzinfo=None) - timedelta(minutes=1))


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 9 * *", "expected a cron expression with 5 fields"),
        ("0 0 9 * * *", "expected a cron expression with 5 fields"),  # croniter reads seconds; Karpenter not
        ("@every 5m", "expected a cron expression with 5 fields"),
        ("TZ=Europe/Paris 0 9 * * *", "time zones are not supported"),
        ("61 * * * *", "'61' in the minute field: out of range"),
        ("0 0 0 * *", "'0' in the day-of-month field: out of range"),
        ("0 0 * 13 *", "'13' in the month field: out of range"),
        ("*/0 * * * *", "'*/0' in the minute field: step '0' is not acceptable"),
        ("0 9 L * *", "'L' is not allowed in the day-of-month field"),
        ("0 9 15W * *", "'W' is not allowed in the day-of-month field"),
        ("0 9 * * 5#2", "'5#2' is not allowed in the day-of-week field"),
        ("H 9 * * *", "'H' is not allowed in the minute field"),
        ("R 9 * * *", "'R' is not allowed in the minute field"),
        ("0 9 * MON *", "'MON' is not allowed in the month field"),
    ],
)
def test_what_karpenter_refuses_is_refused_with_the_field_named(expression: str, message: str) -> None:
    with pytest.raises(CronError) as raised:
        parse_schedule(expression)
    assert message in str(raised.value)


# robfig/cron's rules, written out for the comparison: a list of items, each ``*``/``?``, ``a``, ``a-b``,
# optionally ``/step`` (``a/step`` runs to the field's top); the star bit when an item is ``*``/``?`` with a
# step of 1; the day fields ANDed when either has the star bit, ORed otherwise.
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def robfig_values(field: str, low: int, high: int) -> tuple[set[int], bool]:
    values: set[int] = set()
    star = False
    for item in field.split(","):
        span, _, step_text = item.partition("/")
        step = int(step_text or 1)
        if span in ("*", "?"):
            start, end, star = low, high, star or step == 1
        elif "-" in span:
            start, end = (int(part) for part in span.split("-"))
        else:
            start = int(span)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return values, star


def robfig_fires(fields: list[str], moment: datetime) -> bool:
    (minutes, _), (hours, _), (days, day_star), (months, _), (weekdays, weekday_star) = (
        robfig_values(field, *bounds) for field, bounds in zip(fields, BOUNDS, strict=True)
    )
    day_ok, weekday_ok = moment.day in days, moment.isoweekday() % 7 in weekdays
    day_matches = (day_ok and weekday_ok) if (day_star or weekday_star) else (day_ok or weekday_ok)
    return moment.minute in minutes and moment.hour in hours and moment.month in months and day_matches


@st.composite
def cron_field(draw: st.DrawFn, low: int, high: int) -> str:
    def item() -> str:
        kind = draw(st.sampled_from(["star", "value", "range", "from"]))
        step = draw(st.sampled_from(["", "/1", f"/{draw(st.integers(1, high - low + 1))}"]))
        first = draw(st.integers(low, high))
        if kind == "star":
            return draw(st.sampled_from(["*", "?"])) + step
        if kind == "range":
            return f"{first}-{draw(st.integers(first, high))}{step}"
        if kind == "from":
            return f"{first}/{draw(st.integers(1, 7))}"
        return str(first)

    return ",".join(item() for _ in range(draw(st.integers(1, 2))))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    fields=st.tuples(*(cron_field(low, high) for low, high in BOUNDS)),
    start=st.integers(0, 3 * 365 * 24 * 60),
    window=st.sampled_from([1, 30, 90, 24 * 60, 3 * 24 * 60]),
)
def test_fire_windows_match_robfig_cron(fields: tuple[str, ...], start: int, window: int) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=start)
    expected = any(robfig_fires(list(fields), now - timedelta(minutes=back)) for back in range(window))
    assert parse_schedule(" ".join(fields)).fires_within(now, now - timedelta(minutes=window)) == expected
