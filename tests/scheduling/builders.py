"""Small builders for scheduler tests: instance types, pods, nodes and NodePools in a few words."""

from __future__ import annotations

from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import ARCH, INSTANCE_FAMILY, INSTANCE_TYPE, OS
from fleetwright.model.node import Node
from fleetwright.model.pod import HostPort, Pod, PreferredTerm
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.resources import parse_resources
from fleetwright.model.taints import Taint, Toleration
from fleetwright.scheduling.types import NodePoolTemplate

ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")


def itype(
    name: str,
    cpu: str,
    memory: str,
    pods: int = 110,
    price: float = 0.1,
    zones: tuple[str, ...] = ZONES,
    capacity_types: tuple[str, ...] = ("on-demand", "spot"),
    arch: str = "amd64",
    extra: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> InstanceType:
    """An instance type whose allocatable equals its capacity (keeps arithmetic in tests obvious)."""
    capacity = parse_resources({"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})})
    offerings = tuple(
        Offering(z, ct, price * (0.4 if ct == "spot" else 1.0)) for z in zones for ct in capacity_types
    )
    all_labels = {
        INSTANCE_TYPE: name,
        ARCH: arch,
        OS: "linux",
        INSTANCE_FAMILY: name.split(".", maxsplit=1)[0],
        **(labels or {}),
    }
    return InstanceType(name, capacity, dict(capacity), all_labels, offerings, explicit_allocatable=True)


def pod(
    name: str,
    cpu: str = "0",
    memory: str = "0",
    namespace: str = "default",
    selector: dict[str, str] | None = None,
    required: list[Requirements] | None = None,
    preferred: list[tuple[int, Requirements]] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    host_ports: tuple[int, ...] = (),
    extra: dict[str, str] | None = None,
    node_name: str | None = None,
) -> Pod:
    """A pending pod requesting the given resources."""
    requests = parse_resources({"cpu": cpu, "memory": memory, **(extra or {})})
    requests["pods"] = 1
    return Pod(
        namespace=namespace,
        name=name,
        requests=requests,
        node_selector=Requirements.from_labels(selector or {}),
        required_affinity=tuple(required or ()),
        preferred_affinity=tuple(PreferredTerm(w, r) for w, r in (preferred or [])),
        tolerations=tolerations,
        host_ports=tuple(HostPort(p) for p in host_ports),
        node_name=node_name,
    )


def req(key: str, operator: str, *values: str) -> Requirements:
    """A single-expression requirement set."""
    return Requirements.of([Requirement.create(key, operator, values)])


def nodepool(
    name: str = "default",
    requirements: Requirements | None = None,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    weight: int = 0,
    limits: dict[str, str] | None = None,
    usage: dict[str, str] | None = None,
) -> NodePoolTemplate:
    """A NodePool template."""
    return NodePoolTemplate(
        name=name,
        requirements=requirements or Requirements(),
        labels=labels or {},
        taints=taints,
        weight=weight,
        limits=parse_resources(limits) if limits is not None else None,
        usage=parse_resources(usage or {}),
    )


def node(
    name: str,
    cpu: str,
    memory: str,
    labels: dict[str, str] | None = None,
    pods: list[Pod] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
) -> Node:
    """An existing node with allocatable cpu/memory and 110 pod slots."""
    return Node(
        name=name,
        labels=labels or {},
        allocatable=parse_resources({"cpu": cpu, "memory": memory, "pods": 110}),
        taints=taints,
        pods=pods or [],
        unschedulable=unschedulable,
    )


SMALL_CATALOG = [
    itype("c5.large", "2", "4Gi", price=0.085),
    itype("m5.large", "2", "8Gi", price=0.096),
    itype("r5.large", "2", "16Gi", price=0.126),
    itype("m5.xlarge", "4", "16Gi", price=0.192),
    itype("m5.2xlarge", "8", "32Gi", price=0.384),
    itype("m5.4xlarge", "16", "64Gi", price=0.768),
    itype("m6g.large", "2", "8Gi", price=0.077, arch="arm64"),
    itype(
        "p3.2xlarge",
        "8",
        "61Gi",
        price=3.06,
        extra={"nvidia.com/gpu": "1"},
        labels={"karpenter.k8s.aws/instance-gpu-count": "1"},
    ),
]
