"""Deletion retires, against the shipped termination workflow (moto's Step Functions, the emulator):
``kubectl delete node`` of a Fleetwright node, a NodeClaim being deleted and a NodePool that is gone all
drain the node and terminate its instance, and the Node goes away only then; a deletion seen twice starts
one workflow; a workflow that fails mid-drain leaves the node cordoned with its finalizer and is started
again after a pause."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwright.claims.registration import TERMINATION_FINALIZER
from fleetwright.disruption.deletion import (
    NODE_DELETED,
    NODECLAIM_DELETED,
    NODEPOOL_DELETED,
    NODES_RETIRED,
    DeletionRetirer,
)
from fleetwright.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, POD_DISRUPTION_BUDGETS
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.model import labels as wk
from fleetwright.model.karpenter import NodePool
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.workflow.starter import StepFunctionsStarter
from tests.support.disruption import nodepool
from tests.support.termination import Harness
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

CLAIM = "default-abcd1234"


@pytest.fixture(autouse=True)
def _one_clock(harness: Harness) -> None:
    """The API server stamps deletions on the harness's clock, as a real one and Lambda share real time."""
    harness.apiserver.store.clock = harness.world.wall


def _retirer(harness: Harness, pools: list[NodePool] | None = None, **kw: Any) -> DeletionRetirer:
    """The retirer as one disruption invocation builds it (nothing kept in memory between passes)."""
    w = harness.world
    return DeletionRetirer(
        w.kube,
        w.cloud,
        StepFunctionsStarter(harness.sfn, harness.machine_arn),
        w.state.nodeclaims,
        lambda: [nodepool()] if pools is None else pools,
        clock=w.wall,
        drain_interval_seconds=0,
        poll_seconds=0,
        **kw,
    )


def _registered_node(harness: Harness, name: str = "node-a") -> tuple[str, str]:
    """An instance, its claim record and its Node as Fleetwright's registration leaves them."""
    instance = harness.launch_instance(claim=CLAIM)
    node = harness.node_for(instance, name)
    instance_id = str(instance["InstanceId"])
    w = harness.world
    w.state.nodeclaims.create(
        NodeClaimRecord(
            id=CLAIM,
            nodepool="default",
            status=str(ClaimStatus.INITIALIZED),
            created_at=w.wall(),
            node_class="default",
            instance_id=instance_id,
            instance_type="m5.large",
            zone=instance["Placement"]["AvailabilityZone"],
            capacity_type="on-demand",
            node_name=node,
        )
    )
    w.client.patch(
        NODES,
        node,
        {"metadata": {"labels": {wk.NODEPOOL: "default"}, "finalizers": [TERMINATION_FINALIZER]}},
    )
    return instance_id, node


def _node(harness: Harness, name: str) -> dict[str, Any] | None:
    return harness.world.kube.get_node(name)


def _wait_all(harness: Harness) -> list[dict[str, Any]]:
    executions = harness.executions()
    assert executions, "no workflow was started"
    return [harness.wait(e["executionArn"]) for e in executions]


def _pdb_blocking(harness: Harness, app: str) -> None:
    harness.world.client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
        },
        "default",
    )


def test_kubectl_delete_node_drains_terminates_and_then_lets_the_node_go(harness: Harness) -> None:
    instance_id, node = _registered_node(harness)
    harness.pod("web-0", node, owner=("ReplicaSet", "web"))
    harness.world.client.delete(NODES, node)
    assert _node(harness, node) is not None  # Terminating: the finalizer holds it
    metrics = RecordingMetrics()

    report = _retirer(harness, metrics=metrics).retire()

    assert list(report.started) == [node]
    (result,) = _wait_all(harness)
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["input"])["reason"] == NODE_DELETED
    assert harness.pods_on(node) == []
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert _node(harness, node) is None
    record = harness.world.state.nodeclaims.get(CLAIM)
    assert record is not None and record.status == ClaimStatus.TERMINATED
    assert metrics.total(NODES_RETIRED) == 1


