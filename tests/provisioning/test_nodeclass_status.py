"""An EC2NodeClass's status comes from the cloud contract's ``node_class_status``: each part's own
condition, a failed lookup never hiding the parts that answered, and a cloud that cannot be asked at all
leaving every part NotReady (the status is still written, the pass goes on)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from fleetwright.cloud.nodeclass import (
    ImageFound,
    Lookup,
    NodeClassResolution,
    ReservationFound,
    SubnetFound,
)
from fleetwright.kube.cluster import KubeCluster
from fleetwright.local.simulate.cloud import MemoryUnavailableOfferings, SimCloud
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.provisioning.nodepool_source import SOURCE_CLUSTER, KarpenterObjects
from fleetwright.provisioning.nodepool_status import NodePoolStatus

NOW = 1_790_000_000.0


@dataclass
class _Client:
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> None:
        self.patches.append((name, body))


@dataclass
class _Kube:
    """The cluster as the status writer uses it: no Nodes, patches recorded."""

    client: _Client = field(default_factory=_Client)

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return []


@dataclass
class _Cloud:
    """A cloud that answers ``resolution`` (or raises ``error``)."""

    resolution: NodeClassResolution | None = None
    error: Exception | None = None

    def node_class_status(self, node_class: EC2NodeClass) -> NodeClassResolution:
        if self.error is not None:
            raise self.error
        assert self.resolution is not None
        return self.resolution


def _node_class(**spec: Any) -> EC2NodeClass:
    body: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"team": "a"}}],
        "securityGroupSelectorTerms": [{"tags": {"team": "a"}}],
        "role": "node-role",
        **spec,
    }
    return EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": body,
        }
    )


def _publish(cloud: Any, node_class: EC2NodeClass | None = None) -> dict[str, Any]:
    """The status written for the node class ``default``."""
    node_class = node_class or _node_class()
    kube = _Kube()
    obj = {"metadata": {"name": "default", "generation": 1}, "spec": {}}
    read = KarpenterObjects(SOURCE_CLUSTER, nodeclasses=[node_class], nodeclass_objects=[obj])
    writer = NodePoolStatus(cast(KubeCluster, kube), cloud=cloud, clock=lambda: NOW)
    assert writer.publish(read) == 1
    [(name, body)] = kube.client.patches
    assert name == "default"
    return cast(dict[str, Any], body["status"])


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def _answered(**parts: Lookup[Any]) -> NodeClassResolution:
    found: dict[str, Lookup[Any]] = {
        "subnets": Lookup(
            (SubnetFound("subnet-b", "us-east-1b"), SubnetFound("subnet-a", "us-east-1a", "use1-az1"))
        ),
        "security_groups": Lookup(("sg-1",)),
        "amis": Lookup((ImageFound("ami-1", "amd64", "standard", "al2023"),)),
        "instance_profile": Lookup("node-profile"),
        "capacity_reservations": Lookup(()),
        **parts,
    }
    return NodeClassResolution(**found)


def test_a_failed_ami_lookup_is_its_own_condition_and_the_subnets_still_show() -> None:
    status = _publish(_Cloud(_answered(amis=Lookup((), "ClientError: DescribeImages throttled"))))

    conditions = _conditions(status)
    assert conditions["AMIsReady"] == ("False", "AMIsNotReady", "ClientError: DescribeImages throttled")
    assert conditions["SubnetsReady"] == ("True", "SubnetsReady", "")
    assert conditions["Ready"] == ("False", "UnhealthyDependents", "AMIsReady=False")
    assert "amis" not in status
    assert status["subnets"] == [
        {"id": "subnet-a", "zone": "us-east-1a", "zoneID": "use1-az1"},
        {"id": "subnet-b", "zone": "us-east-1b"},
    ]
    assert status["instanceProfile"] == "node-profile"


def test_a_node_class_that_selects_no_security_group_is_not_found_not_not_ready() -> None:
    status = _publish(_Cloud(_answered(security_groups=Lookup(()))))

    assert _conditions(status)["SecurityGroupsReady"] == (
        "False",
        "SecurityGroupsNotFound",
        "no security group matches securityGroupSelectorTerms",
    )


def test_reservations_are_listed_with_karpenters_fields() -> None:
    reservation = ReservationFound(
        "cr-1",
        "p5.48xlarge",
        "us-east-1a",
        "111122223333",
        "targeted",
        "capacity-block",
        False,
        "expiring",
        NOW,
    )
    status = _publish(_Cloud(_answered(capacity_reservations=Lookup((reservation,)))))

    assert status["capacityReservations"] == [
        {
            "availabilityZone": "us-east-1a",
            "id": "cr-1",
            "instanceMatchCriteria": "targeted",
            "instanceType": "p5.48xlarge",
            "ownerID": "111122223333",
            "reservationType": "capacity-block",
            "interruptible": False,
            "state": "expiring",
            "endTime": "2026-09-21T14:13:20Z",
        }
    ]
    assert _conditions(status)["Ready"] == ("True", "Ready", "")


def test_a_cloud_that_cannot_be_asked_leaves_every_part_not_ready(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fleetwright.nodepools"):
        status = _publish(_Cloud(error=ConnectionError("no route to EC2")))

    assert [r.getMessage() for r in caplog.records] == ["cannot resolve EC2NodeClass default"]

    conditions = _conditions(status)
    parts = [
        "SubnetsReady",
        "SecurityGroupsReady",
        "AMIsReady",
        "InstanceProfileReady",
        "CapacityReservationsReady",
    ]
    assert {kind: conditions[kind][:2] for kind in parts} == {
        kind: ("False", kind.replace("Ready", "NotReady")) for kind in parts
    }
    assert {conditions[kind][2] for kind in parts} == {"ConnectionError: no route to EC2"}
    assert set(status) == {"conditions"}


def test_the_replays_cloud_makes_a_node_class_ready() -> None:
    offerings = tuple(Offering(zone, "on-demand", 0.1) for zone in ("us-east-1a", "us-east-1b"))
    catalog = [
        InstanceType("m5.large", {"cpu": 2000}, {"cpu": 1930}, {"kubernetes.io/arch": "amd64"}, offerings)
    ]
    cloud = SimCloud("sim", catalog, lambda: NOW, MemoryUnavailableOfferings(lambda: NOW))

    status = _publish(cloud)

    assert _conditions(status)["Ready"] == ("True", "Ready", "")
    assert [s["zone"] for s in status["subnets"]] == ["us-east-1a", "us-east-1b"]
    assert status["instanceProfile"] == "node-role"
