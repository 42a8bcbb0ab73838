"""Builders for the planner's tests: NodePools, nodes of built-in catalog types, pods, planner inputs."""

from __future__ import annotations

from functools import cache
from typing import Any

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.disruption.types import DisruptionInput, DisruptionSettings, NodeState
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod
from fleetwright.model.resources import parse_resources

NOW = 1_750_000_000.0
HOUR = 3600.0
DAY = 86400.0
SMALL_TYPES = ["c5.large", "m5.large", "c5.xlarge", "m5.xlarge", "m5.2xlarge", "m5.4xlarge"]


@cache
def catalog() -> tuple[InstanceType, ...]:
    """The built-in us-east-1 catalog."""
    return tuple(builtin_catalog("us-east-1"))


def instance_type(name: str) -> InstanceType:
    """One type of the built-in catalog."""
    return next(t for t in catalog() if t.name == name)


def pool(
    name: str = "default",
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    after: str = "30s",
    budgets: list[dict[str, Any]] | None = None,
    expire_after: str = "Never",
    instance_types: list[str] | None = None,
    capacity_types: list[str] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    weight: int | None = None,
) -> NodePool:
    """A NodePool; by default on-demand only, limited to :data:`SMALL_TYPES`, budget 100%."""
    reqs = requirements or [
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": instance_types or SMALL_TYPES},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": capacity_types or ["on-demand"]},
    ]
    return NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "expireAfter": expire_after,
                        "requirements": reqs,
                    }
                },
                **({"weight": weight} if weight is not None else {}),
                "disruption": {
                    "consolidationPolicy": policy,
                    "consolidateAfter": after,
                    "budgets": budgets if budgets is not None else [{"nodes": "100%"}],
                },
            },
        }
    )


def nodeclass(name: str = "default", **spec: Any) -> EC2NodeClass:
    """An AL2023 EC2NodeClass (the one :func:`pool` refers to by default), with ``spec`` added."""
    return EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "role": "node-role",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                **spec,
            },
        }
    )


def pod(
    name: str,
    cpu: str = "100m",
    memory: str = "128Mi",
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    daemonset: bool = False,
    phase: str = "Running",
) -> Pod:
    """A running pod (a ReplicaSet's, or a DaemonSet's with ``daemonset``)."""
    requests = parse_resources({"cpu": cpu, "memory": memory})
    requests["pods"] = 1
    return Pod(
        namespace=namespace,
        name=name,
        requests=requests,
        labels=labels or {"app": name.rsplit("-", 1)[0]},
        annotations=annotations or {},
        owner=("DaemonSet", "agent") if daemonset else ("ReplicaSet", "web"),
        phase=phase,
        node_name="?",
    )


def node(
    name: str,
    type_name: str = "m5.large",
    *,
    pods: list[Pod] | None = None,
    nodepool: str = "default",
    zone: str = "us-east-1a",
    capacity_type: str = "on-demand",
    age: float = DAY,
    empty_for: float | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **fields: Any,
) -> NodeState:
    """A node of a built-in catalog type, ``age`` seconds old at :data:`NOW`, priced by its offering."""
    itype = instance_type(type_name)
    offering = itype.cheapest(frozenset({zone}), frozenset({capacity_type}))
    assert offering is not None
    node_labels = {
        **itype.labels,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.HOSTNAME: name,
        **({wk.NODEPOOL: nodepool} if nodepool else {}),
        **(labels or {}),
    }
    bound = [_bound(p, name) for p in pods or []]
    return NodeState(
        node=Node(
            name=name,
            labels=node_labels,
            allocatable=dict(itype.allocatable),
            capacity=dict(itype.capacity),
            pods=bound,
        ),
        instance_type=type_name,
        capacity_type=capacity_type,
        zone=zone,
        price=offering.price,
        created_at=NOW - age,
        empty_since=None if empty_for is None else NOW - empty_for,
        annotations=annotations or {},
        **fields,
    )


def _bound(p: Pod, node_name: str) -> Pod:
    p.node_name = node_name
    return p


def planner_input(
    nodes: list[NodeState],
    pools: list[NodePool] | None = None,
    *,
    settings: DisruptionSettings | None = None,
    nodeclasses: list[EC2NodeClass] | None = None,
    **fields: Any,
) -> DisruptionInput:
    """A planner input over the built-in catalog at :data:`NOW`."""
    return DisruptionInput(
        nodes=nodes,
        nodepools=pools if pools is not None else [pool()],
        nodeclasses=nodeclasses or [],
        instance_types=list(catalog()),
        now=NOW,
        settings=settings or DisruptionSettings(),
        **fields,
    )


def busy(prefix: str, count: int, cpu: str = "250m", memory: str = "512Mi") -> list[Pod]:
    """``count`` identical pods named ``prefix-0`` ..."""
    return [pod(f"{prefix}-{i}", cpu, memory) for i in range(count)]
