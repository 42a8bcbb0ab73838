"""Cutting a trace to its first seconds (``fleetwright simulate --until``, ``bench/day.py --hours``)."""

from __future__ import annotations

import math

import pytest

from fleetwright.local.simulate.trace import Trace, TracePod


def _trace() -> Trace:
    return Trace(
        (
            TracePod("early", 0.0, 100.0, "1", "1Gi"),
            TracePod("across", 50.0, 500.0, "1", "1Gi"),
            TracePod("forever", 60.0, None, "1", "1Gi"),
            TracePod("at-cut", 200.0, 300.0, "1", "1Gi"),
            TracePod("late", 250.0, 400.0, "1", "1Gi"),
        ),
        500.0,
    )


def test_a_cut_drops_later_pods_and_leaves_pods_running_at_the_cut_without_an_end() -> None:
    cut = _trace().cut(200.0)
    assert cut.duration == 200.0
    assert [(p.name, p.start, p.end) for p in cut.pods] == [
        ("early", 0.0, 100.0),
        ("across", 50.0, None),
        ("forever", 60.0, None),
    ]


def test_a_cut_at_or_past_the_end_changes_nothing() -> None:
    trace = _trace()
    assert trace.cut(500.0) == trace
    assert trace.cut(10_000.0) == trace


@pytest.mark.parametrize("until", [0.0, -5.0, math.nan, math.inf])
def test_a_cut_needs_a_positive_finite_time(until: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        _trace().cut(until)
