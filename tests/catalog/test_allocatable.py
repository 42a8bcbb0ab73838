"""EKS allocatable formulas (numbers worked out by hand from the EKS AMI / Karpenter rules)."""

from __future__ import annotations

import math

import pytest

from fleetwright.model.allocatable import (
    allocatable_for,
    eni_limited_pods,
    instance_type_allocatable,
    kube_reserved_cpu,
    node_memory,
)
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.kubelet import KubeletOverrides

MI = 2**20
GI = 2**30

M5_LARGE = {"cpu": 2000, "memory": 8192 * MI, "pods": 29}
M5_LARGE_ENI = (3, 10)
M5_24XLARGE = {"cpu": 96000, "memory": 393216 * MI}
M5_24XLARGE_ENI = (15, 50)


def test_m5_large_matches_eks():
    allocatable = allocatable_for(M5_LARGE, None, M5_LARGE_ENI)
    assert allocatable["pods"] == 29
    assert allocatable["cpu"] == 1930  # 2000m - (6% of core 1 = 60m + 1% of core 2 = 10m)
    # 8192Mi - ceil(7.5% = 614.4)Mi VM overhead - (11*29+255)Mi kube-reserved - 100Mi eviction
    assert allocatable["memory"] == (8192 - 615 - 574 - 100) * MI == 7_238_320_128
    # 20Gi root volume - 1Gi kube-reserved - 10% eviction
    assert allocatable["ephemeral-storage"] == 20 * GI - 1 * GI - 2 * GI


def test_large_instance():
    allocatable = allocatable_for(M5_24XLARGE, None, M5_24XLARGE_ENI)
    assert allocatable["pods"] == 15 * 49 + 2 == 737
    # 60 + 10 + 2*5 + 92 cores * 2.5m
    assert allocatable["cpu"] == 96000 - (60 + 10 + 10 + 230)
    overhead_mib = math.ceil(393216 * 0.075)
    assert allocatable["memory"] == (393216 - overhead_mib - (11 * 737 + 255) - 100) * MI


@pytest.mark.parametrize(
    ("cores", "reserved"),
    [(1, 60), (2, 70), (3, 75), (4, 80), (8, 90), (48, 190)],
)
def test_kube_reserved_cpu_ladder(cores, reserved):
    assert kube_reserved_cpu(cores * 1000) == reserved


def test_node_memory_matches_karpenter_examples():
    # Values from Karpenter's own memory tests (8 GiB, x86 and Graviton with its 64Mi of CMA memory).
    assert node_memory(8192 * MI) == 7945060352
    assert node_memory(8192 * MI, arch="arm64") == 7883194368
    assert node_memory(4096 * MI, arch="arm64", overhead_percent=0.0) == 4227858432


def test_unknown_eni_limits_use_capacity_pods():
    allocatable = allocatable_for({"cpu": 4000, "memory": 16 * GI, "pods": 58})
    assert allocatable["pods"] == 58
    assert allocatable["memory"] == (16384 - math.ceil(16384 * 0.075) - (11 * 58 + 255) - 100) * MI


def test_eni_limited_pods_without_interfaces():
    assert eni_limited_pods(0, 10) == 0
    assert eni_limited_pods(2, 4) == 8


def test_max_pods_override_keeps_eni_based_memory_reservation():
    allocatable = allocatable_for(M5_LARGE, KubeletOverrides(max_pods=110), M5_LARGE_ENI)
    assert allocatable["pods"] == 110
    assert allocatable["memory"] == allocatable_for(M5_LARGE, None, M5_LARGE_ENI)["memory"]


def test_pods_per_core_caps_max_pods():
    assert allocatable_for(M5_LARGE, KubeletOverrides(pods_per_core=10), M5_LARGE_ENI)["pods"] == 20
    assert allocatable_for(M5_LARGE, KubeletOverrides(pods_per_core=50), M5_LARGE_ENI)["pods"] == 29
    both = KubeletOverrides(max_pods=200, pods_per_core=40)
    assert allocatable_for(M5_LARGE, both, M5_LARGE_ENI)["pods"] == 80


def test_kube_reserved_and_system_reserved_override_per_resource():
    kubelet = KubeletOverrides(kube_reserved={"memory": 1 * GI}, system_reserved={"cpu": 100})
    allocatable = allocatable_for(M5_LARGE, kubelet, M5_LARGE_ENI)
    assert allocatable["memory"] == (8192 - 615 - 1024 - 100) * MI
    assert allocatable["cpu"] == 2000 - 70 - 100  # default kube-reserved cpu kept, system-reserved added


def test_eviction_hard_percent_of_node_memory():
    kubelet = KubeletOverrides(eviction_hard={"memory.available": "5%", "nodefs.available": "15%"})
    allocatable = allocatable_for(M5_LARGE, kubelet, M5_LARGE_ENI)
    node = (8192 - 615) * MI
    assert allocatable["memory"] == node - 574 * MI - math.ceil(node * 0.05)
    assert allocatable["ephemeral-storage"] == 20 * GI - 1 * GI - math.ceil(20 * GI * 0.15)


def test_eviction_absolute_and_soft_take_the_larger():
    kubelet = KubeletOverrides(
        eviction_hard={"memory.available": "200Mi"}, eviction_soft={"memory.available": "500Mi"}
    )
    allocatable = allocatable_for(M5_LARGE, kubelet, M5_LARGE_ENI)
    assert allocatable["memory"] == (8192 - 615 - 574 - 500) * MI


def test_eviction_hundred_percent_disables_threshold():
    kubelet = KubeletOverrides(eviction_hard={"memory.available": "100%"})
    allocatable = allocatable_for(M5_LARGE, kubelet, M5_LARGE_ENI)
    assert allocatable["memory"] == (8192 - 615 - 574) * MI


def test_extended_resources_are_allocatable_in_full():
    capacity = {**M5_LARGE, "nvidia.com/gpu": 4, "vpc.amazonaws.com/pod-eni": 9}
    allocatable = allocatable_for(capacity, None, M5_LARGE_ENI)
    assert allocatable["nvidia.com/gpu"] == 4
    assert allocatable["vpc.amazonaws.com/pod-eni"] == 9


def test_reservations_never_go_negative():
    tiny = {"cpu": 1000, "memory": 256 * MI}  # 256Mi - 20Mi overhead < 343Mi kube-reserved
    allocatable = allocatable_for(tiny, None, (2, 4))
    assert allocatable["memory"] == 0
    assert allocatable["cpu"] == 940


def test_instance_type_allocatable_uses_arch_and_respects_verbatim():
    graviton = InstanceType(
        "m6g.large",
        {"cpu": 2000, "memory": 8192 * MI},
        {},
        {"kubernetes.io/arch": "arm64"},
        eni_limits=(3, 10),
    )
    kubelet = KubeletOverrides(max_pods=50)
    arm = instance_type_allocatable(graviton, kubelet)
    assert arm["memory"] == (8192 - 64 - math.ceil(8128 * 0.075) - 574 - 100) * MI
    verbatim = InstanceType("x.large", {"cpu": 2000}, {"cpu": 1500}, explicit_allocatable=True)
    assert instance_type_allocatable(verbatim, kubelet) == {"cpu": 1500}
