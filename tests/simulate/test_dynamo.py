"""The in-memory state table answers the state package exactly as moto's DynamoDB does: the same script
of lease, claim, emptiness, unavailable-offering and interruption operations gives the same results and
leaves the same items, including every refused condition and fenced write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleetwright.local.simulate.dynamo import MemoryDynamoDB
from fleetwright.local.simulate.runner import MEMORY, MOTO, STATE_TABLE, state_client
from fleetwright.state import StateStore
from fleetwright.state.interruptions import InterruptionRecord, InterruptionRecords
from fleetwright.state.lease import LeaseLostError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.state.table import TransactionConflictError
from tests.support.clock import FakeClock


def claim(claim_id: str, now: float) -> NodeClaimRecord:
    return NodeClaimRecord(
        id=claim_id,
        nodepool="default",
        status=ClaimStatus.LAUNCHING,
        created_at=now,
        instance_types=["m5.large", "m5.xlarge"],
        labels={"team": "a"},
        allocatable={"cpu": 1930, "memory": 7 * 2**30},
        pods=["default/p0"],
        pod_count=1,
        expected_price=0.096,
    )


def _outcome(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except (LeaseLostError, TransactionConflictError) as error:
        return type(error).__name__


def script(client: Any) -> list[Any]:
    """The same operations on a state table held by ``client``; what each returned."""
    clock = FakeClock()
    state = StateStore(STATE_TABLE, "demo", client=client, clock=clock)
    mine, other = state.lease("provisioner-a"), state.lease("provisioner-b")
    records = InterruptionRecords(state.table, "demo")
    steps: list[Callable[[], Any]] = [
        mine.try_acquire,
        other.try_acquire,
        lambda: state.nodeclaims.create(claim("default-a", clock.now), fence=mine),
        lambda: state.nodeclaims.create(claim("default-a", clock.now), fence=mine),
        lambda: state.nodeclaims.transition(
            "default-a", ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, fence=mine, instance_id="i-1"
        ),
        lambda: state.nodeclaims.transition("default-a", ClaimStatus.LAUNCHING, ClaimStatus.FAILED),
        lambda: state.nodeclaims.create(claim("default-b", clock.now), fence=other),
        mine.release,
        lambda: setattr(clock, "now", clock.now + 1),
        other.try_acquire,
        lambda: state.nodeclaims.create(claim("default-b", clock.now), fence=mine),
        lambda: state.nodeclaims.create(claim("default-b", clock.now), fence=other),
        other.renew,
        lambda: setattr(clock, "now", clock.now + 100),
        mine.try_acquire,
        lambda: state.nodeclaims.transition(
            "default-b", [ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED], ClaimStatus.REGISTERED, node_name="n"
        ),
        lambda: state.nodeclaims.delete("default-a"),
        lambda: state.nodeclaims.delete("default-a"),
        lambda: [(r.id, r.status, r.instance_id, r.node_name) for r in state.nodeclaims.list()],
        lambda: state.emptiness.mark("node-1", clock.now, "i-1"),
        lambda: state.emptiness.mark("node-1", clock.now + 5, "i-1"),
        lambda: state.emptiness.mark("node-1", clock.now + 9, "i-2"),
        lambda: {k: (v.since, v.instance_id) for k, v in state.emptiness.list().items()},
        lambda: state.emptiness.clear("node-1"),
        lambda: state.emptiness.clear("node-1"),
        lambda: state.unavailable.mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity"),
        lambda: [(e.instance_type, e.zone, e.capacity_type) for e in state.unavailable.entries()],
        lambda: records.create(InterruptionRecord("i-1", "spot", claimed_at=clock.now)),
        lambda: records.create(InterruptionRecord("i-1", "spot", claimed_at=clock.now)),
        lambda: records.take_over(InterruptionRecord("i-1", "spot", claimed_at=clock.now), clock.now + 60),
        lambda: [(r.instance_id, r.attempt, r.claimed_at) for r in records.all()],
        lambda: records.delete("i-1", "spot"),
        mine.release,
        mine.current_holder,
    ]
    return [_outcome(step) for step in steps]


def items(client: Any) -> list[dict[str, Any]]:
    """Every item left, as the state package reads it."""
    from fleetwright.state.table import DynamoTable

    table = DynamoTable(STATE_TABLE, client=client)
    if isinstance(client, MemoryDynamoDB):
        partitions = sorted(client.tables[STATE_TABLE].partitions)
    else:
        scanned = client.scan(TableName=STATE_TABLE)["Items"]
        partitions = sorted({i["pk"]["S"] for i in scanned})
    return [item for pk in partitions for item in table.query(pk)]


@pytest.mark.parametrize("backend", [MEMORY])
def test_the_in_memory_table_answers_as_moto(backend: str) -> None:
    with state_client(MOTO) as moto:
        expected, expected_items = script(moto), items(moto)
    with state_client(backend) as memory:
        assert script(memory) == expected
        assert items(memory) == expected_items
    assert "LeaseLostError" in expected  # the script does exercise a refused fence
    assert False in expected  # and refused conditions


def test_an_expression_it_cannot_read_is_an_error_not_a_silent_write() -> None:
    with state_client(MEMORY) as client, pytest.raises(ValueError, match="unsupported"):
        client.update_item(
            TableName=STATE_TABLE,
            Key={"pk": {"S": "a"}, "sk": {"S": "b"}},
            UpdateExpression="SET #a = list_append(#a, :v)",
            ExpressionAttributeNames={"#a": "x"},
            ExpressionAttributeValues={":v": {"L": []}},
        )