def test_a_deletion_seen_twice_starts_one_workflow(harness: Harness) -> None:
    _, node = _registered_node(harness)
    harness.pod("web-0", node, labels={"app": "held"}, owner=("ReplicaSet", "held"))
    _pdb_blocking(harness, "held")  # the drain waits: the workflow stays running
    harness.world.client.delete(NODES, node)

    first = _retirer(harness).retire()
    second = _retirer(harness).retire()  # another invocation, another Lambda environment

    assert list(first.started) == [node]
    assert second.started == {} and second.running == [node]
    assert len(harness.executions()) == 1
    assert wait_for(
        lambda: (_node(harness, node) or {}).get("spec", {}).get("unschedulable") is True, timeout=30.0
    )
    harness.world.client.delete(POD_DISRUPTION_BUDGETS, "held", "default")
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]
    assert _node(harness, node) is None


def test_a_workflow_failing_mid_drain_keeps_the_node_cordoned_with_its_finalizer_and_runs_again(
    harness: Harness,
) -> None:
    instance_id, node = _registered_node(harness)
    harness.pod("web-0", node, owner=("ReplicaSet", "web"))
    harness.world.client.delete(NODES, node)

    def broken(step: str, _: dict[str, Any]) -> None:
        if step == "drain":
            raise RuntimeError("drain step crashed")

    harness.before_step.append(broken)
    _retirer(harness).retire()
    (failed,) = _wait_all(harness)
    assert failed["status"] == "FAILED"
    obj = _node(harness, node)
    assert obj is not None
    assert TERMINATION_FINALIZER in obj["metadata"]["finalizers"]
    assert obj["spec"].get("unschedulable") is True  # not given back: it is being deleted
    assert harness.instance_state(instance_id) == "running"

    harness.before_step.clear()
    soon = _retirer(harness).retire()  # within the pause after a failed attempt
    assert soon.started == {} and soon.waiting == [node]
    harness.world.wall.advance(61)
    again = _retirer(harness).retire()

    assert list(again.started) == [node]
    assert [r["status"] for r in _wait_all(harness)] == ["FAILED", "SUCCEEDED"]
    assert _node(harness, node) is None
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")


def test_the_nodes_of_a_nodepool_that_is_gone_are_retired(harness: Harness) -> None:
    instance_id, node = _registered_node(harness)
    other = harness.launch_instance(claim="other-1")  # someone else's node: no claim record
    harness.node_for(other, "stranger")

    report = _retirer(harness, pools=[nodepool("general")]).retire()

    assert report.deleted == {node: NODEPOOL_DELETED}
    assert list(report.started) == [node]
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]
    assert _node(harness, node) is None
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert _node(harness, "stranger") is not None


def test_a_nodepool_still_in_the_cluster_keeps_its_nodes(harness: Harness) -> None:
    install_karpenter_crds(harness.apiserver.store)
    _, node = _registered_node(harness)
    body = nodepool().model_dump(by_alias=True, exclude_none=True, mode="json")
    harness.world.client.create(NODE_POOLS, body)

    report = _retirer(harness, pools=[nodepool("general")]).retire()

    assert report.deleted == {} and report.started == {}
    assert _node(harness, node) is not None

    harness.world.client.delete(NODE_POOLS, "default")
    gone = _retirer(harness, pools=[nodepool("general")]).retire()

    assert gone.deleted == {node: NODEPOOL_DELETED}
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]


def test_no_nodepool_at_all_retires_nothing(harness: Harness) -> None:
    _, node = _registered_node(harness)

    report = _retirer(harness, pools=[]).retire()

    assert report.deleted == {} and report.started == {}
    assert _node(harness, node) is not None


