"""The real kubectl (1.20, from Debian) against the emulator: what an operator would type."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import DAEMON_SETS, DEPLOYMENTS, NAMESPACES, NODES, PODS
from tests.local.helpers import node, pod
from tests.support.local import Kubectl
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    """No token here: kubectl never sends a bearer token over plain HTTP."""
    with ApiServer(port=0) as server:
        yield server


def bind(apiserver: ApiServer, namespace: str, name: str, node_name: str) -> None:
    """POST a Binding, as a scheduler does."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }
    request = urllib.request.Request(
        f"{apiserver.url}/api/v1/namespaces/{namespace}/pods/{name}/binding",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 201


def rows(output: str) -> list[list[str]]:
    """Table output split into rows of cells, header dropped."""
    return [line.split() for line in output.strip().splitlines()[1:]]


def phase_of(apiserver: ApiServer, namespace: str, name: str) -> str:
    return str(apiserver.store.get(PODS, namespace, name)["status"]["phase"])


def test_get_nodes_shows_readiness(apiserver: ApiServer, kubectl: Kubectl) -> None:
    apiserver.store.create(NODES, node("get-ready"))
    apiserver.store.create(NODES, node("get-notready", ready=False))

    table = {r[0]: r for r in rows(kubectl("get", "nodes"))}

    assert table["get-ready"][1] == "Ready"
    assert table["get-notready"][1] == "NotReady"


def test_get_pods_all_namespaces(apiserver: ApiServer, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team-a")
    kubectl("create", "namespace", "team-b")
    apiserver.store.create(PODS, pod("alpha", "team-a"))
    apiserver.store.create(PODS, pod("beta", "team-b"))

    listed = {(r[0], r[1]) for r in rows(kubectl("get", "pods", "-A"))}

    assert {("team-a", "alpha"), ("team-b", "beta")} <= listed
    assert rows(kubectl("get", "pods", "-n", "team-a"))[0][0] == "alpha"


def test_get_pods_by_phase(apiserver: ApiServer, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "phases")
    apiserver.store.create(NODES, node("phase-node"))
    apiserver.store.create(PODS, pod("waiting", "phases"))
    apiserver.store.create(PODS, pod("running", "phases", node_name="phase-node"))
    wait_for(lambda: phase_of(apiserver, "phases", "running") == "Running")

    pending = kubectl("get", "pods", "-n", "phases", "--field-selector", "status.phase=Pending", "-o", "name")
    running = kubectl(
        "get", "pods", "-n", "phases", "--field-selector", "status.phase!=Pending", "-o", "name"
    )

    assert pending.split() == ["pod/waiting"]
    assert running.split() == ["pod/running"]


def test_cordon_and_uncordon(apiserver: ApiServer, kubectl: Kubectl) -> None:
    apiserver.store.create(NODES, node("cordon-me"))

    assert "cordoned" in kubectl("cordon", "cordon-me")
    assert apiserver.store.get(NODES, None, "cordon-me")["spec"]["unschedulable"] is True
    assert rows(kubectl("get", "node", "cordon-me"))[0][1] == "Ready,SchedulingDisabled"

    assert "uncordoned" in kubectl("uncordon", "cordon-me")
    assert not apiserver.store.get(NODES, None, "cordon-me")["spec"].get("unschedulable")
    assert rows(kubectl("get", "node", "cordon-me"))[0][1] == "Ready"


MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: apply
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: shop}}
  template:
    metadata:
      labels: {{app: shop}}
    spec:
      containers:
      - name: web
        image: nginx:{tag}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: shop
  namespace: apply
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {{app: shop}}
"""


def active_pods(apiserver: ApiServer, namespace: str, app: str) -> list[dict[str, Any]]:
    pods, _ = apiserver.store.list(PODS, namespace)
    return [
        p
        for p in pods
        if p["metadata"].get("labels", {}).get("app") == app and not p["metadata"].get("deletionTimestamp")
    ]


def test_apply_deployment_and_pdb_then_reapply(apiserver: ApiServer, kubectl: Kubectl, tmp_path: Any) -> None:
    kubectl("create", "namespace", "apply")
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(MANIFEST.format(replicas=3, tag="1.25"))

    out = kubectl("apply", "-f", str(manifest))

    assert "deployment.apps/shop created" in out
    assert "poddisruptionbudget.policy/shop created" in out
    pods = wait_for(
        lambda: len(active_pods(apiserver, "apply", "shop")) == 3 and active_pods(apiserver, "apply", "shop")
    )
    assert all(p["spec"]["containers"][0]["image"] == "nginx:1.25" for p in pods)
    assert all(p["status"]["phase"] == "Pending" and not p["spec"].get("nodeName") for p in pods)

    # A second apply sends a strategic merge patch computed from the last-applied annotation.
    manifest.write_text(MANIFEST.format(replicas=2, tag="1.27"))
    out = kubectl("apply", "-f", str(manifest))

    assert "deployment.apps/shop configured" in out
    assert "poddisruptionbudget.policy/shop unchanged" in out
    stored = apiserver.store.get(DEPLOYMENTS, "apply", "shop")
    assert stored["spec"]["replicas"] == 2
    assert stored["spec"]["template"]["spec"]["containers"] == [{"name": "web", "image": "nginx:1.27"}]
    wait_for(lambda: len(active_pods(apiserver, "apply", "shop")) == 2)
    pdb_row = rows(kubectl("get", "pdb", "-n", "apply"))[0]
    assert pdb_row[:3] == ["shop", "N/A", "1"]


def test_scale_deployment(apiserver: ApiServer, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "scaling")
    kubectl("create", "deployment", "api", "--image=nginx", "--replicas=2", "-n", "scaling")
    wait_for(lambda: len(active_pods(apiserver, "scaling", "api")) == 2)

    assert "scaled" in kubectl("scale", "deployment", "api", "--replicas=5", "-n", "scaling")
    wait_for(lambda: len(active_pods(apiserver, "scaling", "api")) == 5)
    assert rows(kubectl("get", "deployment", "api", "-n", "scaling"))[0][1] == "0/5"

    kubectl("scale", "deployment", "api", "--replicas=1", "-n", "scaling")
    remaining = wait_for(
        lambda: (
            len(active_pods(apiserver, "scaling", "api")) == 1 and active_pods(apiserver, "scaling", "api")
        )
    )
    owner = remaining[0]["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet" and owner["controller"] is True


def test_drain_waits_for_the_disruption_budget(apiserver: ApiServer, kubectl: Kubectl, tmp_path: Any) -> None:
    kubectl("create", "namespace", "drain")
    apiserver.store.create(NODES, node("drain-node"))
    manifest = tmp_path / "web.yaml"
    manifest.write_text(
        MANIFEST.replace("shop", "web")
        .replace("namespace: apply", "namespace: drain")
        .replace("maxUnavailable: 1", "minAvailable: 2")
        .format(replicas=2, tag="1")
    )
    kubectl("apply", "-f", str(manifest))
    pods = wait_for(
        lambda: len(active_pods(apiserver, "drain", "web")) == 2 and active_pods(apiserver, "drain", "web")
    )
    for p in pods:
        bind(apiserver, "drain", p["metadata"]["name"], "drain-node")
    # A DaemonSet pod on the node: drain must skip it, which needs its ownerReference to resolve.
    ds = apiserver.store.create(
        DAEMON_SETS,
        {
            "metadata": {"name": "agent", "namespace": "drain"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "a", "image": "agent"}]},
                },
            },
        },
    )
    agent = pod("agent-x", "drain", {"app": "agent"}, node_name="drain-node")
    agent["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": ds["metadata"]["uid"],
            "controller": True,
        }
    ]
    apiserver.store.create(PODS, agent)
    wait_for(lambda: all(phase_of(apiserver, "drain", p["metadata"]["name"]) == "Running" for p in pods))

    blocked = kubectl.run(
        "drain", "drain-node", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3s", check=False
    )

    assert blocked.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in blocked.stderr
    assert apiserver.store.get(NODES, None, "drain-node")["spec"]["unschedulable"] is True
    on_node = kubectl(
        "get", "pods", "-n", "drain", "--field-selector", "spec.nodeName=drain-node", "-o", "name"
    )
    assert sorted(on_node.split()) == sorted([f"pod/{p['metadata']['name']}" for p in pods] + ["pod/agent-x"])

    kubectl(
        "patch",
        "pdb",
        "web",
        "-n",
        "drain",
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/minAvailable"},'
        ' {"op": "add", "path": "/spec/maxUnavailable", "value": "100%"}]',
    )
    done = kubectl.run(
        "drain", "drain-node", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s"
    )

    # kubectl 1.20 reports a finished drain as "evicted", later versions as "drained".
    assert {"node/drain-node drained", "node/drain-node evicted"} & set(done.stdout.splitlines())
    assert "ignoring DaemonSet-managed Pods: drain/agent-x" in done.stderr
    on_node = kubectl(
        "get", "pods", "-n", "drain", "--field-selector", "spec.nodeName=drain-node", "-o", "name"
    )
    assert on_node.split() == ["pod/agent-x"]
    # The Deployment replaced the evicted pods; they wait, unbound, for a scheduler.
    assert len(active_pods(apiserver, "drain", "web")) == 2


def test_namespace_must_exist(apiserver: ApiServer, kubectl: Kubectl) -> None:
    result = kubectl.run("create", "deployment", "x", "--image=nginx", "-n", "nowhere", check=False)

    assert result.returncode != 0
    assert 'namespaces "nowhere" not found' in result.stderr
    assert apiserver.store.try_get(NAMESPACES, None, "nowhere") is None


@pytest.mark.parametrize("selector", ["tier in (front,edge)", "tier=front", "!legacy"])
def test_label_selectors(apiserver: ApiServer, kubectl: Kubectl, selector: str) -> None:
    if apiserver.store.try_get(NAMESPACES, None, "labels") is None:
        kubectl("create", "namespace", "labels")
        apiserver.store.create(PODS, pod("front", "labels", {"tier": "front"}))
        apiserver.store.create(PODS, pod("back", "labels", {"tier": "back", "legacy": "yes"}))

    names = kubectl("get", "pods", "-n", "labels", "-l", selector, "-o", "name").split()

    assert names == ["pod/front"]
