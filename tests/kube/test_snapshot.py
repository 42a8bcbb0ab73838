"""The cluster read through the adapter and converted into the scheduler's model."""

from __future__ import annotations

from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.resources import DAEMON_SETS, NODES, PODS
from fleetwright.kube.snapshot import read_snapshot
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver import resources as emu
from tests.kube.objects import create_unschedulable_pod, node_object, pod_object


def daemonset(name: str, cpu: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]
                },
            },
        },
    }


def test_snapshot_has_nodes_with_their_pods_pending_pods_and_daemonsets(
    client: KubeClient, cluster: KubeCluster
) -> None:
    client.create(NODES, node_object("n1", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    client.create(NODES, node_object("n2"))
    client.create(PODS, pod_object("a", node="n1", cpu="1"))
    client.create(PODS, pod_object("b", node="n1", cpu="250m"))
    client.create(PODS, pod_object("c", node="n2", cpu="2"))
    client.create(PODS, pod_object("waiting-for-scheduler"))
    create_unschedulable_pod(client, "stuck", cpu="3")
    client.create(DAEMON_SETS, daemonset("logs", "100m"))

    snapshot = read_snapshot(cluster)

    nodes = {n.name: n for n in snapshot.nodes}
    assert sorted(nodes) == ["n1", "n2"]
    assert sorted(p.name for p in nodes["n1"].pods) == ["a", "b"]
    assert [p.name for p in nodes["n2"].pods] == ["c"]
    assert nodes["n1"].allocatable["cpu"] == 4000
    assert [t.key for t in nodes["n1"].taints] == ["gpu"]
    assert [(p.name, p.requests["cpu"]) for p in snapshot.pending_pods] == [("stuck", 3000)]
    assert [(p.name, p.namespace, p.requests["cpu"]) for p in snapshot.daemonsets] == [
        ("logs", "kube-system", 100)
    ]
    assert snapshot.errors == []


def test_finished_pods_do_not_occupy_nodes(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster
) -> None:
    client.create(NODES, node_object("n1"))
    client.create(PODS, pod_object("done", node="n1"))
    apiserver.store.mutate(
        emu.PODS,
        "default",
        "done",
        lambda p: {**p, "status": {**p["status"], "phase": "Succeeded"}},
        "status",
    )
    client.create(PODS, pod_object("live", node="n1"))
    snapshot = read_snapshot(cluster)
    assert [p.name for p in snapshot.nodes[0].pods] == ["live"]


def test_a_malformed_object_is_reported_without_hiding_the_rest(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster
) -> None:
    create_unschedulable_pod(client, "good")
    create_unschedulable_pod(client, "bad", cpu="lots")
    snapshot = read_snapshot(cluster)
    assert [p.name for p in snapshot.pending_pods] == ["good"]
    assert len(snapshot.errors) == 1
    assert "bad" in str(snapshot.errors[0])
