"""A NodePool allowing reserved capacity, end to end: the reservation is launched into first, the claim and
its Node carry the reservation's labels, and pods beyond the reservation get on-demand nodes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from fleetwright.kube.resources import EC2_NODE_CLASSES, NODE_CLAIMS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.aws_fakes import CapacityReservations
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.provisioning.nodepool_status import NodePoolStatus
from fleetwright.state import ClaimStatus
from tests.provisioning.test_nodepools_from_cluster import NODECLASS, Kubectl, conditions, nodepool_doc
from tests.support.aws import node_class
from tests.support.local import KUBECTL
from tests.support.provisioning import World, make_config, nodepool


@pytest.fixture
def crds(apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)


@pytest.mark.usefixtures("crds")
def test_pods_fill_the_reservation_first_then_on_demand_and_the_reserved_node_says_so(world: World) -> None:
    crs = CapacityReservations()
    crs.install(world.aws.clients.ec2)
    rid = crs.add("m5.xlarge", "us-east-1a", 1)
    world.cloud.reservations.clear()
    config = make_config(
        nodepool(capacity_types=["reserved", "on-demand"]),
        nodeclass=node_class(capacityReservationSelectorTerms=[{"id": rid}]),
    )
    # Two pods of 3 cpu: one per m5.xlarge.
    world.pending(2, cpu="3")

    report = world.provisioner(config).run_once()

    assert len(report.launched) == 2
    by_type = {c.capacity_type: c for c in report.launched}
    assert set(by_type) == {"reserved", "on-demand"}
    reserved = world.state.nodeclaims.get(by_type["reserved"].id)
    assert reserved is not None and reserved.status == ClaimStatus.LAUNCHED
    assert (reserved.instance_type, reserved.zone) == ("m5.xlarge", "us-east-1a")
    assert reserved.reservation_ids == [rid]
    assert reserved.labels[wk.CAPACITY_RESERVATION_ID] == rid
    assert reserved.labels[wk.CAPACITY_RESERVATION_TYPE] == "default"
    assert reserved.labels[wk.CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert crs.reservations[rid]["AvailableInstanceCount"] == 0
    other = world.state.nodeclaims.get(by_type["on-demand"].id)
    assert other is not None and wk.CAPACITY_RESERVATION_ID not in other.labels
    # kubectl shows the NodeClaim with the reservation's labels...
    obj = world.client.get(NODE_CLAIMS, reserved.id)
    labels = obj["metadata"]["labels"]
    assert labels[wk.CAPACITY_TYPE] == "reserved"
    assert labels[wk.CAPACITY_RESERVATION_ID] == rid
    # ...and the Node, once registered, carries them too.
    world.register_node(reserved.provider_id, "ip-10-0-0-7.ec2.internal", ready=True)
    world.provisioner(config).reconcile()
    node = world.kube.get_node("ip-10-0-0-7.ec2.internal")
    assert node is not None
    assert node["metadata"]["labels"][wk.CAPACITY_TYPE] == "reserved"
    assert node["metadata"]["labels"][wk.CAPACITY_RESERVATION_ID] == rid


def test_the_next_pass_does_not_plan_into_a_reservation_it_just_filled(world: World) -> None:
    crs = CapacityReservations()
    crs.install(world.aws.clients.ec2)
    rid = crs.add("m5.xlarge", "us-east-1a", 1)
    world.cloud.reservations.clear()
    config = make_config(
        nodepool(capacity_types=["reserved", "on-demand"]),
        nodeclass=node_class(capacityReservationSelectorTerms=[{"id": rid}]),
    )
    world.pending(1, cpu="3", prefix="first")
    provisioner = world.provisioner(config)
    [first] = provisioner.run_once().launched
    assert first.capacity_type == "reserved"
    # A minute later (the listing is still cached) another pod comes.
    world.pending(1, cpu="3", prefix="second")
    world.wall.advance(60)
    launched = provisioner.run_once().launched
    assert [c.capacity_type for c in launched] == ["on-demand"]
    assert len(world.aws.fleet.requests) == 2


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run .ci/install-kubectl first")
    install_karpenter_crds(apiserver.store)
    return Kubectl(apiserver, tmp_path)


def test_an_applied_nodeclass_shows_its_capacity_reservations_in_status(
    world: World, kubectl: Kubectl
) -> None:
    crs = CapacityReservations()
    crs.install(world.aws.clients.ec2)
    rid = crs.add("m5.large", "us-east-1b", 2, tags={"team": "ml"})
    nodeclass = copy.deepcopy(NODECLASS)
    nodeclass["metadata"]["name"] = "reserved"
    nodeclass["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "ml"}}]
    pool = nodepool_doc("reserved", "m5.large")
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "reserved"
    pool["spec"]["template"]["spec"]["requirements"][1]["values"] = ["reserved"]
    kubectl.apply(nodeclass, pool)
    config = make_config(nodepool("from-file", instance_types=["c5.large"]))
    writer = NodePoolStatus(world.kube, cloud=world.cloud, clock=world.wall)
    source = NodePoolSource(world.kube, config, metrics=RecordingMetrics(), status=writer)
    world.pending(1)

    [claim] = world.provisioner(config, nodepool_source=source).run_once().launched

    assert (claim.nodepool, claim.capacity_type, claim.zone) == ("reserved", "reserved", "us-east-1b")
    status = world.client.get(EC2_NODE_CLASSES, "reserved")["status"]
    assert status["capacityReservations"] == [
        {
            "availabilityZone": "us-east-1b",
            "id": rid,
            "instanceMatchCriteria": "targeted",
            "instanceType": "m5.large",
            "ownerID": crs.owner_id,
            "reservationType": "default",
            "interruptible": False,
            "state": "active",
        }
    ]
    assert (
        conditions(world.client.get(EC2_NODE_CLASSES, "reserved"))["CapacityReservationsReady"][0] == "True"
    )
