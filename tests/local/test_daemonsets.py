"""The emulator's DaemonSet controller: one bound pod per node the template accepts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.local.apiserver.controllers import PodLifecycleController
from fleetwright.local.apiserver.resources import DAEMON_SETS, NODES, PODS
from fleetwright.local.apiserver.store import Store
from fleetwright.local.daemonsets import DaemonSetController
from tests.local.helpers import node


@pytest.fixture
def store() -> Iterator[Store]:
    store = Store()
    controllers = [DaemonSetController(store), PodLifecycleController(store)]
    for controller in controllers:
        controller.start()
    yield store
    for controller in controllers:
        controller.stop()


def daemonset(name: str = "agent", **template_spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}], **template_spec},
            },
        },
    }


def tainted(name: str, key: str, value: str, effect: str, **labels: str) -> dict[str, Any]:
    obj = node(name, labels)
    obj["spec"]["taints"] = [{"key": key, "value": value, "effect": effect}]
    return obj


def placement(store: Store, ds: str = "agent") -> dict[str, str]:
    """node → pod name of the DaemonSet's live pods."""
    pods = store.list(PODS, "kube-system")[0]
    found = {}
    for pod in pods:
        if pod["metadata"]["labels"].get("app") == ds and not pod["metadata"].get("deletionTimestamp"):
            assert pod["spec"]["nodeName"] not in found, "two pods of one DaemonSet on a node"
            found[pod["spec"]["nodeName"]] = pod["metadata"]["name"]
    return found


def test_pods_go_to_matching_nodes_only_and_follow_nodes(store: Store) -> None:
    store.create(NODES, node("worker-a", {"role": "worker"}))
    store.create(NODES, tainted("worker-gpu", "dedicated", "gpu", "NoSchedule", role="worker"))
    store.create(NODES, node("infra", {"role": "infra"}))
    store.create(DAEMON_SETS, daemonset(nodeSelector={"role": "worker"}))

    assert set(placement(store)) == {"worker-a"}

    store.create(NODES, node("worker-b", {"role": "worker"}))
    assert set(placement(store)) == {"worker-a", "worker-b"}

    store.delete(NODES, None, "worker-a")
    assert set(placement(store)) == {"worker-b"}

    status = store.get(DAEMON_SETS, "kube-system", "agent")["status"]
    assert status["desiredNumberScheduled"] == 1
    assert status["currentNumberScheduled"] == 1
    assert status["numberReady"] == 1
    assert status["numberMisscheduled"] == 0


def test_pods_are_bound_owned_and_tolerate_node_conditions(store: Store) -> None:
    store.create(NODES, node("n1"))
    ds = store.create(DAEMON_SETS, daemonset())

    pods = store.list(PODS, "kube-system")[0]
    assert len(pods) == 1
    pod = pods[0]
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["name"].startswith("agent-")
    assert pod["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    keys = {t["key"] for t in pod["spec"]["tolerations"]}
    assert {"node.kubernetes.io/not-ready", "node.kubernetes.io/unschedulable"} <= keys
    assert pod["status"]["phase"] == "Running"

    store.delete(DAEMON_SETS, "kube-system", "agent")
    assert store.list(PODS, "kube-system")[0] == []


def test_tolerations_and_required_node_affinity_decide(store: Store) -> None:
    store.create(NODES, tainted("gpu-1", "nvidia.com/gpu", "true", "NoSchedule", zone="a"))
    store.create(NODES, node("plain-1", {"zone": "a"}))
    store.create(NODES, node("plain-2", {"zone": "b"}))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    store.create(DAEMON_SETS, daemonset("zonal", affinity=affinity))
    store.create(
        DAEMON_SETS,
        daemonset("gpu-plugin", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    )

    assert set(placement(store, "zonal")) == {"plain-1"}
    assert set(placement(store, "gpu-plugin")) == {"gpu-1", "plain-1", "plain-2"}


def test_noexecute_taint_evicts_noschedule_taint_does_not(store: Store) -> None:
    store.create(NODES, node("n1"))
    store.create(NODES, node("n2"))
    store.create(DAEMON_SETS, daemonset())
    assert set(placement(store)) == {"n1", "n2"}

    for name, effect in (("n1", "NoSchedule"), ("n2", "NoExecute")):
        current = store.get(NODES, None, name)
        current["spec"]["taints"] = [{"key": "maintenance", "effect": effect}]
        store.update(NODES, current)

    assert set(placement(store)) == {"n1"}


def test_label_change_removes_pod(store: Store) -> None:
    store.create(NODES, node("n1", {"role": "worker"}))
    store.create(DAEMON_SETS, daemonset(nodeSelector={"role": "worker"}))
    assert set(placement(store)) == {"n1"}

    current = store.get(NODES, None, "n1")
    current["metadata"]["labels"]["role"] = "infra"
    store.update(NODES, current)

    assert placement(store) == {}
    assert store.get(DAEMON_SETS, "kube-system", "agent")["status"]["desiredNumberScheduled"] == 0


def test_template_change_replaces_pods_unless_on_delete(store: Store) -> None:
    store.create(NODES, node("n1"))
    store.create(DAEMON_SETS, daemonset("rolling"))
    on_delete = daemonset("manual")
    on_delete["spec"]["updateStrategy"] = {"type": "OnDelete"}
    store.create(DAEMON_SETS, on_delete)
    before = {ds: placement(store, ds)["n1"] for ds in ("rolling", "manual")}

    for ds in ("rolling", "manual"):
        current = store.get(DAEMON_SETS, "kube-system", ds)
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
        store.update(DAEMON_SETS, current, "kube-system")

    rolled = store.get(PODS, "kube-system", placement(store, "rolling")["n1"])
    assert rolled["metadata"]["name"] != before["rolling"]
    assert rolled["spec"]["containers"][0]["image"] == "agent:2"
    assert placement(store, "manual")["n1"] == before["manual"]
    status = store.get(DAEMON_SETS, "kube-system", "manual")["status"]
    assert status["updatedNumberScheduled"] == 0
    assert status["observedGeneration"] == 2
