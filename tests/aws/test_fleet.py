"""Launching NodeClaims with CreateFleet against moto, with EC2's capacity behaviour injected."""

from __future__ import annotations

import base64
import dataclasses
import email
from collections.abc import Iterator

import pytest
import yaml

from fleetwright.aws.fleet import MAX_INSTANCE_TYPES, FleetLauncher
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.nodeclass import NodeClassResolver
from fleetwright.aws.tags import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG, from_aws
from fleetwright.catalog.loader import ondemand_prices as static_prices
from fleetwright.cloud.deadline import Deadline, deadline_scope
from fleetwright.cloud.errors import FailureKind, LaunchError, Offering
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.taints import Taint
from tests.aws.strict import StrictEc2
from tests.support.aws import CLUSTER, REGION, Aws, SeededAmis, node_class
from tests.support.clock import FakeClock


def _catalog(aws: Aws) -> dict[str, InstanceType]:
    return {t.name: t for t in list_instance_types(aws.clients, unavailable=aws.unavailable)}


def _price(instance_type: InstanceType, capacity_type: str = "spot") -> float:
    cheapest = instance_type.cheapest(capacity_types=frozenset({capacity_type}))
    return cheapest.price if cheapest else float("inf")


def _request(
    aws: Aws,
    names: list[str],
    claim: str = "claim-1",
    capacity_types: tuple[str, ...] = ("spot", "on-demand"),
    nc: EC2NodeClass | None = None,
    **extra: object,
) -> LaunchRequest:
    catalog = _catalog(aws)
    types = sorted((catalog[n] for n in names), key=_price)
    return LaunchRequest(
        nodeclaim=claim,
        nodepool="general",
        instance_types=tuple(types),
        capacity_types=capacity_types,
        labels={"team": "ml"},
        node_class=nc or node_class(tags={"cost-center": "42"}),
        node_class_name="default",
        **extra,  # type: ignore[arg-type]
    )


def _launcher(aws: Aws) -> FleetLauncher:
    return FleetLauncher(
        aws.clients, CLUSTER, NodeClassResolver(aws.clients, aws.cluster), unavailable=aws.unavailable
    )


