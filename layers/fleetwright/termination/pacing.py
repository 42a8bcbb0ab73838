"""How long the workflow waits before its next pass: growing while nothing changes, so a drain that a
PodDisruptionBudget holds for hours costs few passes (and few history events), and short again as soon as
pods leave."""

from __future__ import annotations

import math

GROWTH = 1.5
API_ERROR_MIN_SECONDS = 1  # an unreachable API is waited for even with 0 s drain intervals


def next_drain_wait(
    previous: int | None,
    *,
    interval: int,
    ceiling: int,
    progressed: bool,
    api_error: bool,
    now: float,
    deadline: float,
) -> int:
    """Seconds until the next drain pass.

    Starts at ``interval``; grows by half (at least a second) while no pod leaves, up to ``ceiling``
    (never below ``interval``); back to ``interval`` when the pass made progress. A pass the API refused
    waits at least ``API_ERROR_MIN_SECONDS``. Before the deadline the wait never ends past it, so the pass
    that deletes (or gives up on) the remaining pods runs on time.
    """
    cap = max(ceiling, interval)
    if previous is None or progressed:
        wait = interval
    else:
        wait = min(cap, max(previous + (1 if previous else 0), math.ceil(previous * GROWTH)))
    if api_error:
        wait = max(wait, API_ERROR_MIN_SECONDS)
    if now < deadline:
        wait = min(wait, max(0, math.ceil(deadline - now)))
    return max(0, int(wait))


def next_retry_wait(attempt: int, *, base: int, ceiling: int = 60) -> int:
    """Seconds before the failure path's attempt ``attempt + 1`` (doubling from ``base``, at least 1 s)."""
    return int(min(ceiling, max(1, base) * 2 ** max(0, attempt - 1)))
