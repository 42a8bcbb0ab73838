"""The store, patches and selectors in-process, without HTTP."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fleetwright.local.apiserver import Store, WatchEvent
from fleetwright.local.apiserver.controllers import DeploymentController
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.patch import apply_patch
from fleetwright.local.apiserver.resources import DEPLOYMENTS, NAMESPACES, NODES, PODS, REPLICA_SETS
from fleetwright.local.apiserver.selectors import parse_label_selector
from tests.local.helpers import deployment, node, pod
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("env in (prod, staging)", {"env": "staging"}, True),
        ("env notin (prod)", {"env": "prod"}, False),
        ("env notin (prod)", {}, True),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": "a"}, False),
        ("app=web,env in (prod),!canary", {"app": "web", "env": "prod"}, True),
        ("app=web,env in (prod),!canary", {"app": "web", "env": "prod", "canary": "1"}, False),
    ],
)
def test_label_selector_strings(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_label_selector_syntax_error_is_bad_request() -> None:
    with pytest.raises(ApiError) as bad:
        parse_label_selector("app in prod")
    assert bad.value.code == 400


def test_strategic_merge_merges_containers_by_name() -> None:
    target = {
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}],
            "tolerations": [{"key": "x"}],
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "2"}, {"name": "a", "$patch": "delete"}],
            "tolerations": [{"key": "y"}],
        }
    }

    result = apply_patch("application/strategic-merge-patch+json", target, patch)

    assert result["spec"]["containers"] == [{"name": "b", "image": "2"}]
    assert result["spec"]["tolerations"] == [{"key": "y"}]  # no merge key: replaced


def test_merge_patch_replaces_lists_and_deletes_nulls() -> None:
    target = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"containers": [{"name": "a"}]}}
    patch = {"metadata": {"labels": {"a": None}}, "spec": {"containers": [{"name": "z"}]}}

    result = apply_patch("application/merge-patch+json", target, patch)

    assert result == {"metadata": {"labels": {"b": "2"}}, "spec": {"containers": [{"name": "z"}]}}


def test_failed_json_patch_test_is_invalid() -> None:
    with pytest.raises(ApiError) as failed:
        apply_patch("application/json-patch+json", {"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert failed.value.code == 422


def test_metadata_bookkeeping_and_generation() -> None:
    store = Store()
    created = store.create(DEPLOYMENTS, deployment("d", 1))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1

    relabeled = store.mutate(
        DEPLOYMENTS, "default", "d", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "y"}}}
    )
    assert relabeled["metadata"]["generation"] == 1  # metadata changes leave generation alone
    assert int(relabeled["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    rescaled = store.mutate(
        DEPLOYMENTS, "default", "d", lambda o: {**o, "spec": {**o["spec"], "replicas": 3}}
    )
    assert rescaled["metadata"]["generation"] == 2
    same = store.mutate(DEPLOYMENTS, "default", "d", lambda o: o)
    assert same["metadata"]["resourceVersion"] == rescaled["metadata"]["resourceVersion"]


def test_subscribers_hear_committed_changes() -> None:
    store = Store()
    heard: list[tuple[str, str]] = []
    subscription = store.subscribe(lambda e: heard.append((e.type, e.object["metadata"]["name"])), [NODES])

    store.create(NODES, node("n1"))
    store.create(PODS, pod("ignored"))
    store.mutate(NODES, None, "n1", lambda n: {**n, "spec": {"unschedulable": True}})
    subscription.cancel()
    store.delete(NODES, None, "n1")

    assert heard == [("ADDED", "n1"), ("MODIFIED", "n1")]


def test_watch_reports_objects_leaving_the_selector_as_deleted() -> None:
    store = Store()
    store.create(PODS, pod("p", labels={"app": "web"}))
    watch = store.watch(PODS, "default", parse_label_selector("app=web"), since=store.resource_version)

    store.mutate(
        PODS, "default", "p", lambda p: {**p, "metadata": {**p["metadata"], "labels": {"app": "db"}}}
    )
    store.mutate(
        PODS, "default", "p", lambda p: {**p, "metadata": {**p["metadata"], "labels": {"app": "web"}}}
    )

    events = [watch.next(1.0), watch.next(1.0), watch.next(0.1)]
    assert [e.type if isinstance(e, WatchEvent) else e for e in events] == ["DELETED", "ADDED", None]


def test_graceful_pod_deletion_immediate_mode() -> None:
    store = Store()
    store.create(NODES, node("n"))
    store.create(PODS, pod("p", node_name="n"))
    heard: list[WatchEvent] = []
    store.subscribe(heard.append, [PODS])

    store.delete(PODS, "default", "p", grace_period=30)

    assert store.try_get(PODS, "default", "p") is None
    assert [e.type for e in heard] == ["MODIFIED", "DELETED"]
    assert heard[0].object["metadata"]["deletionGracePeriodSeconds"] == 30


def test_graceful_pod_deletion_timed_mode() -> None:
    store = Store(graceful_deletion="timed")
    store.create(NODES, node("n"))
    store.create(PODS, pod("p", node_name="n"))

    store.delete(PODS, "default", "p", grace_period=1)

    assert store.get(PODS, "default", "p")["metadata"]["deletionTimestamp"]
    wait_for(lambda: store.try_get(PODS, "default", "p") is None, timeout=5)


def test_unbound_pod_is_deleted_at_once_despite_grace_period() -> None:
    store = Store(graceful_deletion="timed")
    store.create(PODS, pod("p"))

    store.delete(PODS, "default", "p", grace_period=60)

    assert store.try_get(PODS, "default", "p") is None


def test_deleting_a_deployment_cascades_to_its_replica_set_and_pods() -> None:
    store = Store()
    controller = DeploymentController(store)
    controller.start()
    store.create(DEPLOYMENTS, deployment("d", 2))
    assert len(store.list(PODS, "default")[0]) == 2

    store.delete(DEPLOYMENTS, "default", "d")

    assert store.list(REPLICA_SETS, "default")[0] == []
    assert store.list(PODS, "default")[0] == []


def test_orphan_propagation_keeps_dependents() -> None:
    store = Store()
    DeploymentController(store).start()
    store.create(DEPLOYMENTS, deployment("d", 1))

    store.delete(DEPLOYMENTS, "default", "d", propagation="Orphan")

    assert len(store.list(REPLICA_SETS, "default")[0]) == 1


def test_deleting_a_namespace_removes_its_objects() -> None:
    store = Store()
    store.create(NAMESPACES, {"metadata": {"name": "gone"}})
    store.create(PODS, pod("p", "gone"))
    store.create(PODS, pod("stays", "default"))

    store.delete(NAMESPACES, None, "gone")

    assert store.list(PODS)[0][0]["metadata"]["name"] == "stays"
    assert len(store.list(PODS)[0]) == 1


def test_concurrent_read_modify_writes_lose_nothing() -> None:
    store = Store()
    store.create(NODES, node("counter"))
    watch = store.watch(NODES, since=store.resource_version)

    def bump(n: dict[str, Any]) -> dict[str, Any]:
        annotations = n["metadata"].setdefault("annotations", {})
        annotations["count"] = str(int(annotations.get("count", "0")) + 1)
        return n

    def worker() -> None:
        for _ in range(50):
            store.mutate(NODES, None, "counter", bump)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert store.get(NODES, None, "counter")["metadata"]["annotations"]["count"] == "200"
    versions = []
    while (event := watch.next(0.1)) is not None:
        versions.append(event.resource_version)
    assert len(versions) == 200 and versions == sorted(versions)
