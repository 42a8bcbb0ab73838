"""The official Python client (``kubernetes``) against the emulator, with a bearer token."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import PODS
from tests.local.helpers import deployment, node, pod
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


def test_pod_create_read_list_patch_delete(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", pod("crud", labels={"app": "crud"}))

    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    read = core.read_namespaced_pod("crud", "default")
    assert read.metadata.uid == created.metadata.uid

    patched = core.patch_namespaced_pod("crud", "default", {"metadata": {"labels": {"tier": "web"}}})
    assert patched.metadata.labels == {"app": "crud", "tier": "web"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)

    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert "crud" in names

    core.delete_namespaced_pod("crud", "default")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("crud", "default")
    assert missing.value.status == 404


def test_node_create_read_patch_delete(core: client.CoreV1Api) -> None:
    core.create_node(node("py-node", labels={"zone": "a"}))

    core.patch_node("py-node", {"spec": {"unschedulable": True}})
    assert core.read_node("py-node").spec.unschedulable is True
    # JSON patch through the same call when the body is a list.
    core.patch_node("py-node", [{"op": "replace", "path": "/metadata/labels/zone", "value": "b"}])
    assert core.read_node("py-node").metadata.labels["zone"] == "b"
    status = core.patch_node_status(
        "py-node", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    assert status.status.conditions[0].status == "False"

    core.delete_node("py-node")
    assert "py-node" not in [n.metadata.name for n in core.list_node().items]


def test_list_with_field_and_label_selectors(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "select"}})
    core.create_node(node("sel-node"))
    core.create_namespaced_pod("select", pod("on-node", "select", {"app": "a", "tier": "x"}, "sel-node"))
    core.create_namespaced_pod("select", pod("loose-a", "select", {"app": "a"}))
    core.create_namespaced_pod("select", pod("loose-b", "select", {"app": "b"}))

    def names(**kwargs: Any) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("select", **kwargs).items]

    assert names(field_selector="spec.nodeName=sel-node") == ["on-node"]
    assert names(field_selector="spec.nodeName=") == ["loose-a", "loose-b"]
    assert names(label_selector="app=a") == ["loose-a", "on-node"]
    assert names(label_selector="app=a,!tier") == ["loose-a"]
    assert names(label_selector="app notin (a)") == ["loose-b"]
    assert names(label_selector="app=a", field_selector="metadata.name!=on-node") == ["loose-a"]
    everywhere = core.list_pod_for_all_namespaces(
        field_selector="metadata.namespace=select,spec.nodeName=sel-node"
    )
    assert [p.metadata.name for p in everywhere.items] == ["on-node"]


def test_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "pages"}})
    for i in range(5):
        core.create_namespaced_pod("pages", pod(f"p{i}", "pages"))

    first = core.list_namespaced_pod("pages", limit=2)
    second = core.list_namespaced_pod("pages", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("pages", limit=2, _continue=second.metadata._continue)

    pages = [[p.metadata.name for p in page.items] for page in (first, second, third)]
    assert pages == [["p0", "p1"], ["p2", "p3"], ["p4"]]
    assert first.metadata.remaining_item_count == 3
    assert third.metadata._continue is None


def test_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    original = core.create_namespaced_pod("default", pod("stale"))
    core.patch_namespaced_pod("stale", "default", {"metadata": {"labels": {"v": "2"}}})

    original.metadata.labels = {"v": "3"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("stale", "default", original)

    assert conflict.value.status == 409
    assert "the object has been modified" in conflict.value.body
    assert core.read_namespaced_pod("stale", "default").metadata.labels == {"v": "2"}


def test_eviction_respects_the_disruption_budget(
    core: client.CoreV1Api, policy: client.PolicyV1Api, apiserver: ApiServer
) -> None:
    core.create_namespace({"metadata": {"name": "evict"}})
    core.create_node(node("evict-node"))
    for name in ("e1", "e2"):
        core.create_namespaced_pod("evict", pod(name, "evict", {"app": "e"}, "evict-node"))
    wait_for(
        lambda: all(core.read_namespaced_pod(n, "evict").status.phase == "Running" for n in ("e1", "e2"))
    )
    policy.create_namespaced_pod_disruption_budget(
        "evict",
        {
            "metadata": {"name": "e"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "e"}}},
        },
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "e1", "namespace": "evict"},
    }

    core.create_namespaced_pod_eviction("e1", "evict", eviction)

    assert "e1" not in [p.metadata.name for p in core.list_namespaced_pod("evict").items]
    second = dict(eviction, metadata={"name": "e2", "namespace": "evict"})
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("e2", "evict", second)
    assert refused.value.status == 429
    assert "would violate the pod's disruption budget" in refused.value.body
    assert core.read_namespaced_pod("e2", "evict").metadata.deletion_timestamp is None
    budget = policy.read_namespaced_pod_disruption_budget("e", "evict")
    assert (budget.status.current_healthy, budget.status.desired_healthy) == (1, 1)
    assert budget.status.disruptions_allowed == 0


def test_eviction_accepts_policy_v1beta1_bodies(core: client.CoreV1Api) -> None:
    core.create_node(node("beta-node"))
    core.create_namespaced_pod("default", pod("old-client", node_name="beta-node"))
    body = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "old-client"}}

    core.create_namespaced_pod_eviction("old-client", "default", body)

    assert "old-client" not in [p.metadata.name for p in core.list_namespaced_pod("default").items]


def test_watch_stream_sees_added_modified_deleted(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "watched"}})
    start = core.list_namespaced_pod("watched").metadata.resource_version
    seen: list[tuple[str, str, str | None]] = []

    def collect() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_pod, "watched", resource_version=start, timeout_seconds=5
        ):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, (obj.metadata.labels or {}).get("step")))
            if event["type"] == "DELETED":
                return

    watcher = threading.Thread(target=collect)
    watcher.start()
    core.create_namespaced_pod("watched", pod("w", "watched", {"step": "1"}))
    core.patch_namespaced_pod("w", "watched", {"metadata": {"labels": {"step": "2"}}})
    core.delete_namespaced_pod("w", "watched")
    watcher.join(timeout=10)

    assert seen == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]


def test_watch_without_resource_version_replays_current_objects(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "replay"}})
    core.create_namespaced_pod("replay", pod("already-there", "replay"))

    events = list(watch.Watch().stream(core.list_namespaced_pod, "replay", timeout_seconds=1))

    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "already-there")]


def test_watch_from_compacted_resource_version_is_gone(core: client.CoreV1Api, apiserver: ApiServer) -> None:
    old = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("after-compaction"))
    apiserver.store.compact()

    with pytest.raises(ApiException) as gone:
        list(
            watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=old, timeout_seconds=2)
        )

    assert gone.value.status == 410


def test_missing_or_wrong_token_is_unauthorized(apiserver: ApiServer) -> None:
    for key in ({}, {"authorization": "wrong"}):
        config = client.Configuration(
            host=apiserver.url, api_key=key, api_key_prefix={"authorization": "Bearer"}
        )
        with client.ApiClient(config) as api, pytest.raises(ApiException) as denied:
            client.CoreV1Api(api).list_namespace()
        assert denied.value.status == 401


def test_deployment_scale_subresource(apps: client.AppsV1Api, core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "scale"}})
    apps.create_namespaced_deployment("scale", deployment("svc", 2, "scale"))
    wait_for(lambda: len(core.list_namespaced_pod("scale", label_selector="app=svc").items) == 2)

    scale = apps.read_namespaced_deployment_scale("svc", "scale")
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=svc")
    apps.patch_namespaced_deployment_scale("svc", "scale", {"spec": {"replicas": 4}})

    pods = wait_for(
        lambda: (
            [
                p
                for p in core.list_namespaced_pod("scale", label_selector="app=svc").items
                if p.metadata.deletion_timestamp is None
            ]
            if len(core.list_namespaced_pod("scale", label_selector="app=svc").items) == 4
            else []
        )
    )
    assert apps.read_namespaced_deployment("svc", "scale").spec.replicas == 4
    assert all(p.status.phase == "Pending" and p.spec.node_name is None for p in pods)
    replica_set = apps.list_namespaced_replica_set("scale").items[0]
    assert all(p.metadata.owner_references[0].uid == replica_set.metadata.uid for p in pods)
    assert replica_set.metadata.owner_references[0].kind == "Deployment"


def test_binding_then_pod_runs(core: client.CoreV1Api, apiserver: ApiServer) -> None:
    core.create_node(node("bind-node"))
    core.create_namespaced_pod("default", pod("to-bind"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="to-bind"),
        target=client.V1ObjectReference(kind="Node", name="bind-node"),
    )

    # The client cannot deserialize the Status a real server answers with, hence the raw response.
    response = core.create_namespaced_binding("default", body, _preload_content=False)

    assert response.status == 201
    bound = wait_for(
        lambda: (p := core.read_namespaced_pod("to-bind", "default")).status.phase == "Running" and p
    )
    assert bound.spec.node_name == "bind-node"
    assert {c.type: c.status for c in bound.status.conditions}["Ready"] == "True"
    with pytest.raises(ApiException) as twice:
        core.create_namespaced_binding("default", body, _preload_content=False)
    assert twice.value.status == 409
    assert apiserver.store.get(PODS, "default", "to-bind")["spec"]["nodeName"] == "bind-node"


def test_finalizers_hold_deletion(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "final"}})
    held = pod("held", "final")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod("final", held)

    core.delete_namespaced_pod("held", "final")
    marked = core.read_namespaced_pod("held", "final")
    assert marked.metadata.deletion_timestamp is not None
    core.delete_namespaced_pod("held", "final")  # deleting again is accepted and changes nothing

    core.patch_namespaced_pod("held", "final", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("held", "final")
    assert gone.value.status == 404
