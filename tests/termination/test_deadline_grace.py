"""Karpenter's terminationGracePeriod semantics: each pod is deleted early enough for its own grace period
to end by the node's deadline, and the instance is terminated at the deadline."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.kube.client import KubeClient
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.resources import EVENTS, NODES, POD_DISRUPTION_BUDGETS, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.termination.drain import drain_pass
from tests.kube.objects import pod_object
from tests.support.termination import Harness

DEADLINE_IN = 1000


def _pdb(client: KubeClient, selector: dict[str, str], min_available: int = 1) -> None:
    client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}},
        },
        "default",
    )


def _pod(client: KubeClient, name: str, node: str, grace: int, **meta: Any) -> None:
    body = pod_object(name, node=node, labels={"app": "db"})
    body["spec"]["terminationGracePeriodSeconds"] = grace
    body["metadata"].update(meta)
    client.create(PODS, body, "default")


def test_a_pod_is_deleted_its_grace_period_before_the_deadline_and_keeps_it(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    _pod(harness.world.client, "db-0", node, 300)
    _pdb(harness.world.client, {"app": "db"})  # the eviction API never lets it go
    deadline = harness.clock() + DEADLINE_IN
    seen: list[float] = []
    harness.before_step.append(lambda step, _p: seen.append(harness.clock()) if step == "drain" else None)

    result = harness.run(
        harness.request(instance, node, seconds_to_deadline=DEADLINE_IN, drainIntervalSeconds=5)
    )

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    deleting = [i for i, o in enumerate(outputs) if o["deleted"]]
    assert len(deleting) == 1
    # The waits between passes end when the pod falls due: it is deleted 300 s before the deadline with
    # its whole grace period, past the budget that blocked every eviction until then.
    assert seen[deleting[0]] == deadline - 300
    assert outputs[deleting[0]]["grace"] == {"default/db-0": 300}
    assert all(o["blocked"] for o in outputs[: deleting[0]])
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    # kubectl describe pod says why it went past its budget.
    [event] = [e for e in harness.world.client.list(EVENTS, "default").items if e["reason"] == "Disrupted"]
    assert event["involvedObject"]["kind"] == "Pod" and event["involvedObject"]["name"] == "db-0"
    assert "granted 300 seconds of grace-period of its 300 terminationGracePeriodSeconds" in event["message"]


def test_a_do_not_disrupt_pod_is_deleted_in_time_for_its_grace_period(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    _pod(harness.world.client, "job", node, 60, annotations={"karpenter.sh/do-not-disrupt": "true"})
    deadline = harness.clock() + 120
    seen: list[float] = []
    harness.before_step.append(lambda step, _p: seen.append(harness.clock()) if step == "drain" else None)

    result = harness.run(harness.request(instance, node, seconds_to_deadline=120, drainIntervalSeconds=5))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert outputs[-1]["grace"] == {"default/job": 60}
    assert seen[-1] == deadline - 60
    assert not any(o["evicted"] for o in outputs)


@pytest.fixture
def timed() -> Iterator[tuple[KubeCluster, KubeClient]]:
    """An emulator that keeps a deleted pod for its grace period, as a kubelet stopping it would."""
    with ApiServer(port=0, graceful_deletion="timed") as server:
        client = KubeClient(ClusterConfig(server=server.url), sleep=lambda _s: None)
        yield KubeCluster(client), client
        client.close()


def _node(client: KubeClient, name: str) -> None:
    client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def test_the_pod_object_shows_the_grace_period_it_was_given(timed: tuple[KubeCluster, KubeClient]) -> None:
    kube, client = timed
    _node(client, "node-a")
    _pod(client, "db-0", "node-a", 300)
    _pod(client, "cache-0", "node-a", 30)
    _pdb(client, {"app": "db"}, min_available=2)
    deadline = datetime.now(UTC).timestamp() + 3600

    early = drain_pass(kube, "node-a", now=deadline - 301, deadline=deadline)
    assert early.deleted == [] and sorted(early.blocked) == ["default/cache-0", "default/db-0"]
    assert early.next_delete_at == deadline - 300

    due = drain_pass(kube, "node-a", now=deadline - 300, deadline=deadline)

    assert due.deleted == ["default/db-0"] and due.grace == {"default/db-0": 300}
    pod = kube.get_pod("default", "db-0")
    assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 300
    assert due.next_delete_at == deadline - 30  # cache-0 is next
    # Terminating within the deadline, the pod is not deleted again; the drain waits for it.
    again = drain_pass(kube, "node-a", now=deadline - 200, deadline=deadline)
    assert again.deleted == [] and not again.done


def test_a_pod_terminating_past_the_deadline_is_deleted_again_with_what_is_left(
    timed: tuple[KubeCluster, KubeClient],
) -> None:
    kube, client = timed
    _node(client, "node-a")
    _pod(client, "slow", "node-a", 3000)
    kube.delete_pod("default", "slow")  # someone deleted it with its own 3000 s
    deadline = datetime.now(UTC).timestamp() + 600

    result = drain_pass(kube, "node-a", now=deadline - 600, deadline=deadline)

    assert result.grace == {"default/slow": 600}
    pod = kube.get_pod("default", "slow")
    assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 600


def test_without_a_deleting_deadline_nothing_is_deleted_early(timed: tuple[KubeCluster, KubeClient]) -> None:
    kube, client = timed
    _node(client, "node-a")
    _pod(client, "db-0", "node-a", 300)
    _pdb(client, {"app": "db"})
    deadline = datetime.now(UTC).timestamp() + 3600

    result = drain_pass(kube, "node-a", now=deadline - 10, deadline=deadline, delete_before_deadline=False)

    assert result.deleted == [] and result.blocked
    assert kube.get_pod("default", "db-0") is not None


def test_a_pod_deleted_for_the_deadline_keeps_critical_pods_waiting(
    timed: tuple[KubeCluster, KubeClient],
) -> None:
    kube, client = timed
    _node(client, "node-a")
    _pod(client, "db-0", "node-a", 300)
    _pdb(client, {"app": "db"})
    dns = pod_object("coredns", node="node-a")
    dns["spec"]["priorityClassName"] = "system-cluster-critical"
    dns["spec"]["terminationGracePeriodSeconds"] = 30
    client.create(PODS, dns, "default")
    deadline = datetime.now(UTC).timestamp() + 3600

    result = drain_pass(kube, "node-a", now=deadline - 300, deadline=deadline)

    # db-0 is still terminating: cluster DNS keeps serving until it has gone.
    assert result.deleted == ["default/db-0"] and result.evicted == []
    assert result.waiting == ["default/coredns"]
    assert kube.get_pod("default", "coredns") is not None
