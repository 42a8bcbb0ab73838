"""Capacity reservations against moto: discovery, reserved offerings, launches into them, and refusals."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fleetwright.aws.capacityreservations import (
    EXPIRING,
    ReservationAvailability,
    list_capacity_reservations,
)
from fleetwright.aws.fleet import FleetLauncher
from fleetwright.aws.instances import describe_instances
from fleetwright.aws.nodeclass import NodeClassResolver
from fleetwright.aws.provider import AwsProvider
from fleetwright.cloud.launch import LaunchRequest
from fleetwright.local.aws_fakes import CapacityReservations
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from tests.aws.faults import FailCall
from tests.aws.strict import StrictEc2
from tests.support.aws import CLUSTER, REGION, Aws, SeededAmis, node_class

TYPE = "m5.xlarge"
ZONE = "us-east-1a"


@pytest.fixture
def crs(aws: Aws) -> CapacityReservations:
    fake = CapacityReservations()
    fake.install(aws.clients.ec2)
    return fake


@pytest.fixture
def counts() -> ReservationAvailability:
    return ReservationAvailability()


@pytest.fixture(autouse=True)
def _settled(strict_ec2: StrictEc2) -> Iterator[None]:
    _STRICT.append(strict_ec2)
    yield
    _STRICT.clear()


_STRICT: list[StrictEc2] = []


def _reserved_class(*terms: dict[str, Any]) -> EC2NodeClass:
    return node_class(capacityReservationSelectorTerms=list(terms))


def _provider(aws: Aws, counts: ReservationAvailability) -> AwsProvider:
    return AwsProvider(
        aws.cluster, REGION, clients=aws.clients, unavailable=aws.unavailable, reservations=counts
    )


def _request(
    provider: AwsProvider, nc: EC2NodeClass, capacity_types: tuple[str, ...], claim: str = "claim-1"
) -> LaunchRequest:
    catalog = {t.name: t for t in provider.instance_types(nc)}
    return LaunchRequest(
        nodeclaim=claim,
        nodepool="reserved",
        instance_types=(catalog[TYPE], catalog["m5.2xlarge"]),
        capacity_types=capacity_types,
        labels={"team": "ml"},
        node_class=nc,
        node_class_name="default",
    )


def _launcher(aws: Aws, counts: ReservationAvailability) -> FleetLauncher:
    return FleetLauncher(
        aws.clients,
        CLUSTER,
        NodeClassResolver(aws.clients, aws.cluster),
        unavailable=aws.unavailable,
        reservations=counts,
    )


def _template_params(aws: Aws) -> dict[str, dict[str, Any]]:
    """What the code asked CreateLaunchTemplate for, per template name (moto rewrites some fields)."""
    return dict(_CREATED)


_CREATED: dict[str, dict[str, Any]] = {}


@pytest.fixture(autouse=True)
def _record_templates(aws: Aws) -> Iterator[None]:
    def record(params: dict[str, Any], **_: Any) -> None:
        _CREATED[str(params["LaunchTemplateName"])] = dict(params["LaunchTemplateData"])

    aws.clients.ec2.meta.events.register("provide-client-params.ec2.CreateLaunchTemplate", record)
    yield
    _CREATED.clear()


# ------------------------------------------------------------------------------------------ discovery


def test_selector_terms_find_active_reservations_by_id_tags_owner_and_match_criteria(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability
) -> None:
    by_id = crs.add(TYPE, ZONE, 2)
    tagged = crs.add("c5.large", "us-east-1b", 1, tags={"team": "ml"}, match="open")
    crs.add("c5.large", "us-east-1b", 1, tags={"team": "ml"}, owner_id="210987654321")
    crs.add(TYPE, ZONE, 3, tags={"team": "ml"}, state="cancelled")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    crs.add(TYPE, ZONE, 3, tags={"team": "ml"}, end=past)
    nc = _reserved_class(
        {"id": by_id}, {"tags": {"team": "ml"}, "ownerID": crs.owner_id, "instanceMatchCriteria": "open"}
    )

    found = list_capacity_reservations(
        aws.clients, nc.spec.capacity_reservation_selector_terms, availability=counts
    )

    assert [(r.id, r.instance_type, r.zone, r.available) for r in found] == [
        (by_id, TYPE, ZONE, 2),
        (tagged, "c5.large", "us-east-1b", 1),
    ]
    assert all(r.reservation_type == "default" and r.state == "active" for r in found)
    assert found[1].instance_match_criteria == "open"
    # A minute's cache: asking again does not call EC2.
    calls = crs.calls
    list_capacity_reservations(aws.clients, nc.spec.capacity_reservation_selector_terms, availability=counts)
    assert crs.calls == calls


def test_an_unknown_reservation_id_selects_nothing(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability
) -> None:
    nc = _reserved_class({"id": "cr-0123456789abcdef0"})
    assert list_capacity_reservations(aws.clients, nc.spec.capacity_reservation_selector_terms) == []


def test_a_capacity_block_within_forty_minutes_of_its_end_is_expiring_and_offers_nothing(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=30)
    rid = crs.add(TYPE, ZONE, 4, reservation_type="capacity-block", end=soon)
    nc = _reserved_class({"id": rid})
    [found] = list_capacity_reservations(aws.clients, nc.spec.capacity_reservation_selector_terms)
    assert found.state == EXPIRING
    assert found.found().reservation_type == "capacity-block"
    catalog = {t.name: t for t in _provider(aws, counts).instance_types(nc)}
    [offering] = [o for o in catalog[TYPE].offerings if o.capacity_type == "reserved"]
    assert not offering.available


def test_a_reservation_adds_a_nearly_free_reserved_offering_with_its_labels(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 3)
    catalog = {t.name: t for t in _provider(aws, counts).instance_types(_reserved_class({"id": rid}))}
    [offering] = [o for o in catalog[TYPE].offerings if o.capacity_type == "reserved"]
    ondemand = min(o.price for o in catalog[TYPE].offerings if o.capacity_type == "on-demand")
    assert offering.zone == ZONE and offering.available and offering.reservation_capacity == 3
    assert 0 < offering.price < ondemand / 1_000_000
    assert offering.reservation_labels() == {
        wk.CAPACITY_RESERVATION_ID: rid,
        wk.CAPACITY_RESERVATION_TYPE: "default",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
    }
    # Node classes without reservation terms get no reserved offerings.
    plain = {t.name: t for t in _provider(aws, counts).instance_types(node_class())}
    assert all(o.capacity_type != "reserved" for o in plain[TYPE].offerings)


# ---------------------------------------------------------------------------------------------- launch


def test_a_reserved_launch_targets_the_reservation_and_labels_the_instance(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 2)
    nc = _reserved_class({"id": rid})
    provider = _provider(aws, counts)
    request = _request(provider, nc, ("reserved", "on-demand"))

    launched = _launcher(aws, counts).launch(request)

    [sent] = aws.fleet.requests
    assert sent["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "on-demand",
    }
    assert sent["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    [config] = sent["LaunchTemplateConfigs"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]] == [(TYPE, ZONE)]
    data = _template_params(aws)[config["LaunchTemplateSpecification"]["LaunchTemplateName"]]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": rid},
    }
    assert "InstanceMarketOptions" not in data
    assert launched.capacity_type == "reserved"
    assert (launched.instance_type, launched.zone) == (TYPE, ZONE)
    assert launched.labels == {
        wk.CAPACITY_RESERVATION_ID: rid,
        wk.CAPACITY_RESERVATION_TYPE: "default",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
        wk.INSTANCE_TENANCY: "default",
    }
    assert crs.reservations[rid]["AvailableInstanceCount"] == 1
    assert counts.available(rid) == 1
    _STRICT[0].consistency.settle()
    [instance] = describe_instances(aws.clients, CLUSTER, [launched.instance_id]).values()
    assert instance.capacity_type == "reserved"
    assert instance.capacity_reservation_id == rid


def test_a_capacity_block_launch_uses_the_capacity_block_market(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    rid = crs.add(TYPE, ZONE, 1, reservation_type="capacity-block", end=later)
    nc = _reserved_class({"id": rid})
    launched = _launcher(aws, counts).launch(_request(_provider(aws, counts), nc, ("reserved",)))

    [sent] = aws.fleet.requests
    assert sent["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in sent and "SpotOptions" not in sent
    [config] = sent["LaunchTemplateConfigs"]
    data = _template_params(aws)[config["LaunchTemplateSpecification"]["LaunchTemplateName"]]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert launched.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"


def test_launches_outside_reservations_stay_out_of_open_ones(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 2, match="open")
    nc = _reserved_class({"id": rid})
    launched = _launcher(aws, counts).launch(_request(_provider(aws, counts), nc, ("on-demand",)))
    [sent] = aws.fleet.requests
    [config] = sent["LaunchTemplateConfigs"]
    data = _template_params(aws)[config["LaunchTemplateSpecification"]["LaunchTemplateName"]]
    assert data["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}
    assert launched.capacity_type == "on-demand"
    assert not wk.CAPACITY_RESERVATION_LABELS & set(launched.labels)
    assert crs.reservations[rid]["AvailableInstanceCount"] == 2


def test_a_full_reservation_is_marked_unavailable_and_the_claim_falls_back_to_on_demand_once(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 1)
    nc = _reserved_class({"id": rid})
    provider = _provider(aws, counts)
    request = _request(provider, nc, ("reserved", "on-demand"))
    # Someone else's launch takes the last slot after Fleetwright listed the reservation.
    crs.reservations[rid]["AvailableInstanceCount"] = 0

    launched = _launcher(aws, counts).launch(request)

    first, second = aws.fleet.requests
    assert [o["InstanceType"] for c in first["LaunchTemplateConfigs"] for o in c["Overrides"]] == [TYPE]
    names = [c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in second["LaunchTemplateConfigs"]]
    assert all(
        "CapacityReservationTarget" not in _template_params(aws)[n]["CapacityReservationSpecification"]
        for n in names
    )
    assert launched.capacity_type == "on-demand"
    assert not wk.CAPACITY_RESERVATION_LABELS & set(launched.labels)
    assert counts.available(rid) == 0
    assert aws.unavailable.is_unavailable(TYPE, ZONE, "reserved")
    # One instance for the claim, however many calls it took.
    _STRICT[0].consistency.settle()
    tagged = aws.clients.ec2.describe_instances(
        Filters=[{"Name": "tag:fleetwright.io/nodeclaim", "Values": ["claim-1"]}]
    )["Reservations"]
    assert sum(len(r["Instances"]) for r in tagged) == 1
    # The next listing of instance types offers the reservation as unavailable.
    catalog = {t.name: t for t in provider.instance_types(nc)}
    [offering] = [o for o in catalog[TYPE].offerings if o.capacity_type == "reserved"]
    assert not offering.available


def test_a_reserved_only_claim_with_a_full_reservation_fails_without_launching(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 1)
    nc = _reserved_class({"id": rid})
    request = _request(_provider(aws, counts), nc, ("reserved",))
    crs.reservations[rid]["AvailableInstanceCount"] = 0

    from fleetwright.cloud.errors import LaunchError

    with pytest.raises(LaunchError) as raised:
        _launcher(aws, counts).launch(request)
    assert "ReservationCapacityExceeded" in raised.value.codes
    assert not raised.value.may_have_launched
    assert len(aws.fleet.requests) == 1


def test_a_whole_call_refusal_marks_every_offered_reservation_unavailable(
    aws: Aws, crs: CapacityReservations, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    rid = crs.add(TYPE, ZONE, 3)
    nc = _reserved_class({"id": rid})
    request = _request(_provider(aws, counts), nc, ("reserved", "on-demand"))
    refused: list[str] = []

    def refuse_reserved(params: dict[str, Any], **_: Any) -> None:
        names = [
            c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in params["LaunchTemplateConfigs"]
        ]
        if any(
            "CapacityReservationTarget" in _CREATED[n].get("CapacityReservationSpecification", {})
            for n in names
        ):
            refused.append("yes")
            raise ClientError(
                {
                    "Error": {"Code": "ReservationCapacityExceeded", "Message": "no capacity left"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "CreateFleet",
            )

    aws.clients.ec2.meta.events.register_first("provide-client-params.ec2.CreateFleet", refuse_reserved)
    launched = _launcher(aws, counts).launch(request)
    assert refused == ["yes"]
    assert launched.capacity_type == "on-demand"
    assert counts.available(rid) == 0


# ------------------------------------------------------------------------------------- the fake is strict


def _template_for(aws: Aws, rid: str, market: str | None = None) -> str:
    data: dict[str, Any] = {
        "ImageId": "ami-12345678",
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": rid},
        },
    }
    if market:
        data["InstanceMarketOptions"] = {"MarketType": market}
    name = f"lt-{rid}-{market or 'none'}"
    aws.clients.ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)
    return name


def _fleet(aws: Aws, template: str, instance_type: str, zone: str, kind: str = "on-demand") -> dict[str, Any]:
    response: dict[str, Any] = aws.clients.ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": kind},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": instance_type,
                        "AvailabilityZone": zone,
                        "SubnetId": aws.subnets["a-large"],
                    }
                ],
            }
        ],
    )
    return response


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("unknown reservation", "InvalidCapacityReservationId.NotFound"),
        ("other type", "InvalidParameterValue"),
        ("other zone", "InvalidParameterValue"),
        ("capacity-block market", "InvalidParameterValue"),
        ("full", "ReservationCapacityExceeded"),
    ],
)
def test_ec2_refuses_launches_a_reservation_cannot_take(
    aws: Aws, crs: CapacityReservations, case: str, code: str
) -> None:
    rid = crs.add(TYPE, ZONE, 0 if case == "full" else 1)
    target = "cr-0000000000000ffff" if case == "unknown reservation" else rid
    template = _template_for(aws, target, "capacity-block" if case == "capacity-block market" else None)
    instance_type = "c5.large" if case == "other type" else TYPE
    zone = "us-east-1b" if case == "other zone" else ZONE
    answer = _fleet(aws, template, instance_type, zone)
    assert answer["Instances"] == []
    assert [e["ErrorCode"] for e in answer["Errors"]] == [code]


def test_describe_refuses_unknown_ids_and_max_results_with_ids(aws: Aws, crs: CapacityReservations) -> None:
    rid = crs.add(TYPE, ZONE, 1)
    with pytest.raises(ClientError) as missing:
        aws.clients.ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0000000000000ffff"])
    assert missing.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"
    with pytest.raises(ClientError) as combined:
        aws.clients.ec2.describe_capacity_reservations(CapacityReservationIds=[rid], MaxResults=10)
    assert combined.value.response["Error"]["Code"] == "InvalidParameterCombination"


def test_when_ec2_cannot_list_reservations_the_node_class_offers_no_reserved_capacity_this_time(
    aws: Aws, counts: ReservationAvailability, amis: SeededAmis
) -> None:
    failing = FailCall("DescribeCapacityReservations", "UnauthorizedOperation")
    failing.install(aws.clients.ec2)  # before the fake: it answers first
    crs = CapacityReservations()
    crs.install(aws.clients.ec2)
    rid = crs.add(TYPE, ZONE, 2)
    nc = _reserved_class({"id": rid})
    catalog = {t.name: t for t in _provider(aws, counts).instance_types(nc)}
    assert failing.calls == 1
    assert all(o.capacity_type != "reserved" for o in catalog[TYPE].offerings)
    assert any(o.capacity_type == "on-demand" for o in catalog[TYPE].offerings)
    # The next listing asks again and finds it.
    catalog = {t.name: t for t in _provider(aws, counts).instance_types(nc)}
    assert [o.reservation_id for o in catalog[TYPE].offerings if o.capacity_type == "reserved"] == [rid]


@pytest.mark.parametrize(
    ("spec", "market", "code"),
    [
        ({"CapacityReservationPreference": "reserved"}, None, "InvalidParameterValue"),
        ({"CapacityReservationPreference": "capacity-reservations-only"}, None, "MissingParameter"),
        (
            {
                "CapacityReservationPreference": "open",
                "CapacityReservationTarget": {"CapacityReservationId": "cr-00000000000000001"},
            },
            None,
            "InvalidParameterCombination",
        ),
        (
            {"CapacityReservationTarget": {"CapacityReservationId": "reservation-1"}},
            None,
            "InvalidCapacityReservationId.Malformed",
        ),
        ({"CapacityReservationPreference": "none"}, "capacity-block", "InvalidParameterCombination"),
    ],
)
def test_strict_ec2_refuses_malformed_reservation_templates(
    aws: Aws, spec: dict[str, Any], market: str | None, code: str
) -> None:
    data: dict[str, Any] = {"ImageId": "ami-12345678", "CapacityReservationSpecification": spec}
    if market:
        data["InstanceMarketOptions"] = {"MarketType": market}
    with pytest.raises(ClientError) as refused:
        aws.clients.ec2.create_launch_template(LaunchTemplateName="bad-reservation", LaunchTemplateData=data)
    assert refused.value.response["Error"]["Code"] == code
