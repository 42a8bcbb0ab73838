"""Karpenter's initialization rule: a node is initialized only once it is Ready, its startup taints are
gone, and every extended resource its pods requested (a GPU, say) is registered on it by its device
plugin. Until then the claim keeps the pods it was launched for (no second launch for them), its
NodeClaim says why it waits, and the registration timeout still ends a node that never gets there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetwright.claims.registration import INITIALIZED_LABEL, initialization_issue
from fleetwright.kube.resources import NODE_CLAIMS, NODES, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.state import ClaimStatus
from fleetwright.state.nodeclaims import NodeClaimRecord
from tests.kube.objects import UNSCHEDULABLE_STATUS, pod_object
from tests.support.local import KUBECTL, Kubectl
from tests.support.provisioning import World, make_config, nodepool

GPU = "nvidia.com/gpu"
GPU_TYPES = ["g4dn.xlarge"]


@pytest.fixture
def crds(apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)


def gpu_pod(world: World, name: str) -> None:
    body = pod_object(name, cpu="1")
    body["spec"]["containers"][0]["resources"]["requests"][GPU] = "1"
    body["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    created = world.client.create(PODS, body)
    world.client.patch(
        PODS, name, UNSCHEDULABLE_STATUS, created["metadata"]["namespace"], subresource="status"
    )


def without_device_plugin(world: World, provider_id: str, name: str) -> None:
    """A Ready node whose kubelet has not heard from the GPU's device plugin: no GPU in allocatable."""
    world.register_node(provider_id, name, ready=True, taints=[])


def initialized_condition(world: World, claim: str) -> dict[str, Any]:
    obj = world.client.get(NODE_CLAIMS, claim)
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Initialized")


def node_labels(world: World, name: str) -> dict[str, str]:
    found = world.kube.get_node(name)
    assert found is not None
    return dict(found["metadata"].get("labels") or {})


@pytest.mark.usefixtures("crds")
def test_a_gpu_node_ready_without_its_device_plugin_is_not_initialized_and_gets_no_second_launch(
    world: World,
    kubectl: Kubectl,
) -> None:
    gpu_pod(world, "train-0")
    provisioner = world.provisioner(make_config(nodepool(instance_types=GPU_TYPES)))
    [claim] = provisioner.run_once().launched
    assert world.state.nodeclaims.get(claim.id).requests[GPU] == 1  # type: ignore[union-attr]
    without_device_plugin(world, claim.provider_id, "gpu-a")

    report = provisioner.reconcile()

    assert report.registered == [claim.id] and report.initialized == []
    assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.REGISTERED  # type: ignore[union-attr]
    assert INITIALIZED_LABEL not in node_labels(world, "gpu-a")
    waiting = initialized_condition(world, claim.id)
    assert (waiting["status"], waiting["reason"]) == ("Unknown", "ResourceNotRegistered")
    assert waiting["message"] == 'Resource "nvidia.com/gpu" was requested but not registered'
    assert kubectl(
        "get", "nodeclaim", claim.id, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
    ) == ("Unknown")

    # The pod is still pending: the next passes find it a place on the node on its way, launch nothing.
    fleets = world.create_fleet_calls()
    for _ in range(2):
        assert provisioner.run_once().launched == []
    assert world.create_fleet_calls() == fleets

    # The device plugin registers the GPU: the node is initialized.
    world.client.patch(NODES, "gpu-a", {"status": {"allocatable": {GPU: "1"}}}, subresource="status")
    assert provisioner.reconcile().initialized == [claim.id]
    assert node_labels(world, "gpu-a")[INITIALIZED_LABEL] == "true"
    done = initialized_condition(world, claim.id)
    assert (done["status"], done["reason"]) == ("True", "Initialized")


@pytest.mark.usefixtures("crds")
def test_a_gpu_node_whose_device_plugin_never_comes_times_out(world: World) -> None:
    gpu_pod(world, "train-0")
    provisioner = world.provisioner(make_config(nodepool(instance_types=GPU_TYPES)))
    [claim] = provisioner.run_once().launched
    without_device_plugin(world, claim.provider_id, "gpu-a")
    provisioner.reconcile()

    world.wall.advance(provisioner.config.registration_timeout_seconds + 1)
    report = provisioner.reconcile()

    assert report.timed_out == [claim.id]
    ended = world.state.nodeclaims.get(claim.id)
    assert ended is not None and ended.status == ClaimStatus.TERMINATED
    assert "did not initialize" in ended.reason
    described = world.aws.clients.ec2.describe_instances(InstanceIds=[claim.instance_id])
    [instance] = [i for r in described["Reservations"] for i in r["Instances"]]
    assert instance["State"]["Name"] in ("shutting-down", "terminated")


def test_resources_the_kubelet_reports_itself_are_not_waited_for() -> None:
    claim = NodeClaimRecord(
        id="c",
        nodepool="default",
        status="Registered",
        created_at=0.0,
        requests={"cpu": 1000, "memory": 1 << 30, "pods": 2, "ephemeral-storage": 1 << 30, GPU: 0},
    )
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {}}}
    assert initialization_issue(node, claim) is None  # a zero request waits for nothing either
    neuron = NodeClaimRecord(
        id="n", nodepool="default", status="Registered", created_at=0.0, requests={"aws.amazon.com/neuron": 1}
    )
    node["status"]["allocatable"] = {"aws.amazon.com/neuron": "0"}
    assert initialization_issue(node, neuron) == (
        "ResourceNotRegistered",
        'Resource "aws.amazon.com/neuron" was requested but not registered',
    )


def test_the_reasons_follow_karpenters_order() -> None:
    claim = NodeClaimRecord(
        id="c",
        nodepool="default",
        status="Registered",
        created_at=0.0,
        startup_taints=["example.com/agent=starting:NoSchedule"],
        requests={GPU: 1},
    )
    node: dict[str, Any] = {
        "spec": {
            "taints": [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "example.com/agent", "value": "starting", "effect": "NoSchedule"},
            ]
        },
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert initialization_issue(node, claim) == ("NodeNotReady", "Node status is NotReady")
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert initialization_issue(node, claim) == (
        "StartupTaintsExist",
        'StartupTaint "example.com/agent=starting:NoSchedule" still exists',
    )
    node["spec"]["taints"] = node["spec"]["taints"][:1]
    assert initialization_issue(node, claim) == (
        "KnownEphemeralTaintsExist",
        'KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists',
    )
    node["spec"]["taints"] = []
    assert initialization_issue(node, claim) == (
        "ResourceNotRegistered",
        'Resource "nvidia.com/gpu" was requested but not registered',
    )
    node["status"]["allocatable"] = {GPU: "1"}
    assert initialization_issue(node, claim) is None


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(KUBECTL, apiserver.write_kubeconfig(tmp_path / "config"))


def test_the_disruption_pass_counts_a_node_waiting_for_its_gpu_as_not_initialized() -> None:
    from fleetwright.disruption.inputs import node_initialized

    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4"}}}
    waiting = NodeClaimRecord(
        id="c", nodepool="default", status="Registered", created_at=0.0, requests={GPU: 1}
    )
    assert not node_initialized(ready, waiting)  # not a candidate, and not counted by the budgets yet
    waiting.status = str(ClaimStatus.INITIALIZED)
    assert node_initialized(ready, waiting)  # the claim's word, once given, stands
    assert node_initialized(ready, None)  # a node Fleetwright did not launch: Ready is enough
