"""Instance type discovery from (moto's) EC2: capacity, labels, offerings, prices, node class filters."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from fleetwright.aws import instancetypes
from fleetwright.aws.capacityreservations import CapacityReservation
from fleetwright.aws.instancetypes import describe_zone_offerings, list_instance_types, prime_cache
from fleetwright.aws.nodeclass import family_filter
from fleetwright.aws.pricing import ondemand_prices
from fleetwright.aws.ttlcache import clear_all_caches
from fleetwright.aws.unavailable import InMemoryUnavailableOfferings
from fleetwright.catalog.from_ec2 import instance_type_from_ec2
from fleetwright.catalog.loader import ondemand_prices as static_prices
from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType
from tests.support.aws import REGION, Aws, RegionListing, node_class


def _by_name(types: list[InstanceType]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def test_discovers_priced_instance_types_with_well_known_labels(aws: Aws, listing: RegionListing) -> None:
    types = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))

    # Every amd64/arm64 type that EC2 offers in some zone is discovered (all have a spot price here).
    offered = {e["InstanceType"] for e in listing.types if listing.zone_offerings.get(e["InstanceType"])}
    linux = {
        e["InstanceType"]
        for e in listing.types
        if {"x86_64", "arm64"} & set(e["ProcessorInfo"]["SupportedArchitectures"])
    }
    assert set(types) == offered & linux
    assert len(types) > 500
    # Types missing from the on-demand table are offered as spot only.
    unpriced = set(types) - set(static_prices(REGION))
    assert all(o.capacity_type == "spot" for name in unpriced for o in types[name].offerings)

    m5 = types["m5.large"]
    assert m5.labels[wk.ARCH] == "amd64"
    assert m5.labels[wk.INSTANCE_FAMILY] == "m5"
    assert m5.labels[wk.INSTANCE_CPU] == "2"
    assert m5.labels[wk.INSTANCE_MEMORY] == "8192"
    assert m5.capacity["pods"] == 29
    graviton = types["m6g.large"]
    assert graviton.labels[wk.ARCH] == "arm64"
    gpu = types["g5.xlarge"]
    assert gpu.labels[wk.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert gpu.capacity["nvidia.com/gpu"] == 1


def test_offerings_follow_the_zones_ec2_offers_each_type_in(aws: Aws) -> None:
    direct = boto3.client("ec2", region_name=REGION)
    raw: dict[str, set[str]] = {}
    for page in direct.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone"
    ):
        for entry in page["InstanceTypeOfferings"]:
            raw.setdefault(entry["InstanceType"], set()).add(entry["Location"])
    clear_all_caches()  # make the code call EC2 itself, not the session listing
    assert {k: set(v) for k, v in describe_zone_offerings(aws.clients).items()} == raw

    types = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))
    for name in ("m5.large", "c7g.xlarge", "p4d.24xlarge"):
        if name not in types:
            continue
        zones = {(o.zone, o.capacity_type) for o in types[name].offerings}
        assert zones == {(z, ct) for z in raw[name] for ct in ("spot", "on-demand")}


def test_seeded_spot_prices_and_static_on_demand_prices_are_used(aws: Aws) -> None:
    aws.spot_overrides[("m5.large", "us-east-1b")] = 0.0123
    types = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))
    offerings = {(o.zone, o.capacity_type): o.price for o in types["m5.large"].offerings}
    assert offerings[("us-east-1b", "spot")] == 0.0123  # the latest entry, not the hour-old one
    assert offerings[("us-east-1a", "spot")] == aws.spot_price("m5.large", "us-east-1a")
    # moto has no Pricing API: on-demand prices fall back to the shipped table.
    prices, source = ondemand_prices(aws.clients)
    assert source == "static"
    assert offerings[("us-east-1a", "on-demand")] == static_prices(REGION)["m5.large"] == prices["m5.large"]


def test_prices_and_listings_are_cached_between_calls(aws: Aws) -> None:
    list_instance_types(aws.clients, unavailable=aws.unavailable)
    list_instance_types(aws.clients, unavailable=aws.unavailable)
    assert aws.spot.calls == 1


def test_unavailable_offerings_are_reported_unavailable(aws: Aws) -> None:
    aws.unavailable.mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
    m5 = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    status = {(o.zone, o.capacity_type): o.available for o in m5.offerings}
    assert status[("us-east-1a", "spot")] is False
    assert status[("us-east-1a", "on-demand")] is True
    assert status[("us-east-1b", "spot")] is True


def test_node_class_family_filters_architecture_and_accelerator_variants(aws: Aws) -> None:
    every = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))
    al2 = _by_name(
        list_instance_types(
            aws.clients, accept=family_filter(node_class(amiSelectorTerms=[{"alias": "al2@latest"}]))
        )
    )
    bottlerocket = _by_name(
        list_instance_types(
            aws.clients, accept=family_filter(node_class(amiSelectorTerms=[{"alias": "bottlerocket@latest"}]))
        )
    )
    # AL2 publishes no arm64 GPU AMI; Bottlerocket no Neuron AMI.
    arm_gpu = [
        n for n, t in every.items() if t.labels[wk.ARCH] == "arm64" and wk.INSTANCE_GPU_COUNT in t.labels
    ]
    neuron = [n for n, t in every.items() if "aws.amazon.com/neuron" in t.capacity]
    assert arm_gpu and neuron
    assert not set(arm_gpu) & set(al2)
    assert set(arm_gpu) <= set(bottlerocket)
    assert set(neuron) <= set(al2)
    assert not set(neuron) & set(bottlerocket)
    assert "m5.large" in al2 and "m6g.large" in al2


def test_kubelet_settings_of_the_node_class_change_pods_and_allocatable(aws: Aws) -> None:
    nc = node_class(kubelet={"maxPods": 17})
    m5 = _by_name(list_instance_types(aws.clients, accept=family_filter(nc), kubelet=nc.kubelet_overrides()))[
        "m5.large"
    ]
    assert m5.allocatable["pods"] == 17


def test_offerings_carry_the_accounts_zone_ids(aws: Aws) -> None:
    """Zone names map to different zones in each account: the ids come from DescribeAvailabilityZones."""
    zones = aws.clients.ec2.describe_availability_zones()["AvailabilityZones"]
    expected = {z["ZoneName"]: z["ZoneId"] for z in zones}
    types = list_instance_types(aws.clients, unavailable=aws.unavailable)
    seen = {(o.zone, o.zone_id) for t in types for o in t.offerings}
    assert seen and all(zone_id == expected[zone] for zone, zone_id in seen)


def test_windows_family_boots_every_amd64_type_and_no_arm64_type(aws: Aws) -> None:
    every = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))
    windows = _by_name(
        list_instance_types(
            aws.clients, accept=family_filter(node_class(amiSelectorTerms=[{"alias": "windows2022@latest"}]))
        )
    )
    assert set(windows) == {n for n, t in every.items() if t.labels[wk.ARCH] == "amd64"}
    assert "g4dn.xlarge" in windows  # GPU types too: one Windows AMI for all


# -- the converted listing kept between calls ------------------------------------------------------------


def _offering_status(instance_type: InstanceType) -> dict[tuple[str, str], bool]:
    return {(o.zone, o.capacity_type): o.available for o in instance_type.offerings}


def test_an_offering_refused_after_a_first_call_is_unavailable_in_the_next_and_back_when_it_expires(
    aws: Aws,
) -> None:
    clock = [1000.0]
    unavailable = InMemoryUnavailableOfferings(clock=lambda: clock[0])
    before = _by_name(list_instance_types(aws.clients, unavailable=unavailable))["m5.large"]
    unavailable.mark("m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity", ttl=60)

    during = _by_name(list_instance_types(aws.clients, unavailable=unavailable))["m5.large"]
    assert _offering_status(during)[("us-east-1a", "on-demand")] is False
    assert _offering_status(during)[("us-east-1b", "on-demand")] is True
    assert all(_offering_status(before).values())  # what the first call handed out is left as it was

    clock[0] += 61
    after = _by_name(list_instance_types(aws.clients, unavailable=unavailable))["m5.large"]
    assert all(_offering_status(after).values())
    assert after.allocatable == before.allocatable and after.labels == before.labels


def test_a_new_listing_of_instance_types_is_converted_again(aws: Aws, listing: RegionListing) -> None:
    assert (
        "pods" in _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"].capacity
    )
    changed = [
        {**e, "MemoryInfo": {"SizeInMiB": 16384}} if e["InstanceType"] == "m5.large" else e
        for e in listing.types
    ]
    prime_cache(REGION, changed)  # as DescribeInstanceTypes answers once the five minutes are up

    m5 = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    assert m5.labels[wk.INSTANCE_MEMORY] == "16384"


def test_new_spot_prices_are_seen_once_fetched_again(aws: Aws, listing: RegionListing) -> None:
    first = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    aws.spot_overrides[("m5.large", "us-east-1a")] = 0.0077
    kept = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    assert kept.offerings == first.offerings  # prices are kept five minutes, as before

    clear_all_caches()  # the five minutes are up
    prime_cache(REGION, listing.types, listing.zone_offerings)
    fresh = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    prices = {(o.zone, o.capacity_type): o.price for o in fresh.offerings}
    assert prices[("us-east-1a", "spot")] == 0.0077


def test_each_node_class_kubelet_setting_gets_its_own_pods_and_allocatable(aws: Aws) -> None:
    def m5(max_pods: int | None) -> InstanceType:
        nc = node_class(kubelet={"maxPods": max_pods}) if max_pods else node_class()
        found = list_instance_types(aws.clients, kubelet=nc.kubelet_overrides(), unavailable=aws.unavailable)
        return _by_name(found)["m5.large"]

    seventeen = m5(17)
    assert m5(20).allocatable["pods"] == 20
    assert m5(17).allocatable["pods"] == seventeen.allocatable["pods"] == 17
    assert m5(None).allocatable["pods"] == 29


def test_a_reservation_adds_a_reserved_offering_until_it_is_gone(aws: Aws) -> None:
    reservation = CapacityReservation(
        id="cr-0123",
        instance_type="m5.large",
        zone="us-east-1a",
        owner_id="123456789012",
        instance_match_criteria="targeted",
        reservation_type="default",
        interruptible=False,
        available=2,
    )
    plain = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    reserved = _by_name(
        list_instance_types(aws.clients, unavailable=aws.unavailable, reservations=[reservation])
    )["m5.large"]
    assert [o.reservation_id for o in reserved.offerings if o.capacity_type == "reserved"] == ["cr-0123"]
    again = _by_name(list_instance_types(aws.clients, unavailable=aws.unavailable))["m5.large"]
    assert again.offerings == plain.offerings
    assert all(o.capacity_type != "reserved" for o in again.offerings)


def test_a_warm_call_converts_only_the_types_it_must_change(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass of a warm process does not convert the region's ~1,000 types again: only those with an
    unavailable offering or a reservation, whose offerings differ from the kept ones."""
    converted: list[str] = []

    def counting(info: Any, *args: Any) -> InstanceType:
        converted.append(str(info["InstanceType"]))
        return instance_type_from_ec2(info, *args)

    monkeypatch.setattr(instancetypes, "instance_type_from_ec2", counting)
    first = list_instance_types(aws.clients, unavailable=aws.unavailable)
    assert len(converted) >= len(first) > 500

    converted.clear()
    aws.unavailable.mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
    second = list_instance_types(aws.clients, unavailable=aws.unavailable)
    assert converted == ["m5.large"]
    assert [t.name for t in second] == [t.name for t in first]
