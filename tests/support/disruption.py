"""The disruption tests' helpers: NodePools with disruption settings, a recording workflow starter, and
:class:`Rig` — nodes of a NodePool as the provisioner would have left them (moto instances, claims, Ready
Nodes) and a controller wired to them with hand-driven clocks. The ``make_rig`` fixture
(``tests/disruption/conftest.py``) builds one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwright.aws.tags import ownership_tags, to_aws
from fleetwright.claims.terms import copy_terms
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.controller import DisruptionController
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.kube.resources import NODES, PODS
from fleetwright.model import labels as wk
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.hashes import HASH_VERSION, UNVERSIONED, nodeclass_hash, nodepool_hash
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.karpenter import NodePool
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.runtime.disruption import build_controller
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.workflow.request import TerminationRequest
from fleetwright.workflow.starter import StartResult
from tests.aws.strict import StrictEc2
from tests.kube.objects import pod_object
from tests.support.aws import CLUSTER
from tests.support.clock import FakeClock
from tests.support.provisioning import World

HANDLER = Path(__file__).resolve().parents[2] / "functions" / "disruption" / "handler.py"

DOCUMENTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 0s}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: Never
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  instanceProfile: demo-node-profile
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
PASS_THROUGH = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
SUBNET_BY_ZONE = {"us-east-1a": "a-large", "us-east-1b": "b"}
INSTANCE_TYPES = ["c5.large", "m5.large", "c5.xlarge", "m5.xlarge", "m5.2xlarge"]


def nodepool(
    name: str = "default",
    *,
    consolidate_after: str = "30s",
    policy: str = "WhenEmptyOrUnderutilized",
    budgets: list[dict[str, Any]] | None = None,
    expire_after: str = "Never",
    grace: str | None = None,
    labels: dict[str, str] | None = None,
    instance_types: list[str] | None = None,
    capacity_types: list[str] | None = None,
) -> NodePool:
    """A NodePool on the fixture's EC2NodeClass with the disruption settings a test needs."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels or {}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": expire_after,
                "requirements": [
                    {
                        "key": wk.INSTANCE_TYPE,
                        "operator": "In",
                        "values": instance_types or INSTANCE_TYPES,
                    },
                    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": capacity_types or ["on-demand"]},
                ],
            },
        },
        "disruption": {"consolidationPolicy": policy, "consolidateAfter": consolidate_after},
    }
    if grace:
        spec["template"]["spec"]["terminationGracePeriod"] = grace
    if budgets is not None:
        spec["disruption"]["budgets"] = budgets
    return NodePool.model_validate(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}
    )


class RecordingWorkflows:
    """A ``WorkflowStarter`` that remembers every start (name → request) and starts nothing."""

    def __init__(self) -> None:
        self.started: dict[str, TerminationRequest] = {}

    def status(self, name: str) -> str | None:
        return "RUNNING" if name in self.started else None

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        if name in self.started:
            return StartResult(False, name)
        self.started[name] = request
        return StartResult(True, name)

    def nodes(self) -> set[str]:
        return {r.node for r in self.started.values()}


