"""The built-in us-east-1 catalog shipped in the package."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES

from fleetwright.catalog import builtin_catalog, catalog_to_json, load_catalog, ondemand_prices, vpc_limits
from fleetwright.catalog.generate import region_catalog
from fleetwright.catalog.loader import DATA_DIR

SUPPLEMENT = json.loads((DATA_DIR / "supplement-us-east-1.json").read_text())
# moto's data plus the types rebuilt from Karpenter's tables (data/README.md)
ALL_TYPES = {**{e["InstanceType"]: e for e in SUPPLEMENT["instanceTypes"]}, **INSTANCE_TYPES}


@pytest.fixture(scope="module")
def catalog():
    return {it.name: it for it in builtin_catalog("us-east-1")}


@pytest.fixture(scope="module")
def moto_zones():
    zones = defaultdict(set)
    for row in INSTANCE_TYPE_OFFERINGS["availability-zone"]["us-east-1"]:
        zones[row["InstanceType"]].add(row["Location"])
    for name, listed in SUPPLEMENT["zones"].items():
        zones[name].update(listed)
    return zones


def test_every_priced_linux_type_is_there(catalog, moto_zones):
    prices = ondemand_prices("us-east-1")
    expected = {
        name
        for name in moto_zones
        if name in prices
        and set(ALL_TYPES[name]["ProcessorInfo"]["SupportedArchitectures"]) & {"x86_64", "arm64"}
    }
    assert len(expected) > 1000
    assert set(catalog) == expected


def test_m5_large(catalog, moto_zones):
    m5 = catalog["m5.large"]
    on_demand = {o.zone: o.price for o in m5.offerings if o.capacity_type == "on-demand"}
    assert set(on_demand) == moto_zones["m5.large"]
    assert set(on_demand.values()) == {0.096}
    assert m5.allocatable["cpu"] == 1930
    assert m5.allocatable["pods"] == 29
    assert m5.labels["karpenter.k8s.aws/instance-hypervisor"] == "nitro"
    assert m5.labels["kubernetes.io/arch"] == "amd64"


def test_offerings_follow_ec2_zones_and_usage_classes(catalog, moto_zones):
    assert len(catalog) > 500
    for name, it in catalog.items():
        on_demand = {o.zone for o in it.offerings if o.capacity_type == "on-demand"}
        spot = {o.zone for o in it.offerings if o.capacity_type == "spot"}
        assert on_demand == moto_zones[name], name
        supports_spot = "spot" in ALL_TYPES[name]["SupportedUsageClasses"]
        assert spot == (on_demand if supports_spot else set()), name


def test_spot_estimates_are_cheaper_and_vary(catalog):
    ratios = []
    for it in catalog.values():
        on_demand = {o.zone: o.price for o in it.offerings if o.capacity_type == "on-demand"}
        for offering in it.offerings:
            if offering.capacity_type == "spot":
                ratio = offering.price / on_demand[offering.zone]
                assert 0.29 < ratio < 0.46, (it.name, offering)
                ratios.append(ratio)
    assert len(set(ratios)) > 100  # not one flat discount
    assert len({o.price for o in catalog["m5.large"].offerings if o.capacity_type == "spot"}) > 1


def test_graviton_gpu_and_neuron_types(catalog):
    assert catalog["m6g.xlarge"].labels["kubernetes.io/arch"] == "arm64"
    assert catalog["g4dn.xlarge"].capacity["nvidia.com/gpu"] == 1
    assert catalog["g4dn.xlarge"].labels["karpenter.k8s.aws/instance-gpu-name"] == "t4"
    assert catalog["inf2.xlarge"].capacity["aws.amazon.com/neuron"] >= 1
    assert catalog["m5.24xlarge"].allocatable["pods"] == 737


def test_types_moto_lacks_come_from_karpenters_tables(catalog):
    """Karpenter's GPU examples need p3 (NVIDIA V100) and g4ad (AMD Radeon Pro V520)."""
    p3 = catalog["p3.8xlarge"]
    assert p3.capacity["nvidia.com/gpu"] == 4
    assert p3.labels["karpenter.k8s.aws/instance-gpu-name"] == "v100"
    assert p3.labels["karpenter.k8s.aws/instance-hypervisor"] == "xen"
    assert p3.labels["karpenter.k8s.aws/instance-memory"] == "249856"
    assert "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz" not in p3.labels  # not in the table
    g4ad = catalog["g4ad.xlarge"]
    assert g4ad.capacity["amd.com/gpu"] == 1
    assert g4ad.labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "amd"
    assert g4ad.labels["karpenter.k8s.aws/instance-local-nvme"] == "150"
    assert g4ad.labels["karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"] == "3000"
    assert g4ad.allocatable["pods"] == 8
    assert {o.zone for o in g4ad.offerings} == {o.zone for o in catalog["g4dn.xlarge"].offerings}


