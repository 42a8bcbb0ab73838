"""``Store.subscribe_batches``: one call per committed write or transaction, so controllers reconcile once
per batch however many objects it changed."""

from __future__ import annotations

from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.store import Store, WatchEvent
from tests.local.helpers import node, pod


def test_a_transaction_arrives_as_one_batch_of_matching_events() -> None:
    store = Store()
    batches: list[list[WatchEvent]] = []
    store.subscribe_batches(batches.append, [PODS])

    with store.transaction():
        for i in range(3):
            store.create(PODS, pod(f"p{i}"))
        store.create(NODES, node("n1"))
    store.delete(PODS, "default", "p0")

    assert [[(e.type, e.object["metadata"]["name"]) for e in batch] for batch in batches] == [
        [("ADDED", "p0"), ("ADDED", "p1"), ("ADDED", "p2")],
        [("DELETED", "p0")],
    ]


def test_batches_without_matching_events_are_not_delivered() -> None:
    store = Store()
    batches: list[list[WatchEvent]] = []
    subscription = store.subscribe_batches(batches.append, [PODS])

    store.create(NODES, node("n1"))
    subscription.cancel()
    store.create(PODS, pod("p"))

    assert batches == []