def test_a_nodeclaim_being_deleted_retires_its_node_and_then_lets_the_claim_go(harness: Harness) -> None:
    install_karpenter_crds(harness.apiserver.store)
    _, node = _registered_node(harness)
    client = harness.world.client
    client.create(
        NODE_CLAIMS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": CLAIM, "finalizers": [TERMINATION_FINALIZER]},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}],
            },
        },
    )
    client.delete(NODE_CLAIMS, CLAIM)

    report = _retirer(harness).retire()

    assert report.deleted == {node: NODECLAIM_DELETED}
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]
    assert _node(harness, node) is None
    assert [o["metadata"]["name"] for o in client.list(NODE_CLAIMS).items] == []


def _nodeclaim(harness: Harness, name: str) -> None:
    harness.world.client.create(
        NODE_CLAIMS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "finalizers": [TERMINATION_FINALIZER]},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}],
            },
        },
    )


def test_a_nodeclaim_being_deleted_before_its_node_registered_terminates_its_instance(
    harness: Harness,
) -> None:
    install_karpenter_crds(harness.apiserver.store)
    instance = harness.launch_instance(claim=CLAIM)
    w = harness.world
    w.state.nodeclaims.create(
        NodeClaimRecord(
            id=CLAIM,
            nodepool="default",
            status=str(ClaimStatus.LAUNCHED),
            created_at=w.wall(),
            instance_id=str(instance["InstanceId"]),
            instance_type="m5.large",
            zone=instance["Placement"]["AvailabilityZone"],
            capacity_type="on-demand",
        )
    )
    w.state.nodeclaims.create(
        NodeClaimRecord(
            id="default-failed01", nodepool="default", status=str(ClaimStatus.FAILED), created_at=0
        )
    )
    for name in (CLAIM, "default-failed01"):
        _nodeclaim(harness, name)
        w.client.delete(NODE_CLAIMS, name)

    report = _retirer(harness).retire()

    assert list(report.started) == [f"nodeclaim/{CLAIM}"]
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert w.client.list(NODE_CLAIMS).items == []  # both finalizers lifted


def test_a_node_without_the_finalizer_or_not_ours_is_left_alone(harness: Harness) -> None:
    other = harness.launch_instance(claim="other-1")
    harness.node_for(other, "stranger")

    report = _retirer(harness).retire()

    assert report.started == {} and report.deleted == {}
    assert harness.executions() == []


def test_another_karpenters_node_being_deleted_is_never_drained(harness: Harness) -> None:
    stranger = harness.launch_instance(owned=False)
    node = harness.node_for(stranger, "theirs")
    harness.pod("web-0", node, owner=("ReplicaSet", "web"))
    harness.world.client.patch(NODES, node, {"metadata": {"finalizers": [TERMINATION_FINALIZER]}})
    harness.world.client.delete(NODES, node)

    report = _retirer(harness).retire()

    assert report.started == {} and harness.executions() == []
    assert harness.pods_on(node) == ["web-0"]
    assert not (_node(harness, node) or {}).get("spec", {}).get("unschedulable")


def test_a_deleted_nodepool_object_leaves_its_nodeclaims_terminating_until_their_nodes_are_retired(
    harness: Harness,
) -> None:
    install_karpenter_crds(harness.apiserver.store)
    client = harness.world.client
    pool = client.create(NODE_POOLS, nodepool().model_dump(by_alias=True, exclude_none=True, mode="json"))
    _, node = _registered_node(harness)
    _nodeclaim(harness, CLAIM)
    owner = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "default",
        "uid": pool["metadata"]["uid"],
    }
    client.patch(NODE_CLAIMS, CLAIM, {"metadata": {"ownerReferences": [owner]}})

    client.delete(NODE_POOLS, "default")  # the garbage collector deletes what it owned: finalizers hold it
    (claim,) = client.list(NODE_CLAIMS).items
    assert claim["metadata"].get("deletionTimestamp")
    report = _retirer(harness, pools=[nodepool("general")]).retire()

    assert list(report.started) == [node]
    assert [r["status"] for r in _wait_all(harness)] == ["SUCCEEDED"]
    assert _node(harness, node) is None
    assert client.list(NODE_CLAIMS).items == []
