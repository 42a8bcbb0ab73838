"""NodePools and EC2NodeClasses applied with kubectl drive the provisioner: the next pass launches for
them, an edit takes effect on the next pass, an invalid one is reported on the object and skipped while the
others keep launching, and their status shows what kubectl users expect."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.kube.resources import EC2_NODE_CLASSES, EVENTS, NODE_POOLS, NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.provisioning.nodepool_source import (
    INVALID_KARPENTER_OBJECTS,
    NODEPOOL_READ_ERRORS,
    SOURCE_CLUSTER,
    SOURCE_CONFIGURATION,
    NodePoolSource,
)
from fleetwright.provisioning.nodepool_status import BREAKERS_MAX_AGE_SECONDS, NodePoolStatus
from fleetwright.state.launchguard import BreakerPolicy
from tests.support.aws import CLUSTER
from tests.support.local import KUBECTL
from tests.support.provisioning import World, make_config, nodepool

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "instanceProfile": "demo-node-profile",
    },
}


def nodepool_doc(name: str, instance_type: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": [instance_type],
                        },
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                }
            },
            **spec,
        },
    }


class Kubectl:
    def __init__(self, server: ApiServer, directory: Path) -> None:
        self.kubeconfig = server.write_kubeconfig(directory / "config")
        self.directory = directory

    def __call__(self, *args: str) -> str:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def apply(self, *docs: dict[str, Any]) -> None:
        path = self.directory / "manifest.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        self("apply", "-f", str(path))


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run .ci/install-kubectl first")
    install_karpenter_crds(apiserver.store)
    return Kubectl(apiserver, tmp_path)


Make = Callable[..., tuple[Provisioner, NodePoolSource, RecordingMetrics]]


@pytest.fixture
def make(world: World) -> Make:
    """A provisioner whose configured documents hold only the NodePool ``from-file`` (c5.large), with a
    source reading the cluster and writing status (``claims``: counting launched claims, as deployed)."""

    def build(
        status: bool = True, claims: bool = False
    ) -> tuple[Provisioner, NodePoolSource, RecordingMetrics]:
        metrics = RecordingMetrics()
        config = make_config(nodepool("from-file", instance_types=["c5.large"]))
        records = world.state.nodeclaims.list if claims else None
        writer = (
            NodePoolStatus(world.kube, cloud=world.cloud, clock=world.wall, claims=records)
            if status
            else None
        )
        source = NodePoolSource(world.kube, config, metrics=metrics, status=writer)
        return world.provisioner(config, metrics=metrics, nodepool_source=source), source, metrics

    return build


def test_status_says_what_bounds_a_nodepool_and_when_its_breaker_holds_it(
    world: World, kubectl: Kubectl
) -> None:
    writer = NodePoolStatus(
        world.kube,
        clock=world.wall,
        claims=world.state.nodeclaims.list,
        breakers=world.state.launchguard.breakers,
    )
    source = NodePoolSource(world.kube, make_config(), status=writer)
    kubectl.apply(
        NODECLASS,
        nodepool_doc("bounded", "c5.large", limits={"cpu": "100"}),
        nodepool_doc("open", "m5.large"),
    )
    source.refresh()
    bounded = conditions(world.client.get(NODE_POOLS, "bounded"))
    unbounded = conditions(world.client.get(NODE_POOLS, "open"))
    assert bounded["LimitsConfigured"] == ("True", "")
    assert (
        unbounded["LimitsConfigured"][0] == "False"
        and "has no spec.limits" in unbounded["LimitsConfigured"][1]
    )
    assert unbounded["Ready"] == ("True", "")  # a note, not a fault
    assert bounded["NodeRegistrationHealthy"] == unbounded["NodeRegistrationHealthy"] == ("True", "")

    policy = BreakerPolicy(threshold=1)
    world.state.launchguard.record_timeouts(
        "open", [world.wall()], last_registered=None, policy=policy, reason="{count} did not register"
    )
    world.wall.advance(BREAKERS_MAX_AGE_SECONDS)  # the status reads the breakers once a minute
    source.refresh()
    held = conditions(world.client.get(NODE_POOLS, "open"))
    assert held["NodeRegistrationHealthy"][0] == "False"
    assert "launches nothing until" in held["NodeRegistrationHealthy"][1]
    assert held["Ready"] == ("True", "")  # as Karpenter: Ready depends on validation and the node class
    assert kubectl("describe", "nodepool", "open").count("RegistrationBreakerOpen") == 1

    world.wall.advance(policy.cool_off_seconds - BREAKERS_MAX_AGE_SECONDS)
    source.refresh()
    assert conditions(world.client.get(NODE_POOLS, "open"))["NodeRegistrationHealthy"] == ("True", "")


def launched(provisioner: Provisioner) -> list[tuple[str, str]]:
    return [(c.nodepool, c.instance_type) for c in provisioner.run_once().launched]


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["message"]) for c in obj.get("status", {}).get("conditions", [])}


def test_without_crds_the_configured_nodepools_are_used(world: World, make: Make) -> None:
    provisioner, source, _ = make()
    world.pending(1)

    assert launched(provisioner) == [("from-file", "c5.large")]
    assert source.source == SOURCE_CONFIGURATION


def test_crds_without_nodepools_keep_the_configured_ones(world: World, kubectl: Kubectl, make: Make) -> None:
    kubectl.apply(NODECLASS)
    provisioner, source, _ = make()
    world.pending(1)

    assert launched(provisioner) == [("from-file", "c5.large")]
    assert source.source == SOURCE_CONFIGURATION


def test_an_applied_nodepool_launches_on_the_next_pass(world: World, kubectl: Kubectl, make: Make) -> None:
    provisioner, source, _ = make()
    kubectl.apply(NODECLASS, nodepool_doc("general", "m5.large"))
    world.pending(1, prefix="first")

    assert launched(provisioner) == [("general", "m5.large")]
    assert source.source == SOURCE_CLUSTER
    assert [np.name for np in provisioner.config.nodepools] == ["general"]

    kubectl.apply(NODECLASS, nodepool_doc("general", "c5.xlarge"))
    world.pending(1, cpu="3", prefix="second")

    assert launched(provisioner) == [("general", "c5.xlarge")]


def test_an_invalid_nodepool_is_reported_and_skipped(
    world: World, kubectl: Kubectl, make: Make, apiserver: ApiServer
) -> None:
    provisioner, source, metrics = make()
    kubectl.apply(
        NODECLASS,
        nodepool_doc("broken", "c5.large", limits={"cpu": "lots"}, weight=100),
        nodepool_doc("general", "m5.large"),
    )
    world.pending(1)

    assert launched(provisioner) == [("general", "m5.large")]

    broken = world.client.get(NODE_POOLS, "broken")
    status, message = conditions(broken)["ValidationSucceeded"]
    assert status == "False"
    assert message.startswith("spec.limits.cpu:")
    assert conditions(broken)["Ready"][0] == "False"
    assert conditions(world.client.get(NODE_POOLS, "general"))["Ready"] == ("True", "")
    [event] = [
        e
        for e in world.client.list(EVENTS, "default").items
        if e["involvedObject"].get("name") == "broken" and e["involvedObject"].get("kind") == "NodePool"
    ]
    assert (event["type"], event["reason"]) == ("Warning", "ValidationFailed")
    assert event["message"] == message
    assert event["involvedObject"]["apiVersion"] == "karpenter.sh/v1"
    assert metrics.total(INVALID_KARPENTER_OBJECTS, Kind="NodePool") == 1
    # The next pass reports it again, without a second Event (deduplicated like Karpenter's).
    source.refresh()
    again = [
        e for e in world.client.list(EVENTS, "default").items if e["involvedObject"].get("name") == "broken"
    ]
    assert [(e["metadata"]["name"], e.get("count", 1)) for e in again] == [(event["metadata"]["name"], 1)]
    described = kubectl("describe", "nodepool", "broken")
    assert "ValidationFailed" in described

    kubectl.apply(nodepool_doc("broken", "c5.large", limits={"cpu": "100"}, weight=100))
    world.pending(1, prefix="again")
    assert launched(provisioner) == [("broken", "c5.large")]
    assert conditions(world.client.get(NODE_POOLS, "broken"))["ValidationSucceeded"] == ("True", "")


def test_a_nodepool_without_its_nodeclass_is_not_ready(world: World, kubectl: Kubectl, make: Make) -> None:
    provisioner, _, _ = make()
    orphan = nodepool_doc("orphan", "c5.large")
    orphan["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "missing"
    kubectl.apply(NODECLASS, orphan, nodepool_doc("general", "m5.large"))
    world.pending(1)

    assert launched(provisioner) == [("general", "m5.large")]
    state = conditions(world.client.get(NODE_POOLS, "orphan"))
    assert state["NodeClassReady"] == ("False", "EC2NodeClass missing not found")
    assert state["ValidationSucceeded"] == ("True", "")
    assert state["Ready"][0] == "False"


def test_status_shows_resources_and_resolved_nodeclass(world: World, kubectl: Kubectl, make: Make) -> None:
    provisioner, source, _ = make()
    kubectl.apply(NODECLASS, nodepool_doc("general", "m5.large"))
    world.pending(1)
    [claim] = provisioner.run_once().launched
    record = world.state.nodeclaims.get(claim.id)
    assert record is not None
    world.register_node(record.provider_id, "ip-10-0-0-9.ec2.internal", ready=True)
    world.client.patch(
        NODES,
        "ip-10-0-0-9.ec2.internal",
        {"metadata": {"labels": {"karpenter.sh/nodepool": "general"}}},
    )
    world.client.patch(
        NODES,
        "ip-10-0-0-9.ec2.internal",
        {"status": {"capacity": {"cpu": "2", "memory": "7910Mi", "pods": "29"}}},
        subresource="status",
    )

    read = source.refresh()

    assert read is not None
    pool = world.client.get(NODE_POOLS, "general")
    assert pool["status"]["resources"] == {"cpu": "2", "memory": "7910Mi", "pods": "29", "nodes": "1"}
    assert {k: v[0] for k, v in conditions(pool).items()} == {
        "LimitsConfigured": "False",  # no spec.limits: a note, Ready stays True
        "NodeClassReady": "True",
        "Ready": "True",
        "ValidationSucceeded": "True",
    }
    nodeclass = world.client.get(EC2_NODE_CLASSES, "default")
    assert {k: v[0] for k, v in conditions(nodeclass).items()} == {
        "AMIsReady": "True",
        "CapacityReservationsReady": "True",
        "InstanceProfileReady": "True",
        "Ready": "True",
        "SecurityGroupsReady": "True",
        "SubnetsReady": "True",
        "ValidationSucceeded": "True",
    }
    assert nodeclass["status"]["instanceProfile"] == "demo-node-profile"
    assert {s["zone"] for s in nodeclass["status"]["subnets"]}
    assert nodeclass["status"]["securityGroups"][0]["id"].startswith("sg-")
    assert {a["id"] for a in nodeclass["status"]["amis"]} <= set(world.amis.ids.values())
    table = kubectl("get", "nodepools")
    assert table.splitlines()[1].split()[:4] == ["general", "default", "1", "True"]

    # Nothing changed: nothing is written.
    versions = (pool["metadata"]["resourceVersion"], nodeclass["metadata"]["resourceVersion"])
    world.wall.advance(60)
    source.refresh()
    assert (
        world.client.get(NODE_POOLS, "general")["metadata"]["resourceVersion"],
        world.client.get(EC2_NODE_CLASSES, "default")["metadata"]["resourceVersion"],
    ) == versions


def test_a_launched_claim_counts_in_resources_before_its_node_registers_and_once_after(
    world: World, kubectl: Kubectl, make: Make
) -> None:
    provisioner, source, _ = make(claims=True)
    kubectl.apply(NODECLASS, nodepool_doc("general", "m5.large"))
    world.pending(1)
    [claim] = provisioner.run_once().launched

    # Launched, no Node yet: counted at the instance type's capacity, as Karpenter counts its NodeClaim.
    source.refresh()
    resources = world.client.get(NODE_POOLS, "general")["status"]["resources"]
    assert resources["nodes"] == "1" and resources["cpu"] == "2" and resources["memory"] == "8Gi"
    assert kubectl("get", "nodepools").splitlines()[1].split()[:3] == ["general", "default", "1"]

    record = world.state.nodeclaims.get(claim.id)
    assert record is not None
    world.register_node(record.provider_id, "ip-10-0-0-9.ec2.internal", ready=True)
    world.client.patch(
        NODES, "ip-10-0-0-9.ec2.internal", {"metadata": {"labels": {"karpenter.sh/nodepool": "general"}}}
    )
    world.client.patch(
        NODES,
        "ip-10-0-0-9.ec2.internal",
        {"status": {"capacity": {"cpu": "2", "memory": "7910Mi", "pods": "29"}}},
        subresource="status",
    )
    # Registered, its claim not yet told so: the Node counts, the claim not a second time.
    assert world.state.nodeclaims.get(claim.id).status == "Launched"  # type: ignore[union-attr]
    source.refresh()
    resources = world.client.get(NODE_POOLS, "general")["status"]["resources"]
    assert resources == {"cpu": "2", "memory": "7910Mi", "pods": "29", "nodes": "1"}


def test_an_unreadable_cluster_keeps_the_last_nodepools(
    world: World, kubectl: Kubectl, make: Make, apiserver: ApiServer
) -> None:
    provisioner, source, metrics = make()
    kubectl.apply(NODECLASS, nodepool_doc("general", "m5.large"))
    source.refresh()
    apiserver.faults.inject(403, verb="GET", resource="nodepools", times=1)

    assert source.refresh() is None

    assert [np.name for np in provisioner.config.nodepools] == ["general"]
    assert metrics.total(NODEPOOL_READ_ERRORS) == 1
    world.pending(1)
    assert launched(provisioner) == [("general", "m5.large")]
