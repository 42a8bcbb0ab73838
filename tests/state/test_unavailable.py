"""The unavailable-offerings cache in DynamoDB: shared between processes, expiring on time."""

from __future__ import annotations

from typing import Any

from fleetwright.state import DynamoTable, DynamoUnavailableOfferings
from tests.support.clock import FakeClock


def test_a_mark_is_seen_by_another_process(table: DynamoTable, clock: FakeClock) -> None:
    writer = DynamoUnavailableOfferings(table, "demo", clock=clock)
    reader = DynamoUnavailableOfferings(table, "demo", clock=clock)
    writer.mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity: none left")
    assert writer.is_unavailable("m5.large", "us-east-1a", "spot")
    assert reader.is_unavailable("m5.large", "us-east-1a", "spot")
    assert not reader.is_unavailable("m5.large", "us-east-1a", "on-demand")
    assert not reader.is_unavailable("m5.large", "us-east-1b", "spot")
    [entry] = reader.entries()
    assert (entry.instance_type, entry.zone, entry.capacity_type) == ("m5.large", "us-east-1a", "spot")
    assert entry.reason.startswith("InsufficientInstanceCapacity")


def test_entries_expire_after_their_ttl(table: DynamoTable, clock: FakeClock) -> None:
    cache = DynamoUnavailableOfferings(table, "demo", clock=clock)
    cache.mark("c5.large", "us-east-1b", "on-demand", "ICE", ttl=180)
    clock.advance(179)
    assert cache.is_unavailable("c5.large", "us-east-1b", "on-demand")
    clock.advance(2)
    assert not cache.is_unavailable("c5.large", "us-east-1b", "on-demand")
    # Another process reading the table after expiry (TTL deletion is lazy) does not see it either.
    assert DynamoUnavailableOfferings(table, "demo", clock=clock).entries() == []


def test_items_carry_the_table_ttl_in_epoch_seconds(
    table: DynamoTable, clock: FakeClock, dynamodb: Any
) -> None:
    DynamoUnavailableOfferings(table, "demo", clock=clock).mark(
        "c5.large", "us-east-1b", "spot", "ICE", ttl=180
    )
    raw = dynamodb.query(
        TableName=table.name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "UNAVAILABLE#demo"}},
    )["Items"]
    assert [i["sk"]["S"] for i in raw] == ["c5.large#us-east-1b#spot"]
    assert int(raw[0]["expiresAt"]["N"]) == int(clock() + 180)


def test_reads_are_cached_for_the_refresh_interval(table: DynamoTable, clock: FakeClock) -> None:
    reader = DynamoUnavailableOfferings(table, "demo", clock=clock, refresh_seconds=5)
    assert not reader.is_unavailable("m5.large", "us-east-1a", "spot")
    DynamoUnavailableOfferings(table, "demo", clock=clock).mark("m5.large", "us-east-1a", "spot", "ICE")
    assert not reader.is_unavailable("m5.large", "us-east-1a", "spot")  # still the copy read a moment ago
    clock.advance(5)
    assert reader.is_unavailable("m5.large", "us-east-1a", "spot")


def test_a_failing_table_does_not_block_launches(clock: FakeClock) -> None:
    class Broken:
        def query(self, **_: Any) -> Any:
            raise RuntimeError("table unreachable")

    cache = DynamoUnavailableOfferings(DynamoTable("missing", client=Broken()), "demo", clock=clock)
    assert not cache.is_unavailable("m5.large", "us-east-1a", "spot")
    assert cache.entries() == []
