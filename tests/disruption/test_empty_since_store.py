"""The "empty since" markers in the state table: the earliest time stands, a reused node name starts over."""

from __future__ import annotations

from fleetwright.state import DynamoTable
from fleetwright.state.emptiness import EmptinessStore


def test_the_first_time_seen_empty_stands(table: DynamoTable) -> None:
    store = EmptinessStore(table, "demo")

    assert store.mark("node-a", 100.0, "i-0aaa")
    assert not store.mark("node-a", 160.0, "i-0aaa")  # a later pass (or a racing one) keeps 100

    assert store.list()["node-a"].since == 100.0


def test_a_reused_node_name_starts_over_and_clearing_forgets(table: DynamoTable) -> None:
    store = EmptinessStore(table, "demo")
    other_cluster = EmptinessStore(table, "other")
    store.mark("node-a", 100.0, "i-0aaa")
    other_cluster.mark("node-a", 50.0, "i-0zzz")

    assert store.mark("node-a", 500.0, "i-0bbb")  # a new instance behind the same host name
    marker = store.get("node-a")
    assert marker is not None and (marker.since, marker.instance_id) == (500.0, "i-0bbb")

    assert store.clear("node-a") and not store.clear("node-a")
    assert store.list() == {}
    assert other_cluster.list()["node-a"].since == 50.0
