"""The launch-rate count and the registration breakers in the state table: the count never lets more than
the limit through in any window, whoever asks and in whatever order; a conflict grants nothing; a breaker
opens at the threshold, doubles on a failed probe, and a node becoming Ready resets it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from fleetwright.state import DynamoTable
from fleetwright.state.launchguard import BreakerPolicy, LaunchGuardStore, LaunchRateConflictError
from tests.support.state import TABLE

START = 1_800_000_000.0
POLICY = BreakerPolicy(
    threshold=3, window_seconds=3600.0, cool_off_seconds=1800.0, max_cool_off_seconds=7200.0
)


@pytest.fixture
def guard(table: DynamoTable) -> LaunchGuardStore:
    return LaunchGuardStore(table, "demo")


def test_no_window_ever_holds_more_than_the_limit(guard: LaunchGuardStore, table: DynamoTable) -> None:
    rng = random.Random(7)
    granted_at: list[float] = []
    now = START
    # Two launchers (two stores on one table) asking for random batches at random moments.
    other = LaunchGuardStore(table, "demo")
    for _ in range(300):
        now += rng.uniform(0.0, 40.0)
        store = guard if rng.random() < 0.5 else other
        rate = store.reserve(rng.randint(1, 12), limit=50, window=600.0, now=now)
        granted_at += [now] * rate.granted
    assert len(granted_at) > 150  # the cap let launches through as windows passed
    for start in granted_at:
        assert len([t for t in granted_at if start <= t < start + 600.0]) <= 50


def test_a_full_window_grants_nothing_and_writes_nothing(guard: LaunchGuardStore) -> None:
    assert guard.reserve(10, limit=10, window=600.0, now=START).granted == 10
    full = guard.reserve(3, limit=10, window=600.0, now=START + 60)
    assert (full.used, full.granted) == (10, 0)
    assert guard.launches(window=600.0, now=START + 60) == 10
    assert guard.reserve(3, limit=10, window=600.0, now=START + 661).granted == 3


def test_a_conflicting_write_grants_nothing(
    guard: LaunchGuardStore, table: DynamoTable, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = LaunchGuardStore(DynamoTable(TABLE, client=dynamodb), "demo")  # another invocation
    guard.reserve(1, limit=10, window=600.0, now=START)
    original = table.get

    def read_then_overtaken(pk: str, sk: str, **kwargs: Any) -> Any:
        item = original(pk, sk, **kwargs)
        other.reserve(1, limit=10, window=600.0, now=START + 1)  # between our read and our write
        return item

    monkeypatch.setattr(table, "get", read_then_overtaken)
    with pytest.raises(LaunchRateConflictError):
        guard.reserve(5, limit=10, window=600.0, now=START + 2)
    monkeypatch.setattr(table, "get", original)
    assert guard.launches(window=600.0, now=START + 2) == 2  # the other launcher's, not ours


def test_the_breaker_opens_at_the_threshold_and_doubles_after_a_failed_probe(guard: LaunchGuardStore) -> None:
    for minute in (15, 30):
        breaker = guard.record_timeouts(
            "gpu", [START + minute * 60], last_registered=None, policy=POLICY, reason="x"
        )
        assert not breaker.is_open(START + minute * 60)
    opened = guard.record_timeouts(
        "gpu", [START + 45 * 60], last_registered=None, policy=POLICY, reason="{count} timed out"
    )
    assert opened.open_until == START + 45 * 60 + 1800
    assert opened.reason == "3 timed out"
    assert set(guard.open_breakers(START + 50 * 60)) == {"gpu"}
    assert guard.open_breakers(START + 76 * 60) == {}  # cool-off over: a probe may launch
    # The probe times out too: open again at once, twice as long.
    again = guard.record_timeouts("gpu", [START + 91 * 60], last_registered=None, policy=POLICY, reason="x")
    assert (again.opens, again.open_until) == (2, START + 91 * 60 + 3600)
    third = guard.record_timeouts("gpu", [START + 170 * 60], last_registered=None, policy=POLICY, reason="x")
    fourth = guard.record_timeouts("gpu", [START + 300 * 60], last_registered=None, policy=POLICY, reason="x")
    assert third.open_until - START - 170 * 60 == 7200  # capped
    assert fourth.open_until - START - 300 * 60 == 7200


def test_timeouts_while_open_do_not_extend_it(guard: LaunchGuardStore) -> None:
    times = [START + i for i in range(10)]  # ten claims of one pass time out together
    breaker = guard.record_timeouts("default", times, last_registered=None, policy=POLICY, reason="x")
    assert (breaker.opens, breaker.open_until) == (1, START + 2 + 1800)


def test_a_node_ready_since_resets_the_count_and_the_doubling(guard: LaunchGuardStore) -> None:
    guard.record_timeouts(
        "default", [START, START + 1, START + 2], last_registered=None, policy=POLICY, reason="x"
    )
    ready_at = START + 2000
    breaker = guard.record_timeouts(
        "default", [START + 2500], last_registered=ready_at, policy=POLICY, reason="x"
    )
    assert (breaker.opens, breaker.timeouts) == (0, [START + 2500])
    assert not breaker.is_open(START + 2500)
    assert "default" not in guard.open_breakers(START + 2500)


def test_a_nodepool_with_a_node_ready_within_the_window_stays_open_to_launches(
    guard: LaunchGuardStore,
) -> None:
    # A scale-up of hundreds: most nodes became Ready, three hosts never joined. The NodePool works.
    ready_at = START + 120
    times = [START + 900 + i for i in range(3)]
    breaker = guard.record_timeouts("default", times, last_registered=ready_at, policy=POLICY, reason="x")
    assert not breaker.is_open(START + 903) and breaker.timeouts == times
    # An hour after its last Ready node, timeouts open it.
    later = [START + 120 + 3600 + i for i in range(3)]
    breaker = guard.record_timeouts("default", later, last_registered=ready_at, policy=POLICY, reason="x")
    assert breaker.is_open(later[-1])
