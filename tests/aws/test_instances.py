"""Describe and terminate: only instances carrying this cluster's ownership tag."""

from __future__ import annotations

import pytest

from fleetwright.aws.instances import NotOwnedError, describe_instances, list_instances, terminate_instances
from fleetwright.aws.tags import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG, to_aws
from tests.aws.strict import StrictEc2
from tests.support.aws import CLUSTER, Aws


@pytest.fixture(autouse=True)
def _launched_a_while_ago(strict_ec2: StrictEc2) -> None:
    """These instances were launched long before the calls under test: DescribeInstances shows them."""
    strict_ec2.consistency.hidden_calls = 0


def _run(aws: Aws, tags: dict[str, str]) -> str:
    spec = [{"ResourceType": "instance", "Tags": to_aws(tags)}] if tags else []
    reservation = aws.clients.ec2.run_instances(
        ImageId="ami-12c6146b",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=aws.subnets["b"],
        TagSpecifications=spec,
    )
    return str(reservation["Instances"][0]["InstanceId"])


def _state(aws: Aws, instance_id: str) -> str:
    found = aws.clients.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(found["State"]["Name"])


def test_terminate_refuses_an_instance_without_our_tag(aws: Aws) -> None:
    ours = _run(aws, {CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default"})
    foreign = _run(aws, {"team": "payments"})
    other_cluster = _run(aws, {CLUSTER_TAG: "another"})
    for target in (foreign, other_cluster):
        with pytest.raises(NotOwnedError, match=target):
            terminate_instances(aws.clients, CLUSTER, [ours, target])
        assert _state(aws, target) == "running"
    assert _state(aws, ours) == "running"  # nothing at all is terminated when one id is foreign


def test_terminate_ours_and_treat_missing_instances_as_gone(aws: Aws) -> None:
    ours = _run(aws, {CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default"})
    result = terminate_instances(aws.clients, CLUSTER, [ours, "i-0123456789abcdef0"])
    assert result.terminating == [ours]
    assert result.already_gone == ["i-0123456789abcdef0"]
    assert _state(aws, ours) in ("shutting-down", "terminated")
    again = terminate_instances(aws.clients, CLUSTER, [ours])
    if _state(aws, ours) == "terminated":
        assert again.already_gone == [ours]
    else:
        assert again.terminating == [ours]


def test_describe_and_list_return_only_our_instances(aws: Aws) -> None:
    ours = _run(aws, {CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default", NODECLAIM_TAG: "claim-9"})
    foreign = _run(aws, {"team": "payments"})
    found = describe_instances(aws.clients, CLUSTER, [ours, foreign, "i-0123456789abcdef0"])
    assert set(found) == {ours}
    assert found[ours].nodeclaim == "claim-9"
    assert found[ours].provider_id == f"aws:///us-east-1b/{ours}"
    assert [i.id for i in list_instances(aws.clients, CLUSTER)] == [ours]
