"""``fleetwright explain`` against a cluster (the emulator, through a kubeconfig): the same answers as on the
same objects as manifests, and only read requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
import yaml

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.apiserver.resources import NAMESPACES, NODES, POD_DISRUPTION_BUDGETS, PODS
from fleetwright.local.apiserver.store import Store
from tests.cli.test_explain_node import CLASS, NOW, node, pdb, pod, pool
from tests.support.cli import Run

TOKEN = "explain-test-token"
RBAC = Path(__file__).resolve().parents[2] / "docs" / "explain-rbac.yaml"
# The emulator stamps creationTimestamp with its clock: the nodes are created on the manifests' date.
CREATED = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
READS = {"get", "list"}

PENDING = """
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: shop, labels: {app: batch}}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "3500m", memory: 4Gi}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"""

DOCUMENTS = [
    CLASS,
    pool(),
    node("node-a"),
    node("node-b"),
    pod("web-1", "node-a"),
    pod("web-2", "node-b"),
    pdb(0),
    PENDING,
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    """The emulator holding :data:`DOCUMENTS` (no controller changes them), and a kubeconfig for it."""
    server = ApiServer(
        port=0,
        token=TOKEN,
        rbac=RBAC,  # enforced on the users add_user makes; the token above stays the administrator
        store=Store(clock=lambda: CREATED),
        deployment_controller=False,
        pod_lifecycle=False,
        disruption_controller=False,
        attach_detach=False,
        node_lifecycle=False,
    )
    with server:
        install_karpenter_crds(server.store)
        _seed(server, [yaml.safe_load(dedent(d)) for d in DOCUMENTS])
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")


def _seed(server: ApiServer, documents: list[dict[str, Any]]) -> None:
    store = server.store
    store.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    kinds = {"Node": NODES, "Pod": PODS, "PodDisruptionBudget": POD_DISRUPTION_BUDGETS}
    for doc in documents:
        if doc["kind"] in kinds:
            server.seed(kinds[doc["kind"]], [doc], keep_status=True)
        else:
            plural = "nodepools" if doc["kind"] == "NodePool" else "ec2nodeclasses"
            rt = store.registry.lookup(doc["apiVersion"].split("/")[0], "v1", plural)
            assert rt is not None
            store.create(rt, doc)


def _manifests(tmp_path: Path) -> Path:
    path = tmp_path / "all.yaml"
    path.write_text("---".join(dedent(d) for d in DOCUMENTS))
    return path


def _explain(run: Run, server: ApiServer, *args: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The JSON answer and the requests it made, by verb."""
    before = server.traffic.snapshot().by_verb
    code, out, err = run("explain", *args, "-o", "json", "--now", NOW)
    assert code == 0, err
    after = server.traffic.snapshot().by_verb
    made = {verb: count - before.get(verb, 0) for verb, count in after.items() if count > before.get(verb, 0)}
    document: dict[str, Any] = json.loads(out)
    return document, made


