"""The claim revision: a process keeps the claim records between reads and Queries them again only when
another writer changed one, and a write never lands without moving the revision."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from fleetwright.state import ClaimStatus, DynamoTable, NodeClaimStore
from fleetwright.state.lease import Lease
from fleetwright.state.table import TransactionConflictError
from fleetwright.workflow.claimbook import StoreClaimBook
from tests.state.test_nodeclaims import _record


def _launched(store: NodeClaimStore, claim_id: str) -> None:
    assert store.create(_record(claim_id))
    assert store.transition(
        claim_id, ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, instance_id=f"i-{claim_id}", zone="us-east-1a"
    )


def test_an_unchanged_revision_serves_the_records_without_a_query(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    _launched(store, "a")
    first = store.list()
    queries = store.queries
    assert store.list() == first
    assert store.queries == queries and store.reused >= 1


def test_own_writes_reach_the_kept_records_without_a_query(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    _launched(store, "a")
    store.list()
    queries = store.queries
    assert store.create(_record("b"))
    assert store.transition("a", ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED, node_name="n-a")
    assert store.delete("b")
    assert store.create(_record("c", launched_at=None, pod_count=7))
    kept = store.list()
    assert store.queries == queries
    fresh = NodeClaimStore(table, "demo").list()
    assert kept == fresh
    assert [(r.id, r.status, r.node_name) for r in kept] == [
        ("a", "Registered", "n-a"),
        ("c", "Launching", ""),
    ]


@pytest.mark.parametrize("write", ["create", "transition", "delete", "finalize"])
def test_a_write_by_another_writer_between_two_reads_is_seen_by_the_next_read(
    table: DynamoTable, write: str
) -> None:
    reader = NodeClaimStore(table, "demo")  # e.g. the provisioner's, kept across warm passes
    other = NodeClaimStore(table, "demo")  # e.g. the termination workflow's, in another function
    _launched(other, "a")
    assert [r.status for r in reader.list()] == ["Launched"]
    if write == "create":
        assert other.create(_record("b"))
        expected = [("a", "Launched"), ("b", "Launching")]
    elif write == "transition":
        assert other.transition("a", ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)
        expected = [("a", "Registered")]
    elif write == "delete":
        assert other.delete("a")
        expected = []
    else:  # the termination claim book, as the termination workflow, GC and interruption use it
        assert StoreClaimBook(other).finalize("a", "interrupted")
        expected = [("a", "Terminated")]
    assert [(r.id, r.status) for r in reader.list()] == expected


def test_a_write_by_another_writer_is_seen_after_own_writes(table: DynamoTable) -> None:
    reader = NodeClaimStore(table, "demo")
    other = NodeClaimStore(table, "demo")
    _launched(reader, "a")
    reader.list()
    assert other.create(_record("b"))
    assert reader.create(_record("c"))  # the copy follows this one, but the revision moved twice
    assert [r.id for r in reader.list()] == ["a", "b", "c"]


def test_a_failed_conditional_write_leaves_the_revision_and_the_records(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    _launched(store, "a")
    before = store.revision()
    assert not store.create(_record("a"))
    assert not store.transition("a", ClaimStatus.LAUNCHING, ClaimStatus.FAILED)
    assert not store.delete("ghost")
    assert store.revision() == before
    assert [r.status for r in store.list()] == ["Launched"]


def test_every_claim_write_moves_the_revision_in_the_same_transaction(table: DynamoTable) -> None:
    """No claim write is sent on its own, so none can land without the revision moving with it (a crash
    between the two is impossible: DynamoDB applies both or neither)."""
    sent: list[tuple[str, Any]] = []
    client = table.client
    for name in ("put_item", "update_item", "delete_item", "transact_write_items"):
        original = getattr(client, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            sent.append((_name, kwargs))
            return _original(*args, **kwargs)

        setattr(client, name, spy)
    store = NodeClaimStore(table, "demo")
    lease = Lease(table, "demo", "me")
    assert lease.acquire(time.time() + 5)
    sent.clear()
    assert store.create(_record("a"), fence=lease)
    assert store.transition("a", ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=lease, instance_id="i-1")
    assert StoreClaimBook(store).finalize("a", "done")
    assert store.delete("a")
    assert [name for name, _ in sent] == ["transact_write_items"] * 4
    for _, request in sent:
        keys = [
            next(iter(op.values()))["Key"]["pk"]["S"] for op in request["TransactItems"] if "Put" not in op
        ]
        assert "REVISION#demo" in keys
    assert store.revision() == 4


def test_a_write_whose_answer_is_lost_is_seen_by_the_next_read(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    _launched(store, "a")
    store.list()
    original = table.client.transact_write_items

    def applied_then_lost(**kwargs: Any) -> Any:
        original(**kwargs)
        raise ConnectionError("connection reset after the request was sent")

    table.client.transact_write_items = applied_then_lost
    with pytest.raises(ConnectionError):
        store.transition("a", ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)
    table.client.transact_write_items = original
    assert [r.status for r in store.list()] == ["Registered"]


@pytest.mark.parametrize("query_first", [True, False])
def test_a_read_overlapping_an_own_write_never_keeps_a_stale_copy(
    table: DynamoTable, query_first: bool
) -> None:
    store = NodeClaimStore(table, "demo")
    other = NodeClaimStore(table, "demo")
    _launched(store, "a")
    store.list()
    original = table.transact
    nested: list[Any] = []

    def overlapped(ops: Any) -> Any:
        if nested:
            return original(ops)
        nested.append(ops)
        # Another writer moved the revision, and another thread of this process lists (so Queries) while
        # this write is under way.
        other.create(_record("x"))
        if query_first:
            reader = threading.Thread(target=store.list)
            reader.start()
            reader.join()
            return original(ops)
        result = original(ops)
        reader = threading.Thread(target=store.list)
        reader.start()
        reader.join()
        return result

    table.transact = overlapped  # type: ignore[method-assign]
    assert store.transition("a", ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)
    table.transact = original  # type: ignore[method-assign]
    assert store.list() == NodeClaimStore(table, "demo", reuse=False).list()
    assert [r.status for r in store.list() if r.id == "a"] == ["Registered"]


def test_a_write_cancelled_by_a_concurrent_transaction_is_sent_again(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo", sleep=lambda _s: None)
    original = table.transact
    calls = []

    def conflicting(ops: Any) -> Any:
        calls.append(ops)
        if len(calls) < 3:
            raise TransactionConflictError("transaction cancelled: TransactionConflict")
        return original(ops)

    table.transact = conflicting  # type: ignore[method-assign]
    assert store.create(_record("a"))
    table.transact = original  # type: ignore[method-assign]
    assert len(calls) == 3
    assert [r.id for r in NodeClaimStore(table, "demo").list()] == ["a"]


def test_records_handed_out_can_be_changed_without_changing_the_kept_copy(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    _launched(store, "a")
    [record] = store.list()
    record.status = "Registered"
    record.labels["changed"] = "yes"
    [again] = store.list()
    assert again.status == "Launched" and "changed" not in again.labels
