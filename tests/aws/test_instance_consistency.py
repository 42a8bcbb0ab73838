"""Terminate and look up instances the way real EC2 answers: a just-launched instance is not listed at
once, and one DescribeInstances call takes at most 200 filter values."""

from __future__ import annotations

from fleetwright.aws.instances import find_claimed_instances, terminate_instances
from fleetwright.aws.tags import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG, to_aws
from tests.support.aws import CLUSTER, Aws


def _launch(aws: Aws, claim: str) -> str:
    reservation = aws.clients.ec2.run_instances(
        ImageId="ami-12c6146b",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=aws.subnets["b"],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": to_aws({CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default", NODECLAIM_TAG: claim}),
            }
        ],
    )
    return str(reservation["Instances"][0]["InstanceId"])


def test_a_just_launched_instance_is_terminated_not_taken_for_gone(aws: Aws) -> None:
    instance = _launch(aws, "claim-1")  # the strict stand-in hides it from the first lookup
    pauses: list[float] = []
    result = terminate_instances(aws.clients, CLUSTER, [instance], sleep=pauses.append)
    assert result.terminating == [instance]
    assert result.already_gone == []
    assert len(pauses) == 1  # looked up again after a pause instead of counted as gone
    state = aws.clients.ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    assert state["State"]["Name"] in ("shutting-down", "terminated")


def test_an_unknown_instance_still_counts_as_gone(aws: Aws) -> None:
    result = terminate_instances(aws.clients, CLUSTER, ["i-0123456789abcdef0"], sleep=lambda _: None)
    assert result.already_gone == ["i-0123456789abcdef0"]
    assert result.terminating == []


def test_claimed_instances_are_found_for_hundreds_of_claims(aws: Aws) -> None:
    instance = _launch(aws, "claim-137")
    claims = [f"claim-{i}" for i in range(400)]
    found = {}
    for _ in range(2):  # the first lookup may not list the instance yet
        found = find_claimed_instances(aws.clients, CLUSTER, claims)
        if found:
            break
    assert {c: i.instance_id for c, i in found.items()} == {"claim-137": instance}
