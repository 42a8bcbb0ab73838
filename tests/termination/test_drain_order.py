"""Which pods a drain evicts, waits for and leaves, and in what order, as Karpenter's terminator does:
four groups (workloads, DaemonSets, critical workloads, critical DaemonSets), each evicted once the one
before it is gone; pods tolerating ``karpenter.sh/disrupted:NoSchedule`` left alone; pods stuck
terminating not waited for. Each pass is given its time (``now``): nothing here sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.kube.client import KubeClient
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import DAEMON_SETS, NODES, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.model.kube import start_time
from fleetwright.termination.continuation import parse_time
from fleetwright.termination.drain import drain_pass
from tests.kube.objects import node_object, pod_object
from tests.support.termination import Harness

HOLD = "example.com/hold"  # a finalizer that keeps an evicted pod terminating until the test lets it go
NODE = "node-a"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(port=0, daemonset_controller=True) as api:
        yield api


@pytest.fixture
def kube(server: ApiServer) -> Iterator[KubeCluster]:
    client = KubeClient(ClusterConfig(server=server.url), sleep=lambda _s: None)
    cluster = KubeCluster(client)
    client.create(NODES, node_object(NODE))
    yield cluster
    client.close()


def _pod(kube: KubeCluster, name: str, *, daemonset: str = "", critical: str = "", **spec: Any) -> None:
    body = pod_object(name, node=NODE)
    body["metadata"]["finalizers"] = [HOLD]
    if daemonset:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset, "uid": f"uid-{daemonset}"}
        ]
    if critical:
        body["spec"]["priorityClassName"] = critical
    body["spec"].update(spec)
    kube.client.create(PODS, body, "default")


def _let_go(kube: KubeCluster, *names: str) -> None:
    """The evicted pods finish terminating."""
    for name in names:
        kube.client.patch(PODS, name, {"metadata": {"finalizers": None}}, "default")


def _started(kube: KubeCluster, name: str) -> float:
    """When the pod started, on the API server's clock: the passes' times are counted from it."""
    started = start_time((kube.get_pod("default", name) or {})["status"]["startTime"])
    assert started is not None
    return started


def _names(keys: list[str]) -> list[str]:
    return sorted(k.split("/", 1)[1] for k in keys)


def test_evicts_pods_in_order_and_waits_until_each_group_is_fully_deleted(kube: KubeCluster) -> None:
    _pod(kube, "web")
    _pod(kube, "logs-agent", daemonset="logs")
    _pod(kube, "coredns", critical="system-cluster-critical")
    _pod(kube, "metrics", critical="system-node-critical")
    _pod(kube, "cni", daemonset="cni", critical="system-node-critical")
    now = _started(kube, "web")
    deadline = now + 86_400
    groups = [["web"], ["logs-agent"], ["coredns", "metrics"], ["cni"]]

    for i, group in enumerate(groups):
        started = drain_pass(kube, NODE, now=now, deadline=deadline)
        assert _names(started.evicted) == group
        assert not started.done
        # Evicted but still terminating: the group stays open, the next one is not touched.
        held = drain_pass(kube, NODE, now=now + 1, deadline=deadline)
        assert held.evicted == [] and not held.done
        assert set(_names(held.waiting)) >= set(group)
        later = {name for g in groups[i + 1 :] for name in g}
        assert later <= set(_names(held.waiting))
        _let_go(kube, *group)

    final = drain_pass(kube, NODE, now=now + 2, deadline=deadline)
    assert final.done and final.remaining == 0


def test_a_do_not_disrupt_pod_keeps_its_group_open(kube: KubeCluster) -> None:
    _pod(kube, "batch")
    kube.client.patch(
        PODS, "batch", {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, "default"
    )
    _pod(kube, "logs-agent", daemonset="logs")
    _pod(kube, "coredns", critical="system-cluster-critical")

    now = _started(kube, "batch")
    result = drain_pass(kube, NODE, now=now, deadline=now + 86_400)

    assert result.evicted == [] and not result.done
    assert _names(result.waiting) == ["batch", "coredns", "logs-agent"]


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "karpenter.sh/disrupted", "operator": "Equal", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "operator": "Exists"},
        {"operator": "Exists"},
    ],
    ids=["equal", "exists", "any-effect", "every-taint"],
)
def test_does_not_evict_pods_that_tolerate_the_disruption_taint(
    kube: KubeCluster, toleration: dict[str, str]
) -> None:
    _pod(kube, "web")
    _pod(kube, "tolerant", tolerations=[toleration])

    now = _started(kube, "web")
    first = drain_pass(kube, NODE, now=now, deadline=now + 86_400)
    _let_go(kube, "web")
    second = drain_pass(kube, NODE, now=now + 1, deadline=now + 86_400)

    assert _names(first.evicted) == ["web"]
    assert "default/tolerant" not in first.waiting
    # The node does not wait for it: drained with the tolerant pod still there, untouched.
    assert second.done and second.evicted == []
    assert kube.get_pod("default", "tolerant") is not None
    assert not (kube.get_pod("default", "tolerant") or {})["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoExecute"},
        {"key": "karpenter.sh/disrupted", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
    ],
    ids=["unschedulable", "other-effect", "other-value"],
)
def test_evicts_pods_whose_tolerations_do_not_cover_the_disruption_taint(
    kube: KubeCluster, toleration: dict[str, str]
) -> None:
    _pod(kube, "web", tolerations=[toleration])
    now = _started(kube, "web")

    result = drain_pass(kube, NODE, now=now, deadline=now + 86_400)

    assert _names(result.evicted) == ["web"]


def _daemonset(kube: KubeCluster, name: str, tolerations: list[dict[str, str]] | None = None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": name, "image": f"{name}:1"}]}
    if tolerations:
        spec["tolerations"] = tolerations
    kube.client.create(
        DAEMON_SETS,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        },
        "kube-system",
    )


def _daemon_pods(kube: KubeCluster) -> dict[str, str]:
    """DaemonSet → its live pod on the node."""
    return {
        p["metadata"]["labels"]["app"]: p["metadata"]["name"]
        for p in kube.list_pods_on_node(NODE)
        if p["metadata"]["namespace"] == "kube-system" and not p["metadata"].get("deletionTimestamp")
    }


def test_an_evicted_daemonset_pod_is_not_put_back_on_the_disrupted_node(kube: KubeCluster) -> None:
    _daemonset(kube, "logs")  # the controller's own tolerations only
    _daemonset(kube, "cni", tolerations=[{"operator": "Exists"}])
    assert set(_daemon_pods(kube)) == {"logs", "cni"}  # the DaemonSet controller is at work
    cni = _daemon_pods(kube)["cni"]
    kube.mark_disrupted(NODE)
    now = start_time((kube.get_pod("kube-system", cni) or {})["status"]["startTime"]) or 0.0

    first = drain_pass(kube, NODE, now=now, deadline=now + 86_400)
    second = drain_pass(kube, NODE, now=now + 1, deadline=now + 86_400)

    assert [k.split("/")[0] for k in first.evicted] == ["kube-system"]
    assert first.done  # the evicted pod went at once and its controller did not recreate it
    assert second.done and second.evicted == []
    assert _daemon_pods(kube) == {"cni": cni}  # the agent tolerating every taint stays to the end


def test_bypasses_pods_stuck_terminating_past_their_grace_period(kube: KubeCluster) -> None:
    _pod(kube, "stuck")
    kube.delete_pod("default", "stuck", grace_period_seconds=30)
    ends = parse_time((kube.get_pod("default", "stuck") or {})["metadata"]["deletionTimestamp"])
    assert ends is not None

    within = drain_pass(kube, NODE, now=ends + 60, deadline=ends + 10_000)
    past = drain_pass(kube, NODE, now=ends + 61, deadline=ends + 10_000)

    assert not within.done and within.remaining == 1
    assert past.done and past.remaining == 0


def test_pods_due_at_the_deadline_are_deleted_whatever_their_group(kube: KubeCluster) -> None:
    _pod(kube, "web", terminationGracePeriodSeconds=30)
    _pod(kube, "logs-agent", daemonset="logs", terminationGracePeriodSeconds=300)
    now = _started(kube, "web")

    result = drain_pass(kube, NODE, now=now, deadline=now + 200)

    # The DaemonSet pod needs 300 s, more than is left: deleted now, with what is left, though its group
    # is not due for eviction; the workload pod is evicted as usual.
    assert _names(result.deleted) == ["logs-agent"] and result.grace == {"default/logs-agent": 200}
    assert _names(result.evicted) == ["web"]


def test_a_refused_daemonset_eviction_does_not_let_the_critical_group_through(
    server: ApiServer, kube: KubeCluster
) -> None:
    _pod(kube, "logs-agent", daemonset="logs")
    _pod(kube, "coredns", critical="system-cluster-critical")
    server.faults.inject(503, verb="POST", resource="pods", subresource="eviction", times=20)
    now = _started(kube, "coredns")

    with pytest.raises(KubeApiError):
        drain_pass(kube, NODE, now=now, deadline=now + 86_400)
    server.faults.clear()
    assert not (kube.get_pod("default", "coredns") or {})["metadata"].get("deletionTimestamp")

    after = drain_pass(kube, NODE, now=now + 1, deadline=now + 86_400)
    assert _names(after.evicted) == ["logs-agent"]
    assert not (kube.get_pod("default", "coredns") or {})["metadata"].get("deletionTimestamp")


def test_the_workflow_keeps_the_group_order_through_an_api_outage(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web", node)
    harness.pod("logs-agent", node, owner=("DaemonSet", "logs"))
    harness.pod("coredns", node, priority_class="system-cluster-critical")
    tolerant = pod_object("cni", node=node)
    tolerant["spec"]["tolerations"] = [{"operator": "Exists"}]
    harness.world.client.create(PODS, tolerant, "default")
    drains: list[int] = []

    def outage_at_second_pass(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain":
            drains.append(1)
            if len(drains) == 2:
                harness.apiserver.faults.outage(100, clock=harness.clock)

    harness.before_step.append(outage_at_second_pass)
    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    assert harness.apiserver.faults.reset_connections > 0
    passes = [_names(o["drain"]["evicted"]) for o in harness.outputs("drain") if o["drain"]["evicted"]]
    assert passes == [["web"], ["logs-agent"], ["coredns"]]
    assert not any(o["drain"]["deleted"] for o in harness.outputs("drain"))
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
