"""The kubelet simulator against moto: Nodes for the cluster's instances, each start in its phases (EC2
pending, registration NotReady, Ready, startup taints removed by their agents), pods run, Nodes removed when
instances terminate."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.tags import CLUSTER_TAG, NODEPOOL_TAG
from fleetwright.aws.userdata import BootstrapOptions, user_data_for
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.store import Store
from fleetwright.local.kubelet import KubeletOptions, KubeletSimulator
from fleetwright.local.nodelifecycle import NodeLifecycleController
from fleetwright.local.nodestart import NodeStart
from fleetwright.model.ec2nodeclass import KubeletConfiguration
from fleetwright.model.taints import Taint
from tests.local.helpers import pod
from tests.support.clock import FakeClock
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

REGION = "us-east-1"
CLUSTER = ClusterInfo(
    name="demo",
    endpoint="https://example.eks",
    ca_bundle="Q0E=",
    version="1.31",
    service_cidr="10.100.0.0/16",
)


@dataclass
class Ec2:
    client: Any
    subnet: str


@pytest.fixture
def ec2(fake_credentials: None) -> Iterator[Ec2]:
    with mock_aws():
        client = boto3.client("ec2", region_name=REGION)
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1b")
        yield Ec2(client, subnet["Subnet"]["SubnetId"])


def launch(
    ec2: Ec2,
    user_data: str = "",
    *,
    cluster: str = "demo",
    instance_type: str = "m5.large",
    tags: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    all_tags = {CLUSTER_TAG: cluster, **(tags or {})}
    kwargs: dict[str, Any] = {
        "ImageId": "ami-12c6146b",
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceType": instance_type,
        "SubnetId": ec2.subnet,
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in all_tags.items()]}
        ],
        **extra,
    }
    if user_data:
        kwargs["UserData"] = user_data
    return dict(ec2.client.run_instances(**kwargs)["Instances"][0])


def user_data(family: str = "AL2023", **labels: str) -> str:
    return user_data_for(
        family,
        BootstrapOptions(
            cluster=CLUSTER,
            labels={"team": "ml", "karpenter.sh/nodepool": "general", **labels},
            taints=(Taint("dedicated", "NoSchedule", "ml"),),
            kubelet=KubeletConfiguration.model_validate({"maxPods": 20}),
        ),
    )


START = NodeStart(boot_seconds=3.0, register_seconds=4.0, ready_seconds=2.0, startup_taint_seconds=5.0)


def simulator(store: Store, ec2: Ec2, clock: FakeClock, **kw: Any) -> KubeletSimulator:
    return KubeletSimulator(store, ec2.client, "demo", start=START, clock=clock, **kw)


def registered(store: Store, ec2: Ec2, clock: FakeClock | None = None) -> KubeletSimulator:
    """A simulator that has seen the running instances and, ``register_seconds`` later, registered them."""
    clock = clock or FakeClock(1000.0)
    sim = simulator(store, ec2, clock)
    sim.poll_once()
    clock.now += START.register_seconds
    sim.poll_once()
    return sim


def ready(node: dict[str, Any]) -> str:
    return str(next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"))


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket"])
def test_registers_a_node_like_eks(ec2: Ec2, family: str) -> None:
    store, clock = Store(), FakeClock(1000.0)
    instance = launch(ec2, user_data(family, **{"karpenter.sh/capacity-type": "spot"}))
    launch(ec2, user_data(), cluster="someone-else")

    registered(store, ec2, clock)

    nodes = store.list(NODES)[0]
    assert len(nodes) == 1
    node = nodes[0]
    name = node["metadata"]["name"]
    assert name == instance["PrivateDnsName"]
    assert name == f"ip-{instance['PrivateIpAddress'].replace('.', '-')}.ec2.internal"
    labels = node["metadata"]["labels"]
    assert labels["team"] == "ml"
    assert labels["karpenter.sh/nodepool"] == "general"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert not [k for k in labels if k.startswith("karpenter.k8s.aws/")]  # Fleetwright adds those
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["topology.kubernetes.io/region"] == REGION
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/hostname"] == name
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert node["spec"]["providerID"] == f"aws:///us-east-1b/{instance['InstanceId']}"
    assert node["status"]["capacity"]["cpu"] == "2"
    assert node["status"]["capacity"]["memory"] == "8Gi"
    assert node["status"]["allocatable"]["pods"] == "20"  # maxPods from the user data
    assert node["status"]["allocatable"]["cpu"] == "1930m"
    assert {"type": "InternalIP", "address": instance["PrivateIpAddress"]} in node["status"]["addresses"]
    assert ready(node) == "False"


def state(ec2: Ec2, instance: dict[str, Any]) -> str:
    found = ec2.client.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"])


def test_each_phase_of_a_start_in_turn_then_pods_run_then_the_node_goes_with_its_instance(ec2: Ec2) -> None:
    store, clock = Store(), FakeClock(1000.0)
    sim = simulator(store, ec2, clock)
    sim.start(poll=False)
    try:
        instance = launch(ec2, user_data())
        sim.poll_once()
        assert state(ec2, instance) == "pending" and store.list(NODES)[0] == []  # EC2 boots it

        clock.now += START.boot_seconds
        sim.poll_once()
        assert state(ec2, instance) == "running" and store.list(NODES)[0] == []  # the OS boots

        clock.now += START.register_seconds
        sim.poll_once()
        name = store.list(NODES)[0][0]["metadata"]["name"]
        store.create(PODS, pod("web", node_name=name))

        clock.now += START.ready_seconds - 0.5
        sim.poll_once()
        assert ready(store.get(NODES, None, name)) == "False"
        assert store.get(PODS, "default", "web")["status"]["phase"] == "Pending"

        clock.now += 0.5
        sim.poll_once()
        assert ready(store.get(NODES, None, name)) == "True"
        web = store.get(PODS, "default", "web")
        assert web["status"]["phase"] == "Running"
        assert web["status"]["hostIP"] == instance["PrivateIpAddress"]

        store.create(PODS, pod("late", node_name=name))
        assert store.get(PODS, "default", "late")["status"]["phase"] == "Running"

        ec2.client.terminate_instances(InstanceIds=[instance["InstanceId"]])
        sim.poll_once()
        assert store.list(NODES)[0] == []
        assert store.list(PODS)[0] == []
    finally:
        sim.stop()


def test_only_the_labels_a_real_kubelet_and_cloud_controller_set(ec2: Ec2) -> None:
    store = Store()
    launch(
        ec2,
        user_data_for("AL2023", BootstrapOptions(cluster=CLUSTER)),
        tags={NODEPOOL_TAG: "batch"},
        InstanceMarketOptions={"MarketType": "spot"},
        instance_type="m6g.xlarge",
    )

    registered(store, ec2)

    (node,) = store.list(NODES)[0]
    name = node["metadata"]["name"]
    assert node["metadata"]["labels"] == {
        "beta.kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/instance-type": "m6g.xlarge",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": "us-east-1b",
        "kubernetes.io/arch": "arm64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6g.xlarge",
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": "us-east-1b",
    }
    assert "finalizers" not in node["metadata"]


def test_user_data_from_the_launch_template_when_the_instance_has_none(ec2: Ec2) -> None:
    template = ec2.client.create_launch_template(
        LaunchTemplateName="fleetwright-demo",
        LaunchTemplateData={"UserData": base64.b64encode(user_data(role="from-template").encode()).decode()},
    )["LaunchTemplate"]["LaunchTemplateId"]
    instance = launch(ec2)
    ec2.client.create_tags(
        Resources=[instance["InstanceId"]], Tags=[{"Key": "aws:ec2launchtemplate:id", "Value": template}]
    )
    store = Store()

    registered(store, ec2)

    assert store.list(NODES)[0][0]["metadata"]["labels"]["role"] == "from-template"


def test_runs_in_the_background_inside_the_apiserver(ec2: Ec2) -> None:
    options = KubeletOptions(ec2.client, "demo", start=NodeStart.fast(0.05), poll_interval=0.02)
    with ApiServer(port=0, kubelet=options) as server:
        instance = launch(ec2, user_data())
        node = wait_for(lambda: server.store.list(NODES)[0])[0]
        name = node["metadata"]["name"]
        server.store.create(PODS, pod("web", node_name=name))
        wait_for(lambda: server.store.get(PODS, "default", "web")["status"]["phase"] == "Running")
        assert ready(server.store.get(NODES, None, name)) == "True"

        ec2.client.terminate_instances(InstanceIds=[instance["InstanceId"]])
        wait_for(lambda: not server.store.list(NODES)[0])


def _taints(store: Store, name: str) -> list[dict[str, Any]]:
    return list(store.get(NODES, None, name)["spec"].get("taints") or [])


def _started(store: Store, ec2: Ec2, clock: FakeClock, data: str) -> tuple[KubeletSimulator, str]:
    """A simulator (with the node lifecycle controller) whose instance has registered its Node."""
    NodeLifecycleController(store).start()
    sim = simulator(store, ec2, clock)
    launch(ec2, data)
    sim.poll_once()
    clock.now += START.register_seconds
    sim.poll_once()
    return sim, store.list(NODES)[0][0]["metadata"]["name"]


def test_not_ready_taint_until_ready_and_agents_remove_their_startup_taints_after(ec2: Ec2) -> None:
    store, clock = Store(), FakeClock(1000.0)
    agent = Taint("node.cilium.io/agent-not-ready", "NoExecute", "true")
    data = user_data_for(
        "AL2023", BootstrapOptions(cluster=CLUSTER, taints=(Taint("dedicated", "NoSchedule", "ml"), agent))
    )
    sim, name = _started(store, ec2, clock, data)
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert {t["key"] for t in _taints(store, name)} == {"dedicated", agent.key, not_ready["key"]}

    clock.now += START.ready_seconds
    sim.poll_once()
    assert ready(store.get(NODES, None, name)) == "True"
    assert {t["key"] for t in _taints(store, name)} == {"dedicated", agent.key}  # the agent is starting

    clock.now += START.startup_taint_seconds - 0.5
    sim.poll_once()
    assert agent.key in {t["key"] for t in _taints(store, name)}
    clock.now += 0.5
    sim.poll_once()
    assert _taints(store, name) == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]

    # Put back (as registration syncing a claim's startup taints may), it is removed again.
    store.mutate(
        NODES,
        None,
        name,
        lambda n: {
            **n,
            "spec": {
                **n["spec"],
                "taints": [*n["spec"]["taints"], {"key": agent.key, "value": "true", "effect": "NoExecute"}],
            },
        },
    )
    sim.poll_once()
    assert [t["key"] for t in _taints(store, name)] == ["dedicated"]


def test_the_startup_taints_of_the_clusters_nodepools_belong_to_agents(ec2: Ec2) -> None:
    store, clock = Store(), FakeClock(1000.0)
    install_karpenter_crds(store)
    nodepools = store.registry.lookup("karpenter.sh", "v1", "nodepools")
    assert nodepools is not None
    startup = {"key": "example.com/warming", "effect": "NoSchedule"}
    store.create(
        nodepools,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [],
                        "startupTaints": [startup],
                    }
                }
            },
        },
    )
    data = user_data_for(
        "AL2023", BootstrapOptions(cluster=CLUSTER, taints=(Taint("example.com/warming", "NoSchedule"),))
    )
    sim, name = _started(store, ec2, clock, data)
    clock.now += START.ready_seconds
    sim.poll_once()
    clock.now += START.startup_taint_seconds
    sim.poll_once()
    assert _taints(store, name) == []
