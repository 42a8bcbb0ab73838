"""Fenced claim writes: a launcher writes NodeClaims only while it holds the lease it took, with the
generation it took it at; a holder that was overtaken writes nothing, even if it never noticed."""

from __future__ import annotations

import pytest

from fleetwright.state import ClaimStatus, DynamoTable, Lease, LeaseLostError, NodeClaimStore
from tests.state.test_nodeclaims import _record
from tests.support.clock import FakeClock


def _lease(table: DynamoTable, holder: str, clock: FakeClock, seconds: float = 30) -> Lease:
    return Lease(table, "demo", holder, seconds=seconds, clock=clock)


def test_every_acquisition_starts_a_new_generation(table: DynamoTable, clock: FakeClock) -> None:
    first, second = _lease(table, "a", clock), _lease(table, "b", clock)
    assert first.try_acquire()
    assert first.generation == 1
    assert first.release()
    assert second.try_acquire()
    assert second.generation == 2
    clock.advance(31)
    assert first.try_acquire()
    assert first.generation == 3
    # The lease item outlives its expiry (no TTL), so the count never starts over.
    assert "expiresAt" not in (table.get("LEASE#demo", "provisioner") or {})


def test_a_holder_writes_claims_while_it_holds_the_lease(table: DynamoTable, clock: FakeClock) -> None:
    store = NodeClaimStore(table, "demo")
    lease = _lease(table, "a", clock)
    assert lease.try_acquire()
    assert store.create(_record(), fence=lease)
    assert not store.create(_record(), fence=lease)  # the claim exists: False, not a lost lease
    assert store.transition("default-abc12345", ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=lease)
    assert not store.transition(
        "default-abc12345", ClaimStatus.LAUNCHING, ClaimStatus.FAILED, fence=lease, reason="late"
    )
    found = store.get("default-abc12345")
    assert found is not None and found.status == ClaimStatus.LAUNCHED


def test_an_overtaken_holder_writes_nothing(table: DynamoTable, clock: FakeClock) -> None:
    store = NodeClaimStore(table, "demo")
    stale, fresh = _lease(table, "a", clock), _lease(table, "b", clock)
    assert stale.try_acquire()
    assert store.create(_record("default-first"), fence=stale)
    clock.advance(31)  # the stale holder stalls past its expiry and the next launcher takes over
    assert fresh.try_acquire()

    with pytest.raises(LeaseLostError):
        store.create(_record("default-second"), fence=stale)
    with pytest.raises(LeaseLostError):
        store.transition("default-first", ClaimStatus.LAUNCHING, ClaimStatus.FAILED, fence=stale)
    assert not stale.held
    assert [(r.id, r.status) for r in store.list()] == [("default-first", ClaimStatus.LAUNCHING)]
    with pytest.raises(LeaseLostError):
        stale.renew()


def test_an_expired_lease_fences_its_holder_even_before_anyone_takes_it(
    table: DynamoTable, clock: FakeClock
) -> None:
    store = NodeClaimStore(table, "demo")
    lease = _lease(table, "a", clock)
    assert lease.try_acquire()
    clock.advance(30)
    with pytest.raises(LeaseLostError):
        store.create(_record(), fence=lease)
    assert store.list() == []


def test_the_same_holder_taking_the_lease_again_fences_its_older_generation(
    table: DynamoTable, clock: FakeClock
) -> None:
    store = NodeClaimStore(table, "demo")
    old = _lease(table, "a", clock)
    assert old.try_acquire()
    again = _lease(table, "a", clock)
    assert again.try_acquire() and again.generation == old.generation + 1
    with pytest.raises(LeaseLostError):
        store.create(_record(), fence=old)
    assert store.create(_record(), fence=again)


def test_ensure_renews_only_when_the_lease_would_expire_too_soon(
    table: DynamoTable, clock: FakeClock
) -> None:
    lease, other = _lease(table, "a", clock), _lease(table, "b", clock)
    assert lease.try_acquire()
    clock.advance(5)
    lease.ensure(20)  # 25 s left: nothing to do
    assert lease.remaining() == pytest.approx(25)
    clock.advance(10)
    lease.ensure(20)  # 15 s left: renewed
    assert lease.remaining() == pytest.approx(30)
    clock.advance(31)
    assert other.try_acquire()
    with pytest.raises(LeaseLostError):
        lease.ensure(20)


def test_a_cancelled_transaction_says_which_condition_failed(table: DynamoTable) -> None:
    table.put({"pk": "A", "sk": "1", "v": 1})
    result = table.transact(
        [
            table.put_op({"pk": "B", "sk": "1"}, condition="attribute_not_exists(pk)"),
            table.check_op("A", "1", condition="#v = :v", names={"#v": "v"}, values={":v": 2}),
        ]
    )
    assert not result.applied and result.failed == (1,)
    assert table.get("B", "1") is None
    assert table.transact([table.put_op({"pk": "B", "sk": "1"})]).applied
