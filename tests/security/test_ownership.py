"""Ownership a tag edit cannot grant: an instance or launch template someone tagged with the cluster tag
alone (anyone with ``ec2:CreateTags`` can) is never terminated, garbage collected, launched from or
deleted; it is reported instead. What a copy carrying every tag ("launch more like this") gets is pinned
down too, as docs/security.md describes it."""

from __future__ import annotations

import logging

import pytest

from fleetwright.aws.instanceprofiles import ensure_instance_profile, instance_profile_name
from fleetwright.aws.instances import (
    ClusterInstances,
    describe_instances,
    find_claimed_instances,
    terminate_instances,
)
from fleetwright.aws.launchtemplates import (
    LaunchTemplates,
    delete_launch_template,
    describe_launch_templates,
    template_name,
)
from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import (
    CLUSTER_TAG,
    NODECLAIM_TAG,
    from_aws,
    kubernetes_cluster_tag,
    ownership_tags,
    to_aws,
)
from fleetwright.cloud.errors import InstanceNotFoundError, NotOwnedError
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.disruption import metrics as m
from fleetwright.state.nodeclaims import ClaimStatus
from tests.aws.strict import StrictEc2
from tests.disruption.test_gc import TEMPLATE_GRACE, TIMEOUT, Gc
from tests.support.aws import CLUSTER
from tests.support.provisioning import World

# What a hand-tagged instance carries: the cluster tags a console user adds, and even a claim's id.
CLUSTER_ONLY = {CLUSTER_TAG: CLUSTER, kubernetes_cluster_tag(CLUSTER): "owned"}


@pytest.fixture
def gc(world: World, strict_ec2: StrictEc2 | None) -> Gc:
    return Gc(world, strict_ec2)


def test_an_instance_tagged_with_the_cluster_tag_alone_survives_garbage_collection(
    gc: Gc, caplog: pytest.LogCaptureFixture
) -> None:
    hand_tagged = gc.instance(tags=CLUSTER_ONLY)
    with_a_claim = gc.instance(tags={**CLUSTER_ONLY, NODECLAIM_TAG: "default-gone0001"})
    orphan = gc.instance("default-gone0002")  # launched by the controller, its claim gone: still collected
    gc.advance(30 * 86400)

    with caplog.at_level(logging.WARNING):
        report = gc.collect()

    assert report.terminated_instances == [orphan]
    assert gc.state_of(hand_tagged) == gc.state_of(with_a_claim) == "running"
    assert gc.metrics.total(m.IMPOSTORS_SEEN, Kind="Instance") == 2
    assert gc.collected("Instance") == 1
    kept = {k["name"]: k["why"] for k in report.kept if k["kind"] == "Instance"}
    assert set(kept) == {hand_tagged, with_a_claim}
    assert all("karpenter.sh/nodepool" in why for why in kept.values())
    warned = {getattr(r, "instanceId", "") for r in caplog.records if "by someone else" in r.getMessage()}
    assert warned == {hand_tagged, with_a_claim}
    assert report.ok


def test_an_impostor_is_reported_once_per_listing_not_every_pass(gc: Gc) -> None:
    gc.collector.list_every_seconds = 240.0
    gc.instance(tags=CLUSTER_ONLY)
    gc.advance(TIMEOUT + 1)

    gc.collect()
    gc.advance(60)
    gc.collect()  # the listing is reused: nothing new was seen
    gc.advance(240)
    gc.collect()

    assert gc.metrics.total(m.IMPOSTORS_SEEN, Kind="Instance") == 2


def test_terminate_refuses_an_instance_with_the_cluster_tag_alone(gc: Gc) -> None:
    ours = gc.instance("default-ours0001")
    hand_tagged = gc.instance(tags=CLUSTER_ONLY)
    clients = gc.world.aws.clients

    with pytest.raises(NotOwnedError, match=f"{hand_tagged}.*karpenter.sh/nodepool"):
        terminate_instances(clients, CLUSTER, [ours, hand_tagged])
    with pytest.raises(NotOwnedError):
        ClusterInstances(clients, CLUSTER).terminate([hand_tagged])

    assert gc.state_of(hand_tagged) == gc.state_of(ours) == "running"  # nothing at all was terminated
    assert set(describe_instances(clients, CLUSTER, [ours, hand_tagged])) == {ours}
    with pytest.raises(InstanceNotFoundError):
        ClusterInstances(clients, CLUSTER).get(hand_tagged)


def test_an_instance_hand_tagged_with_a_claim_is_not_taken_for_that_claims_launch(gc: Gc) -> None:
    gc.instance(tags={**CLUSTER_ONLY, NODECLAIM_TAG: "default-next0001"})

    # The claim's launch looks for its instance by tag first: the impostor must not be adopted.
    assert find_claimed_instances(gc.world.aws.clients, CLUSTER, ["default-next0001"]) == {}


