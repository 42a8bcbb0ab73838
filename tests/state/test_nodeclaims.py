"""NodeClaim records in DynamoDB: written once, moved only from the status the writer expects."""

from __future__ import annotations

from typing import Any

from fleetwright.state import ClaimStatus, DynamoTable, NodeClaimRecord, NodeClaimStore


def _record(claim_id: str = "default-abc12345", **extra: Any) -> NodeClaimRecord:
    fields: dict[str, Any] = {"pod_count": 2, **extra}
    return NodeClaimRecord(
        id=claim_id,
        nodepool="default",
        status=str(ClaimStatus.LAUNCHING),
        created_at=1_800_000_000.25,
        node_class="default",
        instance_types=["m5.large", "m5.xlarge"],
        zones=["us-east-1a", "us-east-1b"],
        capacity_types=["spot", "on-demand"],
        labels={"karpenter.sh/nodepool": "default", "team": "ml"},
        taints=["dedicated=ml:NoSchedule"],
        allocatable={"cpu": 1930, "memory": 7_000_000_000, "pods": 29},
        capacity={"cpu": 4000, "memory": 17_179_869_184, "pods": 58},
        pods=["default/a", "default/b"],
        expected_price=0.0321,
        **fields,
    )


def test_a_created_claim_reads_back_with_every_field(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    assert store.create(_record())
    found = store.get("default-abc12345")
    assert found == _record()
    assert [r.id for r in store.list()] == ["default-abc12345"]


def test_a_claim_id_is_written_only_once(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    assert store.create(_record())
    assert not store.create(_record(pod_count=9))
    stored = store.get("default-abc12345")
    assert stored is not None and stored.pod_count == 2


def test_status_moves_only_from_the_expected_status(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    store.create(_record())
    assert store.transition(
        "default-abc12345",
        ClaimStatus.LAUNCHING,
        ClaimStatus.LAUNCHED,
        instance_id="i-0123",
        zone="us-east-1b",
        instance_type="m5.large",
        capacity_type="spot",
        price=0.0412,
        launched_at=1_800_000_003.5,
    )
    # A second writer that still believes the claim is launching loses.
    assert not store.transition("default-abc12345", ClaimStatus.LAUNCHING, ClaimStatus.FAILED, reason="late")
    claim = store.get("default-abc12345")
    assert claim is not None
    assert claim.status == ClaimStatus.LAUNCHED
    assert claim.provider_id == "aws:///us-east-1b/i-0123"
    assert claim.price == 0.0412 and claim.launched_at == 1_800_000_003.5
    assert claim.reason == ""


def test_transition_of_a_missing_claim_fails_without_creating_it(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    assert not store.transition("ghost", ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)
    assert store.get("ghost") is None


def test_claims_of_other_clusters_are_not_listed(table: DynamoTable) -> None:
    NodeClaimStore(table, "demo").create(_record("a"))
    NodeClaimStore(table, "other").create(_record("b"))
    assert [r.id for r in NodeClaimStore(table, "demo").list()] == ["a"]


def test_failed_claims_carry_the_ttl_attribute(table: DynamoTable, dynamodb: Any) -> None:
    store = NodeClaimStore(table, "demo")
    store.create(_record())
    store.transition(
        "default-abc12345", ClaimStatus.LAUNCHING, ClaimStatus.FAILED, reason="ICE", expires_at=1_800_003_600
    )
    raw = dynamodb.get_item(
        TableName=table.name, Key={"pk": {"S": "NODECLAIM#demo"}, "sk": {"S": "default-abc12345"}}
    )
    assert raw["Item"]["expiresAt"] == {"N": "1800003600"}
    assert raw["Item"]["status"] == {"S": "Failed"}


def test_delete_reports_whether_the_claim_existed(table: DynamoTable) -> None:
    store = NodeClaimStore(table, "demo")
    store.create(_record())
    assert store.delete("default-abc12345")
    assert not store.delete("default-abc12345")
    assert store.list() == []


def test_list_active_is_list_without_the_ended_claims_and_follows_every_transition(
    table: DynamoTable,
) -> None:
    for reuse in (True, False):
        store = NodeClaimStore(table, f"active-{reuse}", reuse=reuse)
        for name in ("a", "b", "c", "d"):
            store.create(_record(f"default-{name}"))
        store.transition("default-b", ClaimStatus.LAUNCHING, ClaimStatus.FAILED, reason="no capacity")
        store.transition("default-c", ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, instance_id="i-1")
        active = store.list_active()
        assert [r.id for r in active] == ["default-a", "default-c", "default-d"]
        assert active == [r for r in store.list() if r.active]
        store.transition("default-c", ClaimStatus.LAUNCHED, ClaimStatus.TERMINATED, reason="gone")
        assert [r.id for r in store.list_active()] == ["default-a", "default-d"]
