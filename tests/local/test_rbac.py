"""``docs/rbac.yaml`` grants exactly what Fleetwright uses: its Kubernetes flows run as a user of the four
functions' groups together against the emulator enforcing their ClusterRoles (each function's own grant is
checked against its own requests in ``tests/infra/test_least_privilege.py``) — provisioning for pending
pods from NodePools applied to the cluster, node registration, consolidation of an empty node, an
interruption whose drain is blocked by a disruption budget until its deadline, garbage collection of a
Node whose instance is gone, NodeClaim objects and Events throughout — and none is refused, every granted
verb is used, and nothing used is missing from the grant.

Set-up (kubelets, workloads, kubectl's part) goes through the administrator, which the audit keeps apart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from fleetwright.aws.tags import ownership_tags, to_aws
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.cache import ClusterCache
from fleetwright.kube.events import EventCorrelator, EventRecorder
from fleetwright.kube.resources import (
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    STORAGE_CLASSES,
    Resource,
)
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.rbac import Policy
from fleetwright.local.inprocess.disruption import run_disruption
from fleetwright.local.inprocess.interruption import run_interruption
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.provisioning.nodepool_status import NodePoolStatus
from tests.kube.objects import UNSCHEDULABLE_STATUS, node_object, pod_object
from tests.provisioning.test_nodepools_from_cluster import NODECLASS, nodepool_doc
from tests.support.aws import CLUSTER
from tests.support.kube import RBAC
from tests.support.provisioning import World, make_config

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

USER = "fleetwright-functions"
GROUPS = (
    "fleetwright-provisioner",
    "fleetwright-disruption",
    "fleetwright-interruption",
    "fleetwright-termination",
)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
Triple = tuple[str, str, str]


@pytest.fixture
def apiserver(rbac_apiserver: ApiServer) -> ApiServer:
    """The emulator enforcing docs/rbac.yaml (one per test); ``client`` is its administrator."""
    return rbac_apiserver


@pytest.fixture
def cluster(apiserver: ApiServer) -> Iterator[KubeCluster]:
    """Fleetwright's functions: a user of the group the ClusterRoleBinding binds."""
    token = apiserver.add_user(USER, GROUPS)
    kube = KubeClient(apiserver.cluster_config(token), sleep=lambda _s: None)
    yield KubeCluster(kube)
    kube.close()


def granted() -> set[Triple]:
    """(apiGroup, resource, verb) of every rule bound to the group in docs/rbac.yaml."""
    policy = Policy.load(RBAC)
    bound = [b for b in policy.bindings if set(GROUPS) & set(b.groups) and b.role_kind == "ClusterRole"]
    return {t for b in bound for rule in policy.cluster_roles[b.role_name] for t in rule.grants()}


def kubelet_registers(
    world: World,
    provider_id: str,
    name: str,
    labels: dict[str, str] | None = None,
) -> None:
    """A Ready Node for an instance, as its kubelet creates it."""
    node = node_object(name, labels={"kubernetes.io/hostname": name, **(labels or {})})
    node["spec"]["providerID"] = provider_id
    world.client.create(NODES, node)


def node_names(world: World) -> set[str]:
    """The Nodes the administrator sees (assertions stay out of Fleetwright's audit)."""
    return {n["metadata"]["name"] for n in world.client.list(NODES).items}