def test_labels_karpenter_v1_14_adds(catalog):
    m5 = catalog["m5.large"].labels
    assert m5["karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"] == "3100"
    assert m5["karpenter.k8s.aws/instance-encryption-in-transit-supported"] == "false"
    assert m5["karpenter.k8s.aws/instance-capability-flex"] == "false"
    assert m5["karpenter.k8s.aws/nitro-sandbox"] == "false"
    assert catalog["m7i-flex.large"].labels["karpenter.k8s.aws/instance-capability-flex"] == "true"
    assert (
        catalog["c6in.large"].labels["karpenter.k8s.aws/instance-encryption-in-transit-supported"] == "true"
    )
    assert catalog["m5.large"].labels["karpenter.k8s.aws/nitro-sandbox"] == "false"
    assert catalog["m5.xlarge"].labels["karpenter.k8s.aws/nitro-sandbox"] == "true"
    assert catalog["m5.metal"].labels["karpenter.k8s.aws/instance-hypervisor"] == ""


def test_offerings_carry_zone_ids(catalog):
    zone_ids = {o.zone: o.zone_id for it in catalog.values() for o in it.offerings}
    assert zone_ids["us-east-1a"] == "use1-az6"
    assert zone_ids["us-east-1b"] == "use1-az1"
    assert len(set(zone_ids.values())) == len(zone_ids) == 6


def test_pod_eni_follows_vpc_limits(catalog):
    limits = vpc_limits()
    assert len(catalog) > 500 and any(it.capacity.get("vpc.amazonaws.com/pod-eni") for it in catalog.values())
    for name, it in catalog.items():
        entry = limits.get(name, {})
        expected = entry.get("branch_interfaces") if entry.get("trunking") else None
        assert it.capacity.get("vpc.amazonaws.com/pod-eni") == (expected or None), name


def test_unknown_region_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"eu-west-9.*available: us-east-1"):
        builtin_catalog("eu-west-9")


def test_shipped_file_matches_the_generator():
    zones = defaultdict(list)
    for row in INSTANCE_TYPE_OFFERINGS["availability-zone"]["us-east-1"]:
        zones[row["InstanceType"]].append(row["Location"])
    kept, _, _ = region_catalog(INSTANCE_TYPES, zones, ondemand_prices("us-east-1"), "us-east-1")
    shipped = json.loads((DATA_DIR / "us-east-1.json").read_text())
    assert catalog_to_json(kept, minimal_labels=True) == shipped


def test_export_and_reload_gives_the_same_catalog(tmp_path, catalog):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(catalog_to_json(catalog.values())))
    again = {it.name: it for it in load_catalog(path)}
    assert again.keys() == catalog.keys()
    for name, it in again.items():
        original = catalog[name]
        assert (it.capacity, it.allocatable, it.labels, it.offerings, it.eni_limits) == (
            original.capacity,
            original.allocatable,
            original.labels,
            original.offerings,
            original.eni_limits,
        ), name