def _overrides(request: dict[str, object]) -> list[dict[str, str]]:
    return [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _settled(strict_ec2: StrictEc2) -> Iterator[None]:
    _STRICT.append(strict_ec2)
    yield
    _STRICT.clear()


_STRICT: list[StrictEc2] = []


def _instance_tags(aws: Aws, instance_id: str) -> dict[str, str]:
    # Looked at a few seconds after the launch, when DescribeInstances shows the instance.
    _STRICT[0].consistency.settle()
    reservations = aws.clients.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return from_aws(reservations[0]["Instances"][0].get("Tags"))


def _standard_amd64(aws: Aws) -> list[str]:
    return sorted(
        n
        for n, t in _catalog(aws).items()
        if t.labels[wk.ARCH] == "amd64"
        and wk.INSTANCE_GPU_COUNT not in t.labels
        and "aws.amazon.com/neuron" not in t.capacity
        and any(o.capacity_type == "spot" and o.zone in ("us-east-1a", "us-east-1b") for o in t.offerings)
    )


def test_create_fleet_request_offers_the_cheapest_types_by_price_with_ownership_tags(
    aws: Aws, amis: SeededAmis
) -> None:
    names = _standard_amd64(aws)[:90]
    launched = _launcher(aws).launch(_request(aws, names, capacity_types=("spot",)))

    [sent] = aws.fleet.requests
    assert sent["Type"] == "instant"
    assert sent["ClientToken"] == "claim-1"
    assert sent["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "spot",
    }
    assert sent["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    overrides = _overrides(sent)
    prices = [aws.spot_price(o["InstanceType"], o["AvailabilityZone"]) for o in overrides]
    assert prices == sorted(prices)
    offered_types = {o["InstanceType"] for o in overrides}
    assert len(offered_types) == MAX_INSTANCE_TYPES
    # ...and they are the 60 cheapest of the 90 candidates.
    catalog = _catalog(aws)
    cheapest = sorted(
        names, key=lambda n: min(o.price for o in catalog[n].offerings if o.capacity_type == "spot")
    )
    assert offered_types == set(cheapest[:MAX_INSTANCE_TYPES])
    # Only the zones with a tagged subnet, and in us-east-1a the subnet with more free addresses.
    assert {o["AvailabilityZone"] for o in overrides} <= {"us-east-1a", "us-east-1b"}
    assert {o["SubnetId"] for o in overrides if o["AvailabilityZone"] == "us-east-1a"} == {
        aws.subnets["a-large"]
    }

    tags = {t["Key"]: t["Value"] for t in sent["TagSpecifications"][0]["Tags"]}
    assert tags == {
        CLUSTER_TAG: CLUSTER,
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        NODEPOOL_TAG: "general",
        NODECLAIM_TAG: "claim-1",
        "fleetwright.io/ec2nodeclass": "default",
        "Name": "claim-1",
        "cost-center": "42",
    }
    # Every resource the launch creates carries the ownership tags (the IAM policy requires them).
    # An instant fleet may tag only the fleet and its instances; the template tags the rest.
    assert {spec["ResourceType"] for spec in sent["TagSpecifications"]} == {"instance", "fleet"}
    assert all(spec["Tags"] == sent["TagSpecifications"][0]["Tags"] for spec in sent["TagSpecifications"])
    # moto launches the first override: the cheapest offering.
    assert (launched.instance_type, launched.zone) == (
        overrides[0]["InstanceType"],
        overrides[0]["AvailabilityZone"],
    )
    assert launched.capacity_type == "spot"
    assert launched.image_id == amis.ids[("amd64", "standard")]
    assert launched.provider_id == f"aws:///{launched.zone}/{launched.instance_id}"
    assert _instance_tags(aws, launched.instance_id)[NODECLAIM_TAG] == "claim-1"


def test_seeded_spot_prices_decide_which_offering_is_launched(aws: Aws, amis: SeededAmis) -> None:
    aws.spot_overrides[("c5.large", "us-east-1b")] = 0.0011
    aws.spot_overrides[("r5.large", "us-east-1a")] = 0.0012
    launched = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large", "r5.large"]))
    assert (launched.instance_type, launched.zone) == ("c5.large", "us-east-1b")
    assert launched.price == 0.0011
    assert [o["InstanceType"] for o in _overrides(aws.fleet.requests[0])][:2] == ["c5.large", "r5.large"]


def test_spot_dearer_than_on_demand_is_not_offered(aws: Aws, amis: SeededAmis) -> None:
    ondemand = static_prices(REGION)["m5.large"]
    aws.spot_overrides[("c5.large", "us-east-1a")] = ondemand * 5
    _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    offered = {(o["InstanceType"], o["AvailabilityZone"]) for o in _overrides(aws.fleet.requests[0])}
    assert ("c5.large", "us-east-1a") not in offered
    assert ("c5.large", "us-east-1b") in offered


def test_on_demand_claims_use_lowest_price(aws: Aws, amis: SeededAmis) -> None:
    launched = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"], capacity_types=("on-demand",)))
    [sent] = aws.fleet.requests
    assert sent["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in sent
    assert sent["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert launched.capacity_type == "on-demand"
    assert launched.instance_type == "c5.large"  # cheaper on-demand than m5.large in the static table


def test_insufficient_capacity_falls_back_to_the_next_offering_and_is_remembered(
    aws: Aws, amis: SeededAmis
) -> None:
    aws.spot_overrides.update({("c5.large", "us-east-1a"): 0.001, ("c5.large", "us-east-1b"): 0.002})
    aws.fleet.exhausted = {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    launcher = _launcher(aws)
    launched = launcher.launch(_request(aws, ["m5.large", "c5.large"]))

    assert launched.instance_type == "m5.large"
    assert launched.capacity_type == "spot"
    assert aws.unavailable.is_unavailable("c5.large", "us-east-1a", "spot")
    assert aws.unavailable.is_unavailable("c5.large", "us-east-1b", "spot")
    assert not aws.unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")
    # The next claim does not even ask for the refused offerings.
    launcher.launch(_request(aws, ["m5.large", "c5.large"], claim="claim-2"))
    assert {o["InstanceType"] for o in _overrides(aws.fleet.requests[-1])} == {"m5.large"}
    # And the scheduler's view of the offerings says so too.
    c5 = {(o.zone, o.capacity_type): o.available for o in _catalog(aws)["c5.large"].offerings}
    assert c5[("us-east-1a", "spot")] is False


def test_when_spot_is_exhausted_the_claim_falls_back_to_on_demand(aws: Aws, amis: SeededAmis) -> None:
    aws.fleet.exhausted = {
        (n, z, "spot") for n in ("m5.large", "c5.large") for z in ("us-east-1a", "us-east-1b")
    }
    launched = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    assert launched.capacity_type == "on-demand"
    kinds = [r["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for r in aws.fleet.requests]
    assert kinds == ["spot", "on-demand"]
    # Each call has its own token: reusing one with other parameters is an error in EC2.
    assert len({r["ClientToken"] for r in aws.fleet.requests}) == 2


def test_claim_fails_with_the_collected_reasons_when_nothing_remains(aws: Aws, amis: SeededAmis) -> None:
    aws.fleet.exhausted = {(n, z) for n in ("m5.large", "c5.large") for z in ("us-east-1a", "us-east-1b")}
    with pytest.raises(LaunchError) as failure:
        _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    message = str(failure.value)
    assert FailureKind.INSUFFICIENT_CAPACITY in {f.kind for f in failure.value.failures}
    assert Offering("c5.large", "us-east-1a", "spot") in {f.offering for f in failure.value.failures}
    assert not failure.value.may_have_launched
    assert "claim-1" in message
    assert "InsufficientInstanceCapacity for c5.large (spot) in us-east-1a" in message
    assert "InsufficientInstanceCapacity for m5.large (on-demand) in us-east-1b" in message
    assert "no available offering left" in message
    _STRICT[0].consistency.settle()
    running = aws.clients.ec2.describe_instances(
        Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [CLUSTER]}]
    )
    assert running["Reservations"] == []


def test_other_errors_fail_the_claim_without_retrying(aws: Aws, amis: SeededAmis) -> None:
    aws.fleet.code = "InvalidParameterValue"
    aws.fleet.exhausted = {("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")}
    with pytest.raises(LaunchError, match="InvalidParameterValue") as failure:
        _launcher(aws).launch(_request(aws, ["m5.large"]))
    assert {(f.kind, f.code) for f in failure.value.failures} == {
        (FailureKind.INVALID_REQUEST, "InvalidParameterValue")
    }
    assert len(aws.fleet.requests) == 1
    assert aws.unavailable.entries() == []


def test_a_launch_without_its_nodepool_is_refused_before_any_create_fleet(aws: Aws, amis: SeededAmis) -> None:
    # Its instance would lack the NodePool tag ownership needs: nothing could ever terminate it.
    request = dataclasses.replace(_request(aws, ["m5.large"]), nodepool="")
    with pytest.raises(LaunchError, match=r"karpenter\.sh/nodepool") as failure:
        _launcher(aws).launch(request)
    assert not failure.value.may_have_launched
    assert aws.fleet.requests == []


def test_launching_the_same_claim_twice_yields_one_instance(aws: Aws, amis: SeededAmis) -> None:
    launcher = _launcher(aws)
    first = launcher.launch(_request(aws, ["m5.large", "c5.large"]))
    _STRICT[0].consistency.settle()  # a minute later, DescribeInstances shows the instance
    # A retried Lambda (or one started after a crash) has a fresh process: new launcher, empty caches.
    second = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    assert second.instance_id == first.instance_id
    assert second.reused and not first.reused
    assert len(aws.fleet.requests) == 1
    _STRICT[0].consistency.settle()
    tagged = aws.clients.ec2.describe_instances(
        Filters=[{"Name": f"tag:{NODECLAIM_TAG}", "Values": ["claim-1"]}]
    )
    assert sum(len(r["Instances"]) for r in tagged["Reservations"]) == 1


def test_a_launch_retried_before_its_instance_is_visible_gets_the_same_instance(
    aws: Aws, amis: SeededAmis
) -> None:
    first = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    # DescribeInstances does not show the instance yet: the same ClientToken returns the same fleet.
    second = _launcher(aws).launch(_request(aws, ["m5.large", "c5.large"]))
    assert second.instance_id == first.instance_id
    assert [r["ClientToken"] for r in aws.fleet.requests] == ["claim-1", "claim-1"]


def test_a_create_fleet_answered_after_the_deadline_is_not_reported_as_nothing_launched(
    aws: Aws, amis: SeededAmis
) -> None:
    clock = FakeClock()
    launcher = _launcher(aws)
    request = _request(aws, ["m5.large", "c5.large"])

    def answered_late(event_name: str = "", **_: object) -> None:
        # Runs after moto has answered the request (both ``before-send``): the answer took 60 s.
        if event_name.endswith(".CreateFleet"):
            clock.advance(60)

    aws.clients.ec2.meta.events.register("before-send", answered_late)
    try:
        with deadline_scope(Deadline(clock() + 30, clock)), pytest.raises(LaunchError) as failure:
            launcher.launch(request)
    finally:
        aws.clients.ec2.meta.events.unregister("before-send", answered_late)

    assert failure.value.may_have_launched
    assert FailureKind.DEADLINE_EXCEEDED in {f.kind for f in failure.value.failures}
    # The instance exists: launching the claim again finds it instead of launching a second one.
    _STRICT[0].consistency.settle()
    again = launcher.launch(request)
    assert _instance_tags(aws, again.instance_id)[NODECLAIM_TAG] == "claim-1"
    assert len(aws.fleet.requests) == 1


def test_each_claim_gets_its_own_create_fleet_tagged_with_its_id_at_launch(
    aws: Aws, amis: SeededAmis
) -> None:
    tagging_calls: list[object] = []
    aws.clients.ec2.meta.events.register(
        "before-call.ec2.CreateTags", lambda **kwargs: tagging_calls.append(kwargs)
    )
    requests = [_request(aws, ["m5.large", "c5.large"], claim=f"claim-{i}") for i in range(3)]
    results = _launcher(aws).launch_many(requests)

    assert [r["ClientToken"] for r in aws.fleet.requests] == ["claim-0", "claim-1", "claim-2"]
    for sent, request in zip(aws.fleet.requests, requests, strict=True):
        assert sent["TargetCapacitySpecification"]["TotalTargetCapacity"] == 1
        for spec in sent["TagSpecifications"]:
            assert {t["Key"]: t["Value"] for t in spec["Tags"]}[NODECLAIM_TAG] == request.nodeclaim
    assert tagging_calls == []  # nothing is left to tag after the launch
    launched = [r for r in results if isinstance(r, LaunchedInstance)]
    assert len({r.instance_id for r in launched}) == 3
    for result in launched:
        assert _instance_tags(aws, result.instance_id)[NODECLAIM_TAG] == result.nodeclaim


def test_launch_templates_are_created_once_per_ami_and_carry_the_user_data(
    aws: Aws, amis: SeededAmis
) -> None:
    nc = node_class(kubelet={"maxPods": 42})
    taints = (Taint("dedicated", "NoSchedule", "ml"),)
    startup = (Taint("example.com/not-ready", "NoExecute"),)
    launcher = _launcher(aws)
    for claim in ("claim-1", "claim-2"):
        launcher.launch(
            _request(
                aws, ["m5.large", "m6g.large"], claim=claim, nc=nc, taints=taints, startup_taints=startup
            )
        )
    templates = aws.clients.ec2.describe_launch_templates()["LaunchTemplates"]
    assert len(templates) == 2  # one per architecture, reused by the second claim
    configs = aws.fleet.requests[0]["LaunchTemplateConfigs"]
    by_type = {
        o["InstanceType"]: c["LaunchTemplateSpecification"]["LaunchTemplateName"]
        for c in configs
        for o in c["Overrides"]
    }
    assert by_type["m5.large"] != by_type["m6g.large"]

    version = aws.clients.ec2.describe_launch_template_versions(LaunchTemplateName=by_type["m6g.large"])
    data = version["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["ImageId"] == amis.ids[("arm64", "standard")]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    root = data["BlockDeviceMappings"][0]["Ebs"]
    assert (root["VolumeSize"], root["VolumeType"], root["Encrypted"]) == (20, "gp3", True)
    # volumes, network interfaces and spot requests are tagged through the template: an instant
    # CreateFleet cannot tag them itself
    by_kind = {spec["ResourceType"]: spec["Tags"] for spec in data["TagSpecifications"]}
    for kind in ("volume", "network-interface", "spot-instances-request"):
        assert {t["Key"]: t["Value"] for t in by_kind[kind]}[CLUSTER_TAG] == CLUSTER
    message = email.message_from_string(base64.b64decode(data["UserData"]).decode())
    [nodeconfig] = [
        yaml.safe_load(p.get_payload())
        for p in message.get_payload()
        if p.get_content_subtype() == "node.eks.aws"
    ]
    kubelet = nodeconfig["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 42
    assert {"key": "dedicated", "value": "ml", "effect": "NoSchedule"} in kubelet["config"][
        "registerWithTaints"
    ]
    assert {"key": "example.com/not-ready", "effect": "NoExecute"} in kubelet["config"]["registerWithTaints"]
    [labels_flag] = [f for f in kubelet["flags"] if f.startswith("--node-labels=")]
    labels = dict(pair.split("=") for pair in labels_flag.removeprefix("--node-labels=").split(","))
    assert labels == {"team": "ml", wk.NODEPOOL: "general", wk.CAPACITY_TYPE: "spot"}
    assert nodeconfig["spec"]["cluster"]["name"] == CLUSTER


def test_a_launch_template_deleted_meanwhile_is_created_again(aws: Aws, amis: SeededAmis) -> None:
    # Garbage collection deletes templates no live instance uses; a warm launcher still remembers the name.
    launcher = _launcher(aws)
    launcher.launch(_request(aws, ["m5.large"], claim="claim-1"))
    [template] = aws.clients.ec2.describe_launch_templates()["LaunchTemplates"]
    aws.clients.ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])

    launched = launcher.launch(_request(aws, ["m5.large"], claim="claim-2"))

    assert launched.instance_id and launched.launch_template == template["LaunchTemplateName"]
    [again] = aws.clients.ec2.describe_launch_templates()["LaunchTemplates"]
    assert again["LaunchTemplateName"] == template["LaunchTemplateName"]
    assert again["LaunchTemplateId"] != template["LaunchTemplateId"]