def test_a_launch_more_like_this_copy_with_every_tag_is_collected_as_a_duplicate(gc: Gc) -> None:
    original = gc.instance("default-copy0001")
    gc.claim("default-copy0001", ClaimStatus.REGISTERED, original)
    gc.node("original", original)
    # "Launch more like this" copies every tag, the claim's id included: no tag tells the copy apart.
    copy = gc.instance(tags=ownership_tags(CLUSTER, nodepool="default", nodeclaim="default-copy0001"))
    no_record = gc.instance(tags=ownership_tags(CLUSTER, nodepool="default", nodeclaim="default-nrec0001"))
    gc.advance(TIMEOUT - 60)

    assert gc.collect().terminated_instances == []  # as young as a launch in progress: kept

    gc.advance(120)
    report = gc.collect()

    assert sorted(report.terminated_instances) == sorted([copy, no_record])
    assert gc.state_of(original) == "running"
    assert gc.claim_status("default-copy0001") == ClaimStatus.REGISTERED
    assert gc.metrics.total(m.IMPOSTORS_SEEN, Kind="Instance") == 0


def test_a_launch_template_with_our_name_and_the_cluster_tag_alone_is_never_used_or_deleted(
    gc: Gc,
) -> None:
    clients = gc.world.aws.clients
    data = {"ImageId": next(iter(gc.world.amis.ids.values())), "InstanceType": "m5.large"}
    name = template_name(CLUSTER, data)
    clients.ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": to_aws({CLUSTER_TAG: CLUSTER})}],
    )
    gc.world.wall.now += TEMPLATE_GRACE + 60

    with pytest.raises(ValueError, match=r"fleetwright\.io/ec2nodeclass"):
        LaunchTemplates(clients, CLUSTER).ensure(data, {CLUSTER_TAG: CLUSTER})
    assert describe_launch_templates(clients, CLUSTER) == []
    with pytest.raises(ValueError, match="refusing to delete"):
        delete_launch_template(clients, CLUSTER, name)
    report = gc.collect()

    assert report.deleted_launch_templates == []
    assert gc.templates() == [name]


class _FailBeforeLaunch(AwsProvider):
    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        raise ConnectionError("EC2 endpoint unreachable")


def test_a_hand_tagged_instance_naming_a_pending_claim_is_not_adopted_by_it(world: World) -> None:
    world.pending(2)
    failing = world.provisioner(holder="failing")
    failing.lifecycle.cloud = _FailBeforeLaunch(
        world.aws.cluster, "us-east-1", clients=world.aws.clients, unavailable=world.state.unavailable
    )
    failing.run_once()
    [orphan] = world.state.nodeclaims.list()
    assert orphan.launch_deadline is not None
    # Someone tags an instance of theirs with the cluster tag and the claim's id while it is pending.
    world.aws.clients.ec2.run_instances(
        ImageId=next(iter(world.amis.ids.values())),
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=world.aws.subnets["a-small"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": to_aws({**CLUSTER_ONLY, NODECLAIM_TAG: orphan.id})}
        ],
    )
    world.strict.consistency.settle()

    world.wall.advance(orphan.launch_deadline - world.wall() + 31)
    report = world.provisioner().run_once()

    assert report.reconciles[0].adopted == []
    assert report.reconciles[0].abandoned == [orphan.id]
    gone = world.state.nodeclaims.get(orphan.id)
    assert gone is not None and gone.status == ClaimStatus.FAILED and gone.instance_id == ""


def test_an_instance_profile_made_by_hand_under_the_clusters_name_is_refused(world: World) -> None:
    iam = world.aws.clients.iam
    for role in ("NodeRoleA", "NodeRoleB"):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")
    hand_made = instance_profile_name(CLUSTER, world.aws.clients.region, "NodeRoleA")
    iam.create_instance_profile(InstanceProfileName=hand_made)  # untagged, holding what its maker chose

    with pytest.raises(ValueError, match=f"{hand_made} exists but is not tagged"):
        ensure_instance_profile(world.aws.clients, CLUSTER, "NodeRoleA")
    assert iam.get_instance_profile(InstanceProfileName=hand_made)["InstanceProfile"]["Roles"] == []

    # A profile the controller makes itself is tagged at creation, and holds the role.
    made = ensure_instance_profile(world.aws.clients, CLUSTER, "NodeRoleB")
    profile = iam.get_instance_profile(InstanceProfileName=made)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["NodeRoleB"]
    assert from_aws(profile["Tags"])[CLUSTER_TAG] == CLUSTER
