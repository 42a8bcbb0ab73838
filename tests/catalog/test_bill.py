"""Each part of a node's bill against figures worked out by hand from the cited prices
(layers/fleetwright/catalog/data/README.md): us-east-1 EBS per GB-month, $0.005 per public IPv4 address-hour,
surplus credits per vCPU-hour, baselines from EC2's credit table."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.catalog.bill import (
    NodeBill,
    NodeClassView,
    Volume,
    burst,
    default_volumes,
    ebs_prices_known,
    node_bill,
    node_class_view,
    public_ipv4_per_hour,
    volume_per_hour,
)
from fleetwright.model.ec2nodeclass import EC2NodeClass

HOURS = 730


def nodeclass(**spec: Any) -> EC2NodeClass:
    body: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "role": "demo-node-role",
        **spec,
    }
    return EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "x"},
            "spec": body,
        }
    )


@pytest.mark.parametrize(
    ("volume", "monthly"),
    [
        (Volume("gp3", 20), 20 * 0.08),  # $1.60/month: $0.0022/h, more than a t4g.nano spot
        (Volume("gp3", 100, iops=3000, throughput=125), 8.0),  # the free baseline costs nothing more
        (Volume("gp3", 100, iops=6000, throughput=250), 8.0 + 3000 * 0.005 + 125 * 0.04),
        (Volume("gp2", 50), 50 * 0.10),
        (Volume("io1", 100, iops=5000), 100 * 0.125 + 5000 * 0.065),
        (Volume("io2", 100, iops=40000), 100 * 0.125 + 32000 * 0.065 + 8000 * 0.0455),
        (Volume("io2", 100, iops=70000), 12.5 + 32000 * 0.065 + 32000 * 0.0455 + 6000 * 0.032),
        (Volume("st1", 125), 125 * 0.045),
        (Volume("sc1", 125), 125 * 0.015),
        (Volume("standard", 10), 10 * 0.05),
    ],
)
def test_volume_prices_per_hour(volume: Volume, monthly: float) -> None:
    assert volume_per_hour(volume) == pytest.approx(monthly / HOURS)


def test_other_regions_use_us_east_1_ebs_prices() -> None:
    assert ebs_prices_known("us-east-1") and not ebs_prices_known("eu-west-1")
    assert volume_per_hour(Volume("gp3", 20), "eu-west-1") == volume_per_hour(Volume("gp3", 20))


def test_public_ipv4_address_costs_half_a_cent_an_hour() -> None:
    assert public_ipv4_per_hour() == 0.005
    assert NodeClassView(public_ipv4=True).address_per_hour() == 0.005
    assert NodeClassView().address_per_hour() == 0.0


@pytest.mark.parametrize(
    ("name", "baseline", "rate"),
    [
        ("t4g.nano", 100.0, 0.04),  # 6 credits/h: 2 vCPUs at 5 %
        ("t3.large", 600.0, 0.05),  # 36 credits/h: 2 vCPUs at 30 %
        ("t3a.xlarge", 1600.0, 0.05),  # 96 credits/h: 4 vCPUs at 40 %
        ("t2.2xlarge", 1360.0, 0.05),  # 81.6 credits/h: 8 vCPUs at 17 %
        ("t2.micro", 100.0, 0.05),
    ],
)
def test_burstable_baselines_and_rates(name: str, baseline: float, rate: float) -> None:
    kind = burst(name)
    assert kind is not None
    assert kind.baseline == pytest.approx(baseline) and kind.rate == rate


def test_non_burstable_types_have_no_credits() -> None:
    assert burst("m5.large") is None and burst("c6g.2xlarge") is None
    assert node_bill("m5.large", 0.096, cpu_millicores=2000).credits == 0.0


def test_credits_bill_the_requested_cpu_above_the_baseline() -> None:
    # One pod requesting a whole CPU on a t4g.nano (baseline 0.1 vCPU): 0.9 vCPU-hour of surplus at $0.04.
    assert node_bill("t4g.nano", 0.0013, cpu_millicores=1000).credits == pytest.approx(0.9 * 0.04)
    # Below the baseline the credits earned pay for it.
    assert node_bill("t3.large", 0.0832, cpu_millicores=500).credits == 0.0
    assert node_bill("t3.large", 0.0832, cpu_millicores=1500).credits == pytest.approx(0.9 * 0.05)


def test_the_seed_walkthrough_node_costs_thirty_times_its_instance_price() -> None:
    bill = node_bill("t4g.nano", 0.0013, NodeClassView(public_ipv4=True), cpu_millicores=1000)
    assert bill == NodeBill(0.0013, 20 * 0.08 / HOURS, 0.005, 0.036)
    assert bill.total == pytest.approx(0.0013 + 0.0021918 + 0.005 + 0.036, abs=1e-7)
    assert bill + bill == NodeBill(0.0026, 2 * 20 * 0.08 / HOURS, 0.01, 0.072)


@pytest.mark.parametrize(
    ("family", "volumes"),
    [
        ("AL2023", (Volume("gp3", 20),)),
        ("AL2", (Volume("gp3", 20),)),
        ("Custom", (Volume("gp3", 20),)),
        ("Bottlerocket", (Volume("gp3", 4), Volume("gp3", 20))),
        ("Windows2022", (Volume("gp3", 50),)),
    ],
)
def test_default_volumes_per_ami_family(family: str, volumes: tuple[Volume, ...]) -> None:
    assert default_volumes(family) == volumes


def test_node_class_view_reads_block_device_mappings() -> None:
    view = node_class_view(
        nodeclass(
            blockDeviceMappings=[
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {"volumeSize": "100Gi", "volumeType": "io2", "iops": 4000},
                },
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "50G", "volumeType": "st1"}},
            ]
        )
    )
    # 50G is 46.6 GiB: launched (and billed) as 47 GiB.
    assert view.volumes == (Volume("io2", 100, iops=4000), Volume("st1", 47))
    assert view.volumes_per_hour() == pytest.approx((12.5 + 4000 * 0.065 + 47 * 0.045) / HOURS)


def test_node_class_view_defaults_by_family() -> None:
    assert node_class_view(nodeclass()).volumes == (Volume("gp3", 20),)
    bottlerocket = nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@latest"}])
    assert node_class_view(bottlerocket).volumes_per_hour() == pytest.approx(24 * 0.08 / HOURS)


def test_public_address_follows_the_node_class_then_the_subnets() -> None:
    assert not node_class_view(nodeclass()).public_ipv4  # private subnets assumed
    assert node_class_view(nodeclass(), subnets_public=True).public_ipv4
    assert node_class_view(nodeclass(associatePublicIPAddress=True)).public_ipv4
    assert not node_class_view(nodeclass(associatePublicIPAddress=False), subnets_public=True).public_ipv4
