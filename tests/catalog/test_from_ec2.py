"""Converting DescribeInstanceTypes entries: capacity and well-known labels."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from moto.ec2.models.instance_types import INSTANCE_TYPES

from fleetwright.catalog.from_ec2 import (
    UnsupportedInstanceTypeError,
    arch_from_name,
    instance_type_from_ec2,
    labels_from_ec2,
)
from fleetwright.catalog.loader import vpc_limits
from fleetwright.model.instancetype import Offering

MI = 2**20
P = "karpenter.k8s.aws/"

# p3.2xlarge as EC2 describes it (moto's stored data no longer lists the p3 family).
P3_2XLARGE: dict[str, Any] = {
    "InstanceType": "p3.2xlarge",
    "Hypervisor": "xen",
    "VCpuInfo": {"DefaultVCpus": 8, "DefaultCores": 4, "DefaultThreadsPerCore": 2},
    "MemoryInfo": {"SizeInMiB": 62464},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
    "GpuInfo": {
        "Gpus": [{"Name": "V100", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 16384}}],
        "TotalGpuMemoryInMiB": 16384,
    },
    "NetworkInfo": {
        "MaximumNetworkInterfaces": 4,
        "Ipv4AddressesPerInterface": 15,
        "DefaultNetworkCardIndex": 0,
        "NetworkCards": [
            {"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 4, "BaselineBandwidthInGbps": 2.5}
        ],
    },
    "EbsInfo": {"EbsOptimizedSupport": "default", "EbsOptimizedInfo": {"MaximumBandwidthInMbps": 1750}},
    "SupportedUsageClasses": ["on-demand", "spot"],
}


def convert(name: str, info: dict[str, Any] | None = None):
    return instance_type_from_ec2(info or INSTANCE_TYPES[name], vpc_limits().get(name))


def test_m5_large():
    it = convert("m5.large")
    assert it.capacity["cpu"] == 2000
    assert it.capacity["memory"] == 8192 * MI  # EC2's figure; VM overhead only in allocatable
    assert it.capacity["pods"] == 29
    assert it.capacity["vpc.amazonaws.com/pod-eni"] == 9
    assert it.eni_limits == (3, 10)
    assert it.allocatable["cpu"] == 1930
    assert it.labels == {
        "node.kubernetes.io/instance-type": "m5.large",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        P + "instance-category": "m",
        P + "instance-family": "m5",
        P + "instance-generation": "5",
        P + "instance-size": "large",
        P + "instance-cpu": "2",
        P + "instance-cpu-manufacturer": "intel",
        P + "instance-memory": "8192",
        P + "instance-hypervisor": "nitro",
        P + "instance-network-bandwidth": "750",
        P + "instance-ebs-bandwidth": "4750",
        P + "instance-cpu-sustained-clock-speed-mhz": "3100",
        P + "instance-encryption-in-transit-supported": "false",
        P + "instance-capability-flex": "false",
        P + "nitro-sandbox": "false",
    }


def test_graviton_is_arm64_and_loses_cma_memory():
    it = convert("m6g.xlarge")
    assert it.labels["kubernetes.io/arch"] == "arm64"
    assert it.labels[P + "instance-cpu-manufacturer"] == "aws"
    x86_twin = convert("m5.xlarge")  # same 4 vCPUs / 16 GiB and ENI limits as m6g.xlarge
    assert it.capacity["memory"] == x86_twin.capacity["memory"]
    # 64Mi of CMA memory, less the 7.5% VM overhead no longer charged on it (ceil 1228.8 vs ceil 1224)
    assert x86_twin.allocatable["memory"] - it.allocatable["memory"] == (64 - (1229 - 1224)) * MI


def test_nvidia_gpu_type():
    it = convert("p3.2xlarge", P3_2XLARGE)
    assert it.capacity["nvidia.com/gpu"] == 1
    assert it.allocatable["nvidia.com/gpu"] == 1
    assert "vpc.amazonaws.com/pod-eni" not in it.capacity  # p3 does not support ENI trunking
    assert it.capacity["pods"] == 4 * 14 + 2
    assert {k: v for k, v in it.labels.items() if "gpu" in k or "hypervisor" in k} == {
        P + "instance-gpu-name": "v100",
        P + "instance-gpu-manufacturer": "nvidia",
        P + "instance-gpu-count": "1",
        P + "instance-gpu-memory": "16384",
        P + "instance-hypervisor": "xen",
    }
    assert it.labels[P + "instance-network-bandwidth"] == "2500"
    assert it.labels[P + "instance-ebs-bandwidth"] == "1750"


def test_amd_gpu_and_local_nvme():
    info = copy.deepcopy(P3_2XLARGE)
    info["InstanceType"] = "g4ad.xlarge"
    info["GpuInfo"]["Gpus"][0].update(Name="Radeon Pro V520", Manufacturer="AMD", Count=2)
    info["InstanceStorageInfo"] = {"TotalSizeInGB": 150, "NvmeSupport": "required"}
    it = instance_type_from_ec2(info)
    assert it.capacity["amd.com/gpu"] == 2
    assert "nvidia.com/gpu" not in it.capacity
    assert it.labels[P + "instance-gpu-name"] == "radeon-pro-v520"
    assert it.labels[P + "instance-gpu-manufacturer"] == "amd"
    assert it.labels[P + "instance-local-nvme"] == "150"


def test_inferentia_neuron_devices():
    it = convert("inf1.xlarge")
    assert it.capacity["aws.amazon.com/neuron"] == 1
    assert it.labels[P + "instance-accelerator-name"] == "inferentia"
    assert it.labels[P + "instance-accelerator-manufacturer"] == "aws"
    assert it.labels[P + "instance-accelerator-count"] == "1"
    assert P + "instance-gpu-count" not in it.labels


def test_local_nvme_from_instance_storage():
    assert convert("m5d.large").labels[P + "instance-local-nvme"] == "75"
    assert P + "instance-local-nvme" not in convert("m5.large").labels


def test_eni_limits_come_from_the_default_network_card():
    info = copy.deepcopy(P3_2XLARGE)
    info["NetworkInfo"]["MaximumNetworkInterfaces"] = 8
    info["NetworkInfo"]["NetworkCards"].append({"NetworkCardIndex": 1, "MaximumNetworkInterfaces": 4})
    it = instance_type_from_ec2(info)
    assert it.eni_limits == (4, 15)
    assert it.capacity["pods"] == 58


def test_vpc_limits_fill_in_missing_network_data():
    info = copy.deepcopy(P3_2XLARGE)
    info["NetworkInfo"] = {}
    it = instance_type_from_ec2(info, {"interfaces": 3, "ipv4_per_interface": 10, "trunking": False})
    assert it.eni_limits == (3, 10)
    assert it.capacity["pods"] == 29


@pytest.mark.parametrize(
    "change",
    [
        lambda info: info.pop("VCpuInfo"),
        lambda info: info["MemoryInfo"].update(SizeInMiB=0),
        lambda info: info["ProcessorInfo"].update(SupportedArchitectures=["x86_64_mac"]),
        lambda info: info.update(SupportedVirtualizationTypes=["paravirtual"]),
    ],
)
def test_unusable_entries_are_rejected(change):
    info = copy.deepcopy(P3_2XLARGE)
    change(info)
    with pytest.raises(UnsupportedInstanceTypeError):
        instance_type_from_ec2(info)


def test_offerings_are_kept():
    offering = Offering("us-east-1a", "spot", 0.5)
    assert convert("m5.large").offerings == ()
    assert instance_type_from_ec2(INSTANCE_TYPES["m5.large"], None, [offering]).offerings == (offering,)


def test_name_based_arch_guess_agrees_with_ec2_for_every_linux_type():
    disagreements = []
    for name, info in INSTANCE_TYPES.items():
        try:
            actual = labels_from_ec2(info)["kubernetes.io/arch"]
        except UnsupportedInstanceTypeError:
            continue  # Mac instances
        if arch_from_name(name) != actual:
            disagreements.append((name, actual))
    assert disagreements == []


def test_flex_types_carry_the_capability_flex_label():
    assert convert("m7i-flex.large").labels[P + "instance-capability-flex"] == "true"
    assert convert("m7i.large").labels[P + "instance-capability-flex"] == "false"
