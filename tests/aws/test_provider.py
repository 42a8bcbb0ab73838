"""The cloud contract as the AWS provider keeps it: typed answers, not found as an error only for ``get``,
EC2's retryable failures as transient errors, launch failures by kind."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from fleetwright.aws.instances import ClusterInstances
from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import CLUSTER_TAG, NODEPOOL_TAG, to_aws
from fleetwright.cloud.errors import (
    NODE_CLASS_NOT_READY,
    InstanceNotFoundError,
    LaunchError,
    ThrottledError,
    TransientCloudError,
)
from fleetwright.cloud.provider import CloudProvider, InstanceCloud
from tests.aws.faults import FailCall
from tests.aws.strict import StrictEc2
from tests.aws.test_fleet import _request
from tests.support.aws import CLUSTER, REGION, Aws, SeededAmis, node_class


@pytest.fixture(autouse=True)
def _launched_a_while_ago(strict_ec2: StrictEc2) -> None:
    """These instances were launched long before the calls under test: DescribeInstances shows them."""
    strict_ec2.consistency.hidden_calls = 0


def _run(aws: Aws, tags: dict[str, str]) -> str:
    reservation = aws.clients.ec2.run_instances(
        ImageId="ami-12c6146b",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=aws.subnets["b"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": to_aws(tags)}],
    )
    return str(reservation["Instances"][0]["InstanceId"])


def _provider(aws: Aws) -> CloudProvider:
    return AwsProvider(aws.cluster, REGION, clients=aws.clients, unavailable=aws.unavailable)


def test_get_answers_our_instance_and_raises_not_found_for_a_foreign_or_unknown_one(aws: Aws) -> None:
    cloud: InstanceCloud = ClusterInstances(aws.clients, CLUSTER)
    ours = _run(aws, {CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default"})
    foreign = _run(aws, {CLUSTER_TAG: "another"})

    found = cloud.get(ours)
    assert (found.id, found.state, found.cluster) == (ours, "running", CLUSTER)
    for missing in (foreign, "i-0123456789abcdef0"):
        with pytest.raises(InstanceNotFoundError, match=missing):
            cloud.get(missing)
    assert set(cloud.describe([ours, foreign, "i-0123456789abcdef0"])) == {ours}


def test_throttled_and_server_side_failures_are_transient_others_pass_through(aws: Aws) -> None:
    cloud = _provider(aws)
    ours = _run(aws, {CLUSTER_TAG: CLUSTER, NODEPOOL_TAG: "default"})

    FailCall("DescribeInstances", "RequestLimitExceeded", status=503).install(aws.clients.ec2)
    with pytest.raises(ThrottledError) as throttled:
        cloud.describe([ours])
    assert throttled.value.code == "RequestLimitExceeded"

    FailCall("DescribeInstances", "InternalError", status=500).install(aws.clients.ec2)
    with pytest.raises(TransientCloudError) as failed:
        cloud.list()
    assert not isinstance(failed.value, ThrottledError)

    FailCall("DescribeInstances", "UnauthorizedOperation", status=403).install(aws.clients.ec2)
    with pytest.raises(ClientError):
        cloud.terminate([ours])
    assert cloud.get(ours).state == "running"  # nothing was terminated; the next call goes through


def test_a_launch_refused_capacity_everywhere_is_insufficient_capacity(aws: Aws, amis: SeededAmis) -> None:
    aws.fleet.exhausted = {("m5.large", z) for z in ("us-east-1a", "us-east-1b")}
    with pytest.raises(LaunchError) as failure:
        _provider(aws).launch(_request(aws, ["m5.large"], capacity_types=("on-demand",)))
    assert failure.value.nodeclaim == "claim-1"
    assert failure.value.insufficient_capacity and not failure.value.may_have_launched


def test_a_node_class_selecting_no_subnet_is_not_ready(aws: Aws, amis: SeededAmis) -> None:
    unresolvable = node_class(subnetSelectorTerms=[{"tags": {"nothing": "matches"}}])
    with pytest.raises(LaunchError, match="no subnet") as failure:
        _provider(aws).launch(_request(aws, ["m5.large"], nc=unresolvable))
    assert failure.value.codes == [NODE_CLASS_NOT_READY]
    assert not failure.value.insufficient_capacity
    assert aws.fleet.requests == []
