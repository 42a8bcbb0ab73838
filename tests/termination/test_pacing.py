"""Waits between drain passes and names of continued executions."""

from __future__ import annotations

import re

from fleetwright.termination.continuation import ExecutionContext, continuation_name, should_continue
from fleetwright.termination.pacing import next_drain_wait, next_retry_wait

FAR = 10**9


def _waits(progress: list[bool], *, interval: int = 5, ceiling: int = 60) -> list[int]:
    waits: list[int] = []
    previous: int | None = None
    for progressed in progress:
        previous = next_drain_wait(
            previous,
            interval=interval,
            ceiling=ceiling,
            progressed=progressed,
            api_error=False,
            now=0,
            deadline=FAR,
        )
        waits.append(previous)
    return waits


def test_waits_grow_while_no_pod_leaves_and_are_capped() -> None:
    waits = _waits([False] * 12)
    assert waits[:6] == [5, 8, 12, 18, 27, 41]
    assert waits[-3:] == [60, 60, 60]


def test_progress_resets_the_wait() -> None:
    waits = _waits([False, False, False, True, False])
    assert waits == [5, 8, 12, 5, 8]


def test_a_wait_never_ends_past_the_deadline() -> None:
    wait = next_drain_wait(
        60, interval=5, ceiling=60, progressed=False, api_error=False, now=1000, deadline=1007.5
    )
    assert wait == 8
    at_deadline = next_drain_wait(
        60, interval=5, ceiling=60, progressed=False, api_error=False, now=1010, deadline=1010
    )
    assert at_deadline == 60  # past the deadline only a pass the API refused comes back here


def test_an_unreachable_api_is_waited_for_even_with_zero_second_intervals() -> None:
    waits: list[int] = []
    previous: int | None = None
    for _ in range(6):
        previous = next_drain_wait(
            previous, interval=0, ceiling=60, progressed=False, api_error=True, now=0, deadline=FAR
        )
        waits.append(previous)
    assert waits == [1, 2, 3, 5, 8, 12]


def test_failure_path_retries_double_up_to_a_minute() -> None:
    assert [next_retry_wait(n, base=0) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_continuation_names_keep_the_instance_prefix_and_fit_80_characters() -> None:
    instance = "i-0123456789abcdef0"
    assert continuation_name(f"{instance}-ScheduledChange", instance, 1) == f"{instance}-ScheduledChange-c1"
    long_name = continuation_name(f"{instance}-" + "x" * 90, instance, 12)
    assert len(long_name) == 80 and long_name.startswith(f"{instance}-") and long_name.endswith("-c12")
    odd = continuation_name("run/with spaces", instance, 3)
    assert odd.startswith(f"{instance}-") and re.fullmatch(r"[A-Za-z0-9_-]+", odd)
    names = {continuation_name(f"{instance}-Drifted", instance, n) for n in range(1, 50)}
    assert len(names) == 49


def test_continue_after_the_pass_limit_or_the_age_limit() -> None:
    context = ExecutionContext("run", "arn:aws:states:us-east-1:1:stateMachine:m", start_epoch=1000.0)
    assert not should_continue(10, context, now=2000, max_passes=500, max_seconds=72000)
    assert should_continue(500, context, now=2000, max_passes=500, max_seconds=72000)
    assert should_continue(10, context, now=1000 + 72000, max_passes=500, max_seconds=72000)
    # outside Step Functions (the in-process runner) there is nothing to continue in
    assert not should_continue(10_000, ExecutionContext(), now=2000, max_passes=500, max_seconds=72000)
