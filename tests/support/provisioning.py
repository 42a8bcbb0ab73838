"""The provisioning world's helpers: NodePools on the fixture account's EC2NodeClass, the provisioner's
configuration, and :class:`World` — what the ``world`` fixture (``tests/fixtures/world.py``) returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import from_aws
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.resources import NODES
from fleetwright.model.karpenter import EC2NodeClass, NodePool
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.state import StateStore
from tests.aws.strict import StrictEc2
from tests.kube.objects import create_unschedulable_pod, node_object
from tests.support.aws import CLUSTER, Aws, SeededAmis, node_class
from tests.support.clock import FakeClock

INSTANCE_TYPES = ["c5.large", "m5.large", "c5.xlarge", "m5.xlarge"]


def nodepool(
    name: str = "default",
    *,
    instance_types: list[str] | None = None,
    capacity_types: list[str] | None = None,
    limits: dict[str, str] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
) -> NodePool:
    """A NodePool on the fixture's EC2NodeClass, restricted to a few instance types."""
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": instance_types or INSTANCE_TYPES,
                    },
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": capacity_types or ["on-demand"],
                    },
                ],
            }
        }
    }
    if startup_taints:
        spec["template"]["spec"]["startupTaints"] = startup_taints
    if limits:
        spec["limits"] = limits
    return NodePool.model_validate(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}
    )


def make_config(
    *nodepools: NodePool, nodeclass: EC2NodeClass | None = None, **options: Any
) -> ProvisionerConfig:
    return ProvisionerConfig(
        cluster_name=CLUSTER,
        nodepools=list(nodepools) or [nodepool()],
        nodeclasses=[nodeclass or node_class()],
        **options,
    )


@dataclass
class World:
    """Everything a provisioner test touches."""

    aws: Aws
    amis: SeededAmis
    kube: KubeCluster
    client: KubeClient
    state: StateStore
    cloud: AwsProvider
    wall: FakeClock
    strict: StrictEc2

    def provisioner(self, config: ProvisionerConfig | None = None, **kwargs: Any) -> Provisioner:
        kwargs.setdefault("metrics", RecordingMetrics())
        kwargs.setdefault("sleep", lambda _s: None)
        return Provisioner(
            self.kube,
            self.cloud,
            self.state,
            config or make_config(),
            wall_clock=self.wall,
            **kwargs,
        )

    def pending(self, count: int, cpu: str = "1", prefix: str = "app") -> None:
        for i in range(count):
            create_unschedulable_pod(self.client, f"{prefix}-{i}", cpu=cpu)

    def create_fleet_calls(self) -> int:
        return len(self.aws.fleet.requests)

    def instances(self, states: tuple[str, ...] = ("pending", "running")) -> list[dict[str, Any]]:
        """The account's instances, as EC2 shows them once every launch is visible."""
        self.strict.consistency.settle()
        reservations = self.aws.clients.ec2.describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": list(states)}]
        )["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def instance_tags(self, instance: dict[str, Any]) -> dict[str, str]:
        return from_aws(instance.get("Tags"))

    def register_node(
        self, provider_id: str, name: str, *, ready: bool, taints: list[dict[str, str]] | None = None
    ) -> None:
        """What a booting kubelet does: create its Node with the instance's providerID."""
        node = node_object(name, taints=taints)
        node["spec"]["providerID"] = provider_id
        node["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        existing = self.kube.get_node(name)
        if existing is None:
            self.client.create(NODES, node)
        else:
            self.client.patch(NODES, name, {"spec": {"providerID": provider_id, "taints": taints or None}})
            self.client.patch(NODES, name, {"status": node["status"]}, subresource="status")