@dataclass
class Rig:
    """The world plus the NodePool configuration, a recording workflow starter and metrics."""

    world: World
    config: ProvisionerConfig
    workflows: RecordingWorkflows = field(default_factory=RecordingWorkflows)
    metrics: RecordingMetrics = field(default_factory=RecordingMetrics)
    ticker: FakeClock = field(default_factory=lambda: FakeClock(1000.0))  # monotonic seconds
    counter: int = 0
    strict: StrictEc2 | None = None

    # -- the cluster -------------------------------------------------------------------------------------

    def catalog(self) -> dict[str, InstanceType]:
        return {t.name: t for t in self.world.cloud.instance_types(self.config.nodeclasses[0])}

    def node(
        self,
        instance_type: str = "m5.large",
        *,
        pool: str = "default",
        zone: str = "us-east-1a",
        image: str | None = None,
        annotations: dict[str, str] | None = None,
        ready: bool = True,
        capacity_type: str = "on-demand",
        subnet: str | None = None,
        security_groups: list[str] | None = None,
        conditions: list[dict[str, Any]] | None = None,
        status: ClaimStatus = ClaimStatus.INITIALIZED,
        taints: list[dict[str, str]] | None = None,
        startup_taints: list[str] | None = None,
        legacy_claim: bool = False,
    ) -> str:
        """A node as a provisioning pass leaves it: an instance in moto, an Initialized claim with the
        current hashes and its NodePool's expireAfter and terminationGracePeriod (``legacy_claim``: as
        recorded before those were copied and hashes versioned), and a Ready Node with the instance type's
        labels and allocatable (``status``,
        ``taints`` and ``startup_taints``: a node still starting instead)."""
        self.counter += 1
        claim = f"{pool}-n{self.counter:07d}"
        name = f"ip-10-0-0-{self.counter}.ec2.internal"
        ec2 = self.world.aws.clients.ec2
        tags = ownership_tags(CLUSTER, nodepool=pool, nodeclaim=claim)
        market: dict[str, Any] = (
            {"InstanceMarketOptions": {"MarketType": "spot"}} if capacity_type == "spot" else {}
        )
        if security_groups is not None:
            market["SecurityGroupIds"] = security_groups
        instance = ec2.run_instances(
            ImageId=image or self.world.amis.ids[("amd64", "standard")],
            InstanceType=instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet or self.world.aws.subnets[SUBNET_BY_ZONE[zone]],
            TagSpecifications=[{"ResourceType": "instance", "Tags": to_aws(tags)}],
            **market,
        )["Instances"][0]
        instance_id = instance["InstanceId"]
        if self.strict is not None:  # the node has been up a while: every EC2 call sees its instance
            self.strict.consistency.settle()
        known = self.catalog()[instance_type]
        np = next(p for p in self.config.nodepools if p.name == pool)
        now = self.world.wall()
        version = UNVERSIONED if legacy_claim else HASH_VERSION
        record = NodeClaimRecord(
            id=claim,
            nodepool=pool,
            status=str(status),
            startup_taints=list(startup_taints or []),
            created_at=now,
            node_class="default",
            instance_id=instance_id,
            instance_type=instance_type,
            zone=zone,
            capacity_type=capacity_type,
            price=next(
                o.price for o in known.offerings if o.zone == zone and o.capacity_type == capacity_type
            ),
            launched_at=now,
            registered_at=now,
            initialized_at=now if status == ClaimStatus.INITIALIZED else None,
            node_name=name,
            nodepool_hash=nodepool_hash(np, version),
            nodeclass_hash=nodeclass_hash(self.config.nodeclasses[0], version),
            hash_version="" if legacy_claim else HASH_VERSION,
        )
        if not legacy_claim:
            copy_terms(record, np)
        self.world.state.nodeclaims.create(record)
        allocatable = instance_type_allocatable(known, None)
        quantities = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in allocatable.items()}
        labels = {
            **known.labels,
            **np.labels(),
            wk.NODEPOOL: pool,
            wk.INSTANCE_TYPE: instance_type,
            wk.ZONE: zone,
            wk.CAPACITY_TYPE: capacity_type,
            wk.HOSTNAME: name,
        }
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"providerID": f"aws:///{zone}/{instance_id}", **({"taints": taints} if taints else {})},
            "status": {
                "conditions": conditions or [{"type": "Ready", "status": "True" if ready else "False"}],
                "allocatable": quantities,
                "capacity": quantities,
            },
        }
        self.world.client.create(NODES, body)
        return name

    def pod(
        self,
        name: str,
        node: str,
        *,
        cpu: str = "500m",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """A ReplicaSet's pod running on ``node``."""
        body = pod_object(name, node=node, cpu=cpu, labels=labels or {"app": "web"})
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "uid-web",
                "controller": True,
            }
        ]
        if annotations:
            body["metadata"]["annotations"] = annotations
        self.world.client.create(PODS, body)

    def instance_id(self, node: str) -> str:
        obj = self.world.kube.get_node(node)
        assert obj is not None
        return str(obj["spec"]["providerID"]).rsplit("/", 1)[-1]

    def replacements(self, before: set[str]) -> list[NodeClaimRecord]:
        return [r for r in self.world.state.nodeclaims.list() if r.id not in before]

    def claim_ids(self) -> set[str]:
        return {r.id for r in self.world.state.nodeclaims.list()}

    # -- the controller ----------------------------------------------------------------------------------

    def controller(
        self, *, dry_run: bool = False, settings: DisruptionSettings | None = None, **kwargs: Any
    ) -> DisruptionController:
        options = DisruptionOptions(
            settings=settings or DisruptionSettings(min_node_age_seconds=0), dry_run=dry_run
        )
        controller = build_controller(
            self.world.kube,
            self.world.cloud,
            self.world.state,
            self.config,
            self.workflows,
            options=options,
            metrics=self.metrics,
            clock=self.world.wall,
            monotonic=self.ticker,
            collect_garbage=False,
        )
        for key, value in kwargs.items():
            setattr(controller, key, value)
        return controller


RigFactory = Callable[..., Rig]
