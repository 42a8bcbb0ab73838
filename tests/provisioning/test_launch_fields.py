"""What a launch decides reaches the objects kubectl shows: NodePool template annotations on NodeClaims
and Nodes, the tenancy and placement group labels, and pods selecting a tenancy or a placement group
partition get a node launched that way."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws import placementgroups
from fleetwright.kube.resources import NODE_CLAIMS, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.aws_fakes import PlacementGroups
from fleetwright.model import labels as wk
from fleetwright.model.karpenter import NodePool
from tests.aws.faults import FailCall
from tests.kube.objects import UNSCHEDULABLE_STATUS, pod_object
from tests.support.aws import node_class
from tests.support.provisioning import World, make_config, nodepool


@pytest.fixture
def crds(apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)


def _annotated(annotations: dict[str, str]) -> NodePool:
    body = nodepool().model_dump(by_alias=True, exclude_none=True)
    body["spec"]["template"]["metadata"] = {"annotations": annotations}
    return NodePool.model_validate(body)


def _pending_pod(world: World, name: str, selector: dict[str, str]) -> None:
    pod = pod_object(name, cpu="1")
    pod["spec"]["nodeSelector"] = selector
    created = world.client.create(PODS, pod)
    world.client.patch(
        PODS, name, UNSCHEDULABLE_STATUS, created["metadata"]["namespace"], subresource="status"
    )


def _node(world: World, name: str) -> dict[str, Any]:
    found = world.kube.get_node(name)
    assert found is not None
    return found


def _template_placement(world: World) -> dict[str, Any]:
    """``Placement`` of the launch template the last CreateFleet used."""
    [request] = world.aws.fleet.requests[-1:]
    name = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    versions = world.aws.clients.ec2.describe_launch_template_versions(
        LaunchTemplateName=name, Versions=["$Latest"]
    )
    return dict(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"].get("Placement") or {})


@pytest.mark.usefixtures("crds")
def test_template_annotations_reach_the_nodeclaim_and_the_node(world: World) -> None:
    annotations = {"example.com/owner": "team-ml", "example.com/cost-center": "42"}
    world.pending(1)
    provisioner = world.provisioner(make_config(_annotated(annotations)))
    [claim] = provisioner.run_once().launched
    claim_object = world.client.get(NODE_CLAIMS, claim.id)
    assert claim_object["metadata"]["annotations"] == annotations

    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    provisioner.reconcile()
    node_annotations = _node(world, "node-a")["metadata"].get("annotations") or {}
    assert {k: node_annotations.get(k) for k in annotations} == annotations


def test_nodes_are_labelled_with_the_shared_tenancy_by_default(world: World) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    assert _template_placement(world) == {}
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    provisioner.reconcile()
    assert _node(world, "node-a")["metadata"]["labels"][wk.INSTANCE_TENANCY] == "default"


def test_a_pod_selecting_dedicated_tenancy_gets_a_dedicated_instance(world: World) -> None:
    _pending_pod(world, "isolated", {wk.INSTANCE_TENANCY: "dedicated"})
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    assert _template_placement(world) == {"Tenancy": "dedicated"}
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    provisioner.reconcile()
    assert _node(world, "node-a")["metadata"]["labels"][wk.INSTANCE_TENANCY] == "dedicated"


def test_a_pod_selecting_a_partition_lands_in_it(world: World) -> None:
    groups = PlacementGroups([])
    groups.install(world.aws.clients.ec2)
    group_id = groups.add("kafka", "partition", partitions=3)
    config = make_config(nodepool(), nodeclass=node_class(placementGroupSelector={"name": "kafka"}))
    _pending_pod(world, "broker-2", {wk.PLACEMENT_GROUP_PARTITION: "2"})
    provisioner = world.provisioner(config)
    [claim] = provisioner.run_once().launched
    assert _template_placement(world) == {"GroupId": group_id, "PartitionNumber": 2}
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    provisioner.reconcile()
    labels = _node(world, "node-a")["metadata"]["labels"]
    assert labels[wk.PLACEMENT_GROUP_ID] == group_id
    assert labels[wk.PLACEMENT_GROUP_PARTITION] == "2"


def test_a_pod_selecting_another_placement_group_or_partition_launches_nothing(world: World) -> None:
    groups = PlacementGroups([])
    groups.install(world.aws.clients.ec2)
    groups.add("kafka", "partition", partitions=3)
    config = make_config(nodepool(), nodeclass=node_class(placementGroupSelector={"name": "kafka"}))
    _pending_pod(world, "elsewhere", {wk.PLACEMENT_GROUP_ID: "pg-0000000000000beef"})
    _pending_pod(world, "partition-9", {wk.PLACEMENT_GROUP_PARTITION: "9"})
    report = world.provisioner(config).run_once()
    assert report.launched == []
    assert sum(p.unschedulable for p in report.passes) == 2
    assert world.create_fleet_calls() == 0


def test_a_pod_selecting_a_placement_group_needs_a_node_class_with_one(world: World) -> None:
    _pending_pod(world, "grouped", {wk.PLACEMENT_GROUP_ID: "pg-0000000000000beef"})
    report = world.provisioner().run_once()
    assert report.launched == [] and sum(p.unschedulable for p in report.passes) == 1


def test_a_failing_placement_group_lookup_launches_nothing_outside_the_group(world: World) -> None:
    """EC2 refuses DescribePlacementGroups: the claim fails with the reason and no instance is launched
    (not into the group, not outside it); once EC2 answers again, exactly one node lands in the group."""
    refusal = FailCall("DescribePlacementGroups", "UnauthorizedOperation", times=1_000_000)
    refusal.install(world.aws.clients.ec2)
    groups = PlacementGroups([])
    groups.install(world.aws.clients.ec2)
    group_id = groups.add("training", "cluster")
    config = make_config(nodepool(), nodeclass=node_class(placementGroupSelector={"name": "training"}))
    world.pending(1)
    provisioner = world.provisioner(config)

    first = provisioner.run_once()
    assert first.launched == []
    [reason] = [r for p in first.passes for r in p.failed.values()]
    assert "UnauthorizedOperation" in reason and "NodeClassNotReady" in reason
    assert world.create_fleet_calls() == 0 and world.instances() == []

    refusal.times = 0  # EC2 answers again
    [claim] = provisioner.run_once().launched
    assert _template_placement(world) == {"GroupId": group_id}
    assert claim.labels[wk.PLACEMENT_GROUP_ID] == group_id
    assert len(world.instances()) == 1


def test_a_placement_group_found_before_is_used_while_ec2_cannot_be_asked(world: World) -> None:
    groups_calls = FailCall("DescribePlacementGroups", "RequestLimitExceeded", nth=2, times=50, status=503)
    groups_calls.install(world.aws.clients.ec2)
    groups = PlacementGroups([])
    groups.install(world.aws.clients.ec2)
    group_id = groups.add("training", "cluster")
    nc = node_class(placementGroupSelector={"name": "training"})
    assert world.cloud.resolver.placement_group(nc) is not None  # found once
    placementgroups._FRESH.invalidate()  # a minute later: EC2 is asked again, and throttles
    world.pending(1)
    [claim] = world.provisioner(make_config(nodepool(), nodeclass=nc)).run_once().launched
    assert claim.labels[wk.PLACEMENT_GROUP_ID] == group_id
    assert _template_placement(world) == {"GroupId": group_id}