def test_explain_node_reads_the_cluster_and_answers_as_on_manifests(
    run: Run, cluster: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    server, kubeconfig = cluster
    live, made = _explain(run, server, "node", "node-a", "--kubeconfig", str(kubeconfig))
    offline, _ = _explain(run, server, "node", "node-a", "-f", str(_manifests(tmp_path)))
    assert live == offline
    assert live["events"][0]["reason"] == "DisruptionBlocked"
    assert made and set(made) <= READS, made  # read-only: no create, update, patch or delete


def test_explain_pod_reads_the_cluster_and_answers_as_on_manifests(
    run: Run, cluster: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    server, kubeconfig = cluster
    live, made = _explain(run, server, "pod", "shop/waiting", "--kubeconfig", str(kubeconfig))
    offline, _ = _explain(run, server, "pod", "shop/waiting", "-f", str(_manifests(tmp_path)))
    assert live == offline
    assert live["decision"]["action"] == "launch"
    assert live["event"]["reason"] == "Nominated"
    assert made and set(made) <= READS, made


def test_a_running_pod_of_the_cluster_is_explained_too(run: Run, cluster: tuple[ApiServer, Path]) -> None:
    server, kubeconfig = cluster
    live, made = _explain(run, server, "pod", "shop/web-1", "--kubeconfig", str(kubeconfig))
    assert live["decision"] == {"action": "bound", "node": "node-a", "nodeClaim": None, "reason": None}
    assert set(made) <= READS


def test_an_unreadable_kubeconfig_fails_with_a_clear_error(run: Run, tmp_path: Path) -> None:
    code, out, err = run("explain", "node", "node-a", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 1
    assert out == ""
    assert err.startswith("error: cannot read the cluster: ")


def test_a_nodepool_of_the_cluster_without_its_node_class_is_skipped_with_a_warning(
    run: Run, cluster: tuple[ApiServer, Path]
) -> None:
    server, kubeconfig = cluster
    orphan = yaml.safe_load(
        pool().replace("name: general", "name: orphan", 1).replace("name: default", "name: gone")
    )
    rt = server.store.registry.lookup("karpenter.sh", "v1", "nodepools")
    assert rt is not None
    server.store.create(rt, orphan)
    code, out, err = run("explain", "pod", "shop/waiting", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert code == 0, err
    assert "NodePool orphan skipped: EC2NodeClass gone not found" in err
    assert [p["name"] for p in json.loads(out)["nodePools"]] == ["general"]


def _nodeclaim(server: ApiServer, name: str, status: dict[str, Any], labels: dict[str, str]) -> None:
    rt = server.store.registry.lookup("karpenter.sh", "v1", "nodeclaims")
    assert rt is not None
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
        },
        "status": status,
    }
    server.seed(rt, [claim], keep_status=True)


def test_the_nominated_event_names_the_nodeclaim_of_the_node_the_pod_would_go_to(
    run: Run, cluster: tuple[ApiServer, Path]
) -> None:
    server, kubeconfig = cluster
    _nodeclaim(server, "general-x7k2p", {"nodeName": "node-a"}, {"karpenter.sh/nodepool": "general"})
    small = yaml.safe_load(dedent(PENDING).replace("waiting", "small").replace('"3500m"', "100m"))
    server.seed(PODS, [small], keep_status=True)
    live, _ = _explain(run, server, "pod", "shop/small", "--kubeconfig", str(kubeconfig))
    assert live["decision"]["action"] == "existing-node"
    assert live["decision"]["node"] == "node-a"  # the first node by name with room
    assert live["event"]["message"] == "Pod should schedule on: nodeclaim/general-x7k2p, node/node-a"


def test_the_documented_cluster_role_is_all_explain_needs(
    run: Run, cluster: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    server, _ = cluster
    token = server.add_user("alice", ("fleetwright-explain",))
    kubeconfig = server.write_kubeconfig(tmp_path / "alice", token=token)
    for args in (("node", "node-a"), ("pod", "shop/waiting")):
        code, out, err = run("explain", *args, "--kubeconfig", str(kubeconfig), "--now", NOW)
        assert code == 0 and out, err
    assert server.authorizer is not None
    asked = [r for r in server.authorizer.records if r.user.name == "alice"]
    assert asked and all(r.allowed for r in asked)
    assert {r.request.verb for r in asked} == {"list"}


def test_a_user_without_the_role_gets_a_clear_error(
    run: Run, cluster: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    server, _ = cluster
    token = server.add_user("bob", ("someone-else",))
    kubeconfig = server.write_kubeconfig(tmp_path / "bob", token=token)
    code, out, err = run("explain", "node", "node-a", "--kubeconfig", str(kubeconfig))
    assert (code, out) == (1, "")
    assert err.startswith("error: cannot read the cluster: ")
    assert "forbidden" in err.lower()


def test_a_nodeclaim_on_its_way_takes_the_pod_instead_of_a_new_launch(
    run: Run, cluster: tuple[ApiServer, Path]
) -> None:
    server, kubeconfig = cluster
    launched = {
        "karpenter.sh/nodepool": "general",
        "node.kubernetes.io/instance-type": "m5.xlarge",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "on-demand",
    }
    room = {"cpu": "3920m", "memory": "14Gi", "pods": "58"}
    _nodeclaim(server, "general-on-way", {"allocatable": room, "capacity": room}, launched)
    live, made = _explain(run, server, "pod", "shop/waiting", "--kubeconfig", str(kubeconfig))
    assert live["decision"]["action"] == "existing-node"
    assert live["decision"]["node"] == "general-on-way"
    assert live["event"]["message"] == "Pod should schedule on: nodeclaim/general-on-way"
    assert set(made) <= READS
    # the disruption planner sees it on its way too: the first node by name with room for node-a's pod
    node, _ = _explain(run, server, "node", "node-a", "--kubeconfig", str(kubeconfig))
    assert node["removal"]["pods"][0]["node"] == "general-on-way"
