"""Every adapter operation against the project's Kubernetes API emulator."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fleetwright.kube import (
    ClusterConfig,
    EvictionOutcome,
    KubeApiError,
    KubeClient,
    KubeCluster,
    Resync,
    StaticToken,
    WatchEvent,
)
from fleetwright.kube.cluster import EXCLUDE_FROM_LB_LABEL
from fleetwright.kube.resources import (
    DAEMON_SETS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    STORAGE_CLASSES,
)
from fleetwright.kube.watch import list_then_watch
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver import WatchEvent as StoreEvent
from fleetwright.local.apiserver import resources as emu
from tests.kube.objects import create_unschedulable_pod, node_object, pod_object

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def names(objects: Any) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


# -- reads ---------------------------------------------------------------------------------------------


def test_lists_only_unschedulable_pending_pods(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1"))
    client.create(PODS, pod_object("running", node="n1"))
    client.create(PODS, pod_object("not-yet-looked-at"))
    create_unschedulable_pod(client, "stuck-a")
    create_unschedulable_pod(client, "stuck-b", namespace="kube-system")
    assert names(cluster.list_unschedulable_pods()) == ["stuck-a", "stuck-b"]
    assert names(cluster.list_unschedulable_pods("kube-system")) == ["stuck-b"]


def test_watch_reports_pods_becoming_and_ceasing_to_be_unschedulable(
    client: KubeClient, cluster: KubeCluster
) -> None:
    client.create(NODES, node_object("n1"))
    create_unschedulable_pod(client, "old")
    stream = cluster.watch_unschedulable_pods(until=time.monotonic() + 20, watch_seconds=5)
    first = next(stream)
    assert isinstance(first, Resync)
    assert names(first.objects) == ["old"]
    # Changes after the listing: a new pod is created (Pending, not yet marked), then marked unschedulable,
    # and the old one gets bound to a node.
    create_unschedulable_pod(client, "new")
    client.request(
        "POST",
        PODS.path("default", "old", "binding"),
        body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "old"}, "target": {"name": "n1"}},
    )
    events = [next(stream), next(stream)]
    assert all(isinstance(e, WatchEvent) for e in events)
    assert [(e.type, e.object["metadata"]["name"]) for e in events if isinstance(e, WatchEvent)] == [
        ("ADDED", "new"),
        ("DELETED", "old"),
    ]
    stream.close()


def test_watch_relists_when_its_resource_version_expired(apiserver: ApiServer, client: KubeClient) -> None:
    stream = list_then_watch(client, PODS, until=time.monotonic() + 20, watch_seconds=5)
    first = next(stream)
    assert isinstance(first, Resync)
    assert first.objects == ()
    client.create(PODS, pod_object("made-meanwhile"))
    apiserver.store.compact()  # the listing's resourceVersion is now too old to watch from
    second = next(stream)
    assert isinstance(second, Resync)
    assert names(second.objects) == ["made-meanwhile"]
    assert int(second.resource_version) > int(first.resource_version)
    client.create(PODS, pod_object("after-relist"))
    third = next(stream)
    assert isinstance(third, WatchEvent)
    assert (third.type, third.object["metadata"]["name"]) == ("ADDED", "after-relist")
    stream.close()


def test_watch_stops_at_its_deadline(client: KubeClient, cluster: KubeCluster) -> None:
    stream = cluster.watch_unschedulable_pods(until=time.monotonic() + 1.5, watch_seconds=5)
    assert isinstance(next(stream), Resync)
    started = time.monotonic()
    assert list(stream) == []
    assert time.monotonic() - started < 10


def test_lists_nodes_pods_by_node_and_storage_and_budget_objects(
    client: KubeClient, cluster: KubeCluster
) -> None:
    client.create(NODES, node_object("n1", labels={"pool": "a"}))
    client.create(NODES, node_object("n2", labels={"pool": "b"}))
    client.create(PODS, pod_object("p1", node="n1"))
    client.create(PODS, pod_object("p2", node="n1", namespace="kube-system"))
    client.create(PODS, pod_object("p3", node="n2"))
    client.create(
        DAEMON_SETS,
        {
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "a", "image": "agent"}]},
                },
            },
        },
    )
    client.create(
        POD_DISRUPTION_BUDGETS,
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"minAvailable": 1, "selector": {}}},
    )
    client.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    client.create(
        PERSISTENT_VOLUMES,
        {
            "metadata": {"name": "pv-1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]},
        },
    )
    client.create(STORAGE_CLASSES, {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"})

    assert names(cluster.list_nodes()) == ["n1", "n2"]
    assert names(cluster.list_nodes(label_selector="pool=b")) == ["n2"]
    assert names(cluster.list_pods_on_node("n1")) == ["p1", "p2"]
    assert names(cluster.list_daemonsets()) == ["agent"]
    assert names(cluster.list_pdbs()) == ["web"]
    assert names(cluster.list_pvcs()) == ["data"]
    assert names(cluster.list_pvs()) == ["pv-1"]
    storage_classes = cluster.list_storage_classes()
    assert names(storage_classes) == ["gp3"]
    # LIST items get their kind back, so they can be handed to code expecting full objects.
    assert (storage_classes[0]["kind"], storage_classes[0]["apiVersion"]) == (
        "StorageClass",
        "storage.k8s.io/v1",
    )
    node = cluster.get_node("n1")
    assert node is not None and node["metadata"]["labels"]["pool"] == "a"
    assert cluster.get_node("absent") is None


def test_list_follows_continue_tokens(client: KubeClient) -> None:
    for i in range(7):
        client.create(PODS, pod_object(f"p{i}"))
    listing = client.list(PODS, "default", page_size=3)
    assert names(listing.items) == [f"p{i}" for i in range(7)]
    assert listing.resource_version


# -- cordon + taint + label ----------------------------------------------------------------------------


def node_writes(apiserver: ApiServer) -> list[StoreEvent]:
    seen: list[StoreEvent] = []
    apiserver.store.subscribe(seen.append, [emu.NODES])
    return seen


def test_mark_disrupted_cordons_taints_and_labels_in_one_write(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster
) -> None:
    existing_taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    client.create(NODES, node_object("n1", labels={"team": "ml"}, taints=[existing_taint]))
    writes = node_writes(apiserver)

    node = cluster.mark_disrupted("n1")

    assert node is not None
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [existing_taint, DISRUPTED]
    assert node["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == "true"
    assert node["metadata"]["labels"]["team"] == "ml"
    assert [e.type for e in writes] == ["MODIFIED"]
    # Idempotent: a second call finds everything in place and writes nothing.
    again = cluster.mark_disrupted("n1")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]
    assert len(writes) == 1
    assert again["spec"]["taints"] == [existing_taint, DISRUPTED]


def test_mark_disrupted_of_a_missing_node_is_none(cluster: KubeCluster) -> None:
    assert cluster.mark_disrupted("absent") is None


def test_unmark_disrupted_restores_the_node(client: KubeClient, cluster: KubeCluster) -> None:
    other = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    client.create(NODES, node_object("n1", taints=[other]))
    cluster.mark_disrupted("n1")
    node = cluster.unmark_disrupted("n1")
    assert node is not None
    assert not node["spec"].get("unschedulable")
    assert node["spec"]["taints"] == [other]
    assert EXCLUDE_FROM_LB_LABEL not in node["metadata"]["labels"]


class InterferingClient(KubeClient):
    """Before each of the first ``times`` PATCHes, another writer changes the object (adds a taint)."""

    def __init__(self, config: ClusterConfig, apiserver: ApiServer, times: int) -> None:
        super().__init__(config, sleep=lambda _s: None)
        self.apiserver = apiserver
        self.times = times
        self.patches = 0

    def patch(self, resource: Any, name: str, patch: Any, namespace: str | None = None, **kw: Any) -> Any:
        self.patches += 1
        if self.patches <= self.times:

            def add_taint(node: dict[str, Any]) -> dict[str, Any]:
                taint = {"key": f"other-{self.patches}", "effect": "NoExecute"}
                node["spec"]["taints"] = [*(node["spec"].get("taints") or []), taint]
                return node

            self.apiserver.store.mutate(emu.NODES, None, name, add_taint)
        return super().patch(resource, name, patch, namespace, **kw)


def test_concurrent_node_change_is_not_lost_the_write_is_retried(apiserver: ApiServer) -> None:
    client = InterferingClient(ClusterConfig(apiserver.url), apiserver, times=2)
    client.create(NODES, node_object("n1"))
    node = KubeCluster(client).mark_disrupted("n1")
    assert node is not None
    assert client.patches == 3  # two 409s, then success
    assert node["spec"]["taints"] == [
        {"key": "other-1", "effect": "NoExecute"},
        {"key": "other-2", "effect": "NoExecute"},
        DISRUPTED,
    ]


def test_endless_conflicts_give_up_with_the_conflict_error(apiserver: ApiServer) -> None:
    client = InterferingClient(ClusterConfig(apiserver.url), apiserver, times=100)
    client.create(NODES, node_object("n1"))
    with pytest.raises(KubeApiError) as raised:
        KubeCluster(client, conflict_attempts=3).mark_disrupted("n1")
    assert raised.value.status == 409
    assert raised.value.reason == "Conflict"
    assert client.patches == 3


# -- eviction and deletion -----------------------------------------------------------------------------


def test_eviction_is_blocked_by_a_budget_then_allowed(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1"))
    for name in ("web-1", "web-2"):
        client.create(PODS, pod_object(name, node="n1", labels={"app": "web"}))
    client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    blocked = cluster.evict("default", "web-1")
    assert blocked.outcome is EvictionOutcome.BLOCKED
    assert blocked.blocked
    assert "disruption budget" in blocked.message
    assert cluster.get_pod("default", "web-1") is not None

    client.patch(POD_DISRUPTION_BUDGETS, "web", {"spec": {"minAvailable": 1}}, "default")
    evicted = cluster.evict("default", "web-1", grace_period_seconds=5)
    assert evicted.outcome is EvictionOutcome.EVICTED
    assert cluster.get_pod("default", "web-1") is None
    # The budget now protects the last pod.
    assert cluster.evict("default", "web-2").outcome is EvictionOutcome.BLOCKED
    assert cluster.evict("default", "web-1").outcome is EvictionOutcome.GONE


def test_eviction_with_a_stale_uid_leaves_the_namesake_alone(
    client: KubeClient, cluster: KubeCluster
) -> None:
    client.create(NODES, node_object("n1"))
    client.create(PODS, pod_object("p", node="n1"))
    result = cluster.evict("default", "p", uid="uid-of-an-earlier-pod")
    assert result.outcome is EvictionOutcome.GONE
    assert cluster.get_pod("default", "p") is not None


def test_delete_pod_with_grace_period() -> None:
    with ApiServer(port=0, graceful_deletion="timed") as server:
        client = KubeClient(ClusterConfig(server.url))
        cluster = KubeCluster(client)
        client.create(NODES, node_object("n1"))
        client.create(PODS, pod_object("p", node="n1"))
        assert cluster.delete_pod("default", "p", grace_period_seconds=20) is True
        terminating = cluster.get_pod("default", "p")
        assert terminating is not None
        assert terminating["metadata"]["deletionGracePeriodSeconds"] == 20
        assert terminating["metadata"]["deletionTimestamp"]
        assert cluster.delete_pod("default", "p", grace_period_seconds=0) is True
        assert cluster.get_pod("default", "p") is None
        assert cluster.delete_pod("default", "p") is False


def test_delete_pod_with_a_stale_uid_is_refused(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(PODS, pod_object("p"))
    assert cluster.delete_pod("default", "p", uid="not-this-one") is False
    pod = cluster.get_pod("default", "p")
    assert pod is not None
    assert cluster.delete_pod("default", "p", uid=pod["metadata"]["uid"]) is True
    assert cluster.get_pod("default", "p") is None


def test_delete_node(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1"))
    assert cluster.delete_node("n1") is True
    assert cluster.get_node("n1") is None
    assert cluster.delete_node("n1") is False


# -- metadata ------------------------------------------------------------------------------------------


def test_finalizer_holds_deletion_until_removed(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1"))
    finalizer = "karpenter.sh/termination"
    node = cluster.add_finalizer(NODES, "n1", finalizer)
    assert node is not None and node["metadata"]["finalizers"] == [finalizer]
    again = cluster.add_finalizer(NODES, "n1", finalizer)
    assert again is not None and again["metadata"]["finalizers"] == [finalizer]

    assert cluster.delete_node("n1") is True
    held = cluster.get_node("n1")
    assert held is not None and held["metadata"]["deletionTimestamp"]

    cluster.remove_finalizer(NODES, "n1", finalizer)
    assert cluster.get_node("n1") is None
    assert cluster.remove_finalizer(NODES, "n1", finalizer) is None


def test_remove_finalizer_keeps_the_others(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(PODS, pod_object("p"))
    cluster.add_finalizer(PODS, "p", "a.example.com/x", "default")
    cluster.add_finalizer(PODS, "p", "b.example.com/y", "default")
    pod = cluster.remove_finalizer(PODS, "p", "a.example.com/x", "default")
    assert pod is not None and pod["metadata"]["finalizers"] == ["b.example.com/y"]


def test_patch_labels_and_annotations_set_and_remove(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1", labels={"keep": "1", "drop": "1"}))
    node = cluster.patch_labels(NODES, "n1", {"new": "yes", "drop": None})
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "keep": "1", "new": "yes"}
    client.create(PODS, pod_object("p"))
    pod = cluster.patch_annotations(PODS, "p", {"karpenter.sh/do-not-disrupt": "true"}, "default")
    assert pod["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    pod = cluster.patch_annotations(PODS, "p", {"karpenter.sh/do-not-disrupt": None}, "default")
    assert not pod["metadata"].get("annotations")


def test_json_patch_test_operation_guards_the_change(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1"))
    with pytest.raises(KubeApiError) as raised:
        cluster.json_patch(
            NODES,
            "n1",
            [
                {"op": "test", "path": "/spec/unschedulable", "value": True},
                {"op": "add", "path": "/metadata/labels/x", "value": "y"},
            ],
        )
    assert raised.value.status == 422
    node = cluster.get_node("n1")
    assert node is not None and "x" not in node["metadata"]["labels"]


# -- errors and authentication -------------------------------------------------------------------------


def test_errors_carry_status_reason_and_message(client: KubeClient) -> None:
    with pytest.raises(KubeApiError) as missing:
        client.get(PODS, "absent", "default")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert missing.value.not_found
    assert 'pods "absent" not found' in missing.value.message

    with pytest.raises(KubeApiError) as invalid:
        client.create(PODS, {"metadata": {"name": "bad", "namespace": "default"}, "spec": {}})
    assert (invalid.value.status, invalid.value.reason) == (422, "Invalid")

    client.create(PODS, pod_object("dup"))
    with pytest.raises(KubeApiError) as exists:
        client.create(PODS, pod_object("dup"))
    assert (exists.value.status, exists.value.reason) == (409, "AlreadyExists")


class SwitchingToken:
    """Hands out a stale token until asked to refresh (as after a 401)."""

    def __init__(self, stale: str, fresh: str) -> None:
        self.current = stale
        self.fresh = fresh
        self.refreshes = 0

    def token(self, refresh: bool = False) -> str:
        if refresh:
            self.refreshes += 1
            self.current = self.fresh
        return self.current


def test_a_rejected_token_is_refreshed_once() -> None:
    with ApiServer(port=0, token="good") as server:
        source = SwitchingToken("expired", "good")
        client = KubeClient(ClusterConfig(server.url, token=source))
        assert client.list(NODES).items == []
        assert source.refreshes == 1
        assert client.list(NODES).items == []
        assert source.refreshes == 1

        wrong = KubeClient(ClusterConfig(server.url, token=StaticToken("wrong")))
        with pytest.raises(KubeApiError) as raised:
            wrong.list(NODES)
        assert (raised.value.status, raised.value.reason) == (401, "Unauthorized")
