"""The provisioner lease: one holder at a time, expiring when its holder stops renewing."""

from __future__ import annotations

import pytest

from fleetwright.state import DynamoTable, Lease, LeaseLostError
from tests.support.clock import FakeClock


def _lease(table: DynamoTable, holder: str, clock: FakeClock, seconds: float = 30) -> Lease:
    return Lease(table, "demo", holder, seconds=seconds, clock=clock)


def test_only_one_holder_at_a_time(table: DynamoTable, clock: FakeClock) -> None:
    first, second = _lease(table, "a", clock), _lease(table, "b", clock)
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.try_acquire()  # taking it again is a renewal
    assert second.current_holder() == "a"


def test_an_expired_lease_can_be_taken_and_the_old_holder_learns_it(
    table: DynamoTable, clock: FakeClock
) -> None:
    first, second = _lease(table, "a", clock), _lease(table, "b", clock)
    assert first.try_acquire()
    clock.advance(31)
    assert second.try_acquire()
    with pytest.raises(LeaseLostError):
        first.renew()
    assert not first.held
    assert not first.release()  # releasing someone else's lease does nothing
    assert second.current_holder() == "b"


def test_renewing_keeps_the_lease(table: DynamoTable, clock: FakeClock) -> None:
    first, second = _lease(table, "a", clock), _lease(table, "b", clock)
    first.try_acquire()
    for _ in range(4):
        clock.advance(20)
        first.renew()
        assert not second.try_acquire()


def test_release_frees_the_lease_at_once(table: DynamoTable, clock: FakeClock) -> None:
    first, second = _lease(table, "a", clock), _lease(table, "b", clock)
    first.try_acquire()
    assert first.release()
    assert second.try_acquire()


def test_acquire_waits_for_the_holder_to_expire(table: DynamoTable, clock: FakeClock) -> None:
    _lease(table, "a", clock, seconds=5).try_acquire()
    second = _lease(table, "b", clock)
    assert second.acquire(clock() + 10, poll_seconds=1, sleep=clock.advance)
    assert second.current_holder() == "b"


def test_acquire_gives_up_at_its_deadline(table: DynamoTable, clock: FakeClock) -> None:
    _lease(table, "a", clock, seconds=60).try_acquire()
    second = _lease(table, "b", clock)
    start = clock()
    assert not second.acquire(start + 10, poll_seconds=1, sleep=clock.advance)
    assert clock() == pytest.approx(start + 10)