def pending_with_volume(world: World, name: str) -> None:
    """An unschedulable pod whose PersistentVolumeClaim waits for its first consumer."""
    world.client.create(
        STORAGE_CLASSES,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    world.client.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {
                "storageClassName": "gp3",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
        "default",
    )
    body = pod_object(name, cpu="1500m")
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    world.client.create(PODS, body)
    world.client.patch(PODS, name, UNSCHEDULABLE_STATUS, "default", subresource="status")


def test_fleetwright_flows_use_exactly_what_docs_rbac_yaml_grants(
    world: World,
    apiserver: ApiServer,
) -> None:
    authorizer = apiserver.authorizer
    assert authorizer is not None

    def refused() -> list[tuple[str, str, str]]:
        return [(r.request.full_resource, r.request.verb, r.request.name) for r in authorizer.refused()]

    wall = world.wall
    wall.now = time.time()
    metrics = RecordingMetrics()

    # kubectl apply: an EC2NodeClass and a NodePool (empty nodes consolidated at once).
    world.client.create(EC2_NODE_CLASSES, NODECLASS)
    world.client.create(
        NODE_POOLS,
        nodepool_doc(
            "default",
            "c5.large",
            disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"},
        ),
    )

    # Provisioning: two pods that need a node each (one with a volume to bind), NodePools read from the
    # cluster, their status written, the pods' nominations recorded as Events.
    config: ProvisionerConfig = make_config()
    source = NodePoolSource(
        world.kube,
        config,
        metrics=metrics,
        status=NodePoolStatus(world.kube, cloud=world.cloud, clock=wall),
    )
    events = EventRecorder(world.kube.client, correlator=EventCorrelator(clock=wall))
    provisioner: Provisioner = world.provisioner(
        config, metrics=metrics, nodepool_source=source, events=events
    )
    world.pending(1, cpu="1500m")
    pending_with_volume(world, "app-1")
    world.pending(1, cpu="64", prefix="huge")  # fits no NodePool: FailedScheduling
    claims = sorted(provisioner.run_once().launched, key=lambda c: c.id)
    assert [(c.nodepool, c.instance_type) for c in claims] == [("default", "c5.large")] * 2
    # A pass minutes later, the nodes still booting: the pod that fits nowhere is reported again, and
    # counted on its Event.
    wall.advance(360)
    assert provisioner.run_once().launched == []
    # An invocation as the schedule runs it: the pending pods watched until its deadline.
    assert provisioner.run_until(time.monotonic() + 2.0).error == ""

    # A warm invocation reading the cluster from the watch-fed cache (as the deployed functions do).
    cache = ClusterCache(world.kube.client, watch_seconds=2)
    try:
        assert world.provisioner(config, metrics=metrics, cache=cache).run_once().launched == []
        assert cache.nodeclaims_installed is True
        deadline = time.monotonic() + 10
        while not all(i.connected for i in cache.informers.values()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the watches open in their threads
    finally:
        cache.stop()

    # Registration: the kubelets create their Nodes; Fleetwright labels them and adds its finalizer.
    for i, claim in enumerate(claims):
        kubelet_registers(world, claim.provider_id, f"node-{i}")
    assert sorted(provisioner.reconcile().registered) == [c.id for c in claims]
    assert world.client.get(NODES, "node-0")["metadata"]["finalizers"] == ["karpenter.sh/termination"]

    # The pods run: one on node-0, held there by a disruption budget; node-1 stays empty.
    for i in range(2):
        world.client.delete(PODS, f"app-{i}", "default")
    web = pod_object("web", node="node-0", labels={"app": "web"}, cpu="1500m")
    web["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-web", "controller": True}
    ]
    world.client.create(PODS, web)
    world.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    provisioner.reconcile()

    # Disruption: the empty node is consolidated through the termination workflow.
    disruption_config = make_config()
    NodePoolSource(world.kube, disruption_config, metrics=metrics).refresh()
    run = run_disruption(
        kube=world.kube,
        cloud=world.cloud,
        state=world.state,
        config=disruption_config,
        options=DisruptionOptions(settings=DisruptionSettings(min_node_age_seconds=0)),
        metrics=metrics,
        clock=wall,
        sleep=wall.advance,
    )
    assert [e.status for e in run.executions] == ["SUCCEEDED"], refused()
    assert "node-1" not in node_names(world)

    # Interruption: node-0's instance is scheduled for retirement (an on-demand instance: a spot warning
    # would be refused); the budget blocks the eviction until the deadline.
    chain = run_interruption(
        claims[0].instance_id,
        "scheduled-change",
        kube=world.kube,
        cloud=world.cloud,
        state=world.state,
        config=disruption_config,
        metrics=metrics,
        clock=wall,
        sleep=wall.advance,
    )
    assert [e.status for e in chain.executions] == ["SUCCEEDED"], refused()
    assert "web" not in {p["metadata"]["name"] for p in world.client.list(PODS, "default").items}

    # Garbage collection: a Node whose instance was terminated behind Fleetwright's back.
    ec2 = world.aws.clients.ec2
    ghost = ec2.run_instances(
        ImageId=next(iter(world.amis.ids.values())),
        InstanceType="c5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=next(iter(world.aws.subnets.values())),
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": to_aws(ownership_tags(CLUSTER, nodepool="default"))}
        ],
    )["Instances"][0]
    zone = ghost["Placement"]["AvailabilityZone"]
    kubelet_registers(
        world, f"aws:///{zone}/{ghost['InstanceId']}", "node-ghost", {"karpenter.sh/nodepool": "default"}
    )
    ec2.terminate_instances(InstanceIds=[ghost["InstanceId"]])
    wall.advance(3600)
    run_disruption(
        kube=world.kube,
        cloud=world.cloud,
        state=world.state,
        config=disruption_config,
        metrics=metrics,
        clock=wall,
        sleep=wall.advance,
    )
    assert "node-ghost" not in node_names(world)

    # The claims have ended: their NodeClaim objects go at the next reconciliation.
    provisioner.reconcile()
    assert world.client.list(NODE_CLAIMS).items == []

    used = authorizer.used(user=USER)
    assert refused() == [], "refused requests: docs/rbac.yaml lacks them"
    assert used - granted() == set(), "used but not granted"
    assert granted() - used == set(), "granted but never used: remove from docs/rbac.yaml or add the flow"
