"""The emulator's kube-scheduler: binds pending pods with Fleetwright's predicates, explains the rest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.kube.cluster import is_unschedulable
from fleetwright.local.apiserver.controllers import PodLifecycleController
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.store import Store
from fleetwright.local.kube_scheduler import KubeScheduler
from fleetwright.local.nodelifecycle import NodeLifecycleController
from tests.local.helpers import node, pod
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def scheduler(store: Store) -> KubeScheduler:
    return KubeScheduler(store)


def sized_node(
    name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110", ready: bool = True, **labels: str
) -> dict[str, Any]:
    obj = node(name, labels, ready=ready)
    obj["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "pods": pods}
    return obj


def sized_pod(name: str, cpu: str = "1", memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    obj = pod(name)
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    obj["spec"].update(spec)
    return obj


def scheduled_condition(store: Store, name: str) -> dict[str, Any]:
    conditions = store.get(PODS, "default", name)["status"].get("conditions") or []
    return next(c for c in conditions if c["type"] == "PodScheduled")


def node_of(store: Store, name: str) -> str | None:
    node_name = store.get(PODS, "default", name)["spec"].get("nodeName")
    return str(node_name) if node_name else None


def test_binds_pods_that_fit_and_explains_the_rest(store: Store, scheduler: KubeScheduler) -> None:
    store.create(NODES, sized_node("small", cpu="2"))
    store.create(NODES, sized_node("large", cpu="4"))
    for i in range(5):
        store.create(PODS, sized_pod(f"web-{i}"))
    store.create(PODS, sized_pod("huge", cpu="8"))

    summary = scheduler.run_once()

    bound = {f"web-{i}": node_of(store, f"web-{i}") for i in range(5)}
    assert all(bound.values())
    assert sum(1 for n in bound.values() if n == "small") <= 2
    assert sum(1 for n in bound.values() if n == "large") <= 4
    assert scheduled_condition(store, "web-0")["status"] == "True"
    assert set(summary.bound) == {f"default/web-{i}" for i in range(5)}

    assert node_of(store, "huge") is None
    condition = scheduled_condition(store, "huge")
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    huge = store.get(PODS, "default", "huge")
    assert huge["status"]["phase"] == "Pending"
    assert is_unschedulable(huge)  # what Fleetwright's provisioner looks for


def test_bound_pods_use_up_room(store: Store, scheduler: KubeScheduler) -> None:
    store.create(NODES, sized_node("n1", cpu="2"))
    store.create(PODS, sized_pod("running", cpu="1500m", nodeName="n1"))
    store.create(PODS, sized_pod("waiting", cpu="1"))

    scheduler.run_once()

    assert node_of(store, "waiting") is None
    assert scheduled_condition(store, "waiting")["message"] == "0/1 nodes are available: 1 Insufficient cpu."


def test_taints_selectors_cordon_and_readiness(store: Store, scheduler: KubeScheduler) -> None:
    NodeLifecycleController(store).start()  # taints the NotReady node, as kube-controller-manager does
    gpu = sized_node("gpu", disktype="ssd")
    gpu["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    store.create(NODES, gpu)
    cordoned = sized_node("cordoned", disktype="ssd")
    cordoned["spec"]["unschedulable"] = True
    store.create(NODES, cordoned)
    store.create(NODES, sized_node("booting", ready=False, disktype="ssd"))
    store.create(NODES, sized_node("hdd", disktype="hdd"))

    store.create(PODS, sized_pod("wants-ssd", nodeSelector={"disktype": "ssd"}))
    store.create(
        PODS,
        sized_pod(
            "tolerates-gpu",
            nodeSelector={"disktype": "ssd"},
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        ),
    )
    store.create(PODS, sized_pod("anywhere"))

    scheduler.run_once()

    assert node_of(store, "tolerates-gpu") == "gpu"
    assert node_of(store, "anywhere") == "hdd"
    assert node_of(store, "wants-ssd") is None
    assert scheduled_condition(store, "wants-ssd")["message"] == (
        "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) were unschedulable."
    )
    assert store.get(NODES, None, "booting")["spec"]["taints"] == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    ]


def test_a_not_ready_node_takes_the_pods_that_tolerate_its_taint(
    store: Store, scheduler: KubeScheduler
) -> None:
    NodeLifecycleController(store).start()
    store.create(NODES, sized_node("booting", ready=False))
    tolerates = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]
    store.create(PODS, sized_pod("agent", tolerations=tolerates))
    store.create(PODS, sized_pod("app"))

    scheduler.run_once()
    assert node_of(store, "agent") == "booting" and node_of(store, "app") is None

    store.mutate(NODES, None, "booting", _ready, "status")
    assert "taints" not in store.get(NODES, None, "booting")["spec"]
    scheduler.run_once()
    assert node_of(store, "app") == "booting"


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def test_no_nodes(store: Store, scheduler: KubeScheduler) -> None:
    store.create(PODS, sized_pod("lonely"))
    scheduler.run_once()
    assert scheduled_condition(store, "lonely")["message"] == "no nodes available to schedule pods"


def test_other_schedulers_pods_are_left_alone(store: Store, scheduler: KubeScheduler) -> None:
    store.create(NODES, sized_node("n1"))
    store.create(PODS, sized_pod("custom", schedulerName="my-scheduler"))

    scheduler.run_once()

    custom = store.get(PODS, "default", "custom")
    assert custom["spec"].get("nodeName") is None
    assert not custom["status"].get("conditions")


def test_unchanged_verdict_is_not_rewritten(store: Store, scheduler: KubeScheduler) -> None:
    store.create(NODES, sized_node("n1", cpu="1"))
    store.create(PODS, sized_pod("big", cpu="2"))
    scheduler.run_once()
    version = store.get(PODS, "default", "big")["metadata"]["resourceVersion"]

    summary = scheduler.run_once()

    assert summary.unschedulable == {}
    assert store.get(PODS, "default", "big")["metadata"]["resourceVersion"] == version


def test_a_thousand_pods_in_one_pass(store: Store, scheduler: KubeScheduler) -> None:
    for i in range(8):
        store.create(NODES, sized_node(f"n{i}", cpu="64", memory="256Gi", pods="110"))
    for i in range(1000):
        store.create(PODS, sized_pod(f"p{i:04d}", cpu="250m", memory="512Mi"))

    summary = scheduler.run_once()

    assert len(summary.bound) == 880  # 8 nodes × 110 pods
    assert len(summary.unschedulable) == 120
    assert set(summary.unschedulable.values()) == {"0/8 nodes are available: 8 Too many pods."}
    per_node: dict[str, int] = {}
    for obj in store.list(PODS)[0]:
        if obj["spec"].get("nodeName"):
            per_node[obj["spec"]["nodeName"]] = per_node.get(obj["spec"]["nodeName"], 0) + 1
    assert per_node == {f"n{i}": 110 for i in range(8)}


@pytest.fixture
def running(store: Store) -> Iterator[KubeScheduler]:
    """The scheduler on its worker thread, with pods started once bound."""
    scheduler = KubeScheduler(store, interval=0.02)
    lifecycle = PodLifecycleController(store)
    lifecycle.start()
    scheduler.start()
    yield scheduler
    scheduler.stop()
    lifecycle.stop()


def test_background_passes_follow_pod_and_node_changes(store: Store, running: KubeScheduler) -> None:
    store.create(PODS, sized_pod("early"))
    wait_for(lambda: scheduled_condition_or_none(store, "early"))
    assert scheduled_condition(store, "early")["reason"] == "Unschedulable"

    store.create(NODES, sized_node("n1"))

    wait_for(lambda: store.get(PODS, "default", "early")["status"]["phase"] == "Running")
    assert node_of(store, "early") == "n1"

    store.create(PODS, sized_pod("late"))
    wait_for(lambda: node_of(store, "late") == "n1")


def scheduled_condition_or_none(store: Store, name: str) -> dict[str, Any] | None:
    conditions = store.get(PODS, "default", name)["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)
