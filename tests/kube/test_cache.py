"""The watch-fed cluster cache against the API emulator: the same snapshot as three LISTs, fresh at every
sync, and correct after missed events (410 Gone, dropped connections, outages, a frozen process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube import cache as cache_module
from fleetwright.kube.cache import CacheStaleError, ClusterCache
from fleetwright.kube.errors import KubeError
from fleetwright.kube.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DAEMON_SETS,
    NODE_CLAIMS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
)
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver import resources as emu
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from tests.kube.objects import create_unschedulable_pod, node_object, pod_object
from tests.kube.test_snapshot import daemonset
from tests.support.clock import FakeClock

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


@pytest.fixture
def clock() -> FakeClock:
    """Epoch seconds from now on, moved by hand (a Lambda frozen between invocations)."""
    return FakeClock(time.time())


@pytest.fixture
def cache(client: KubeClient, clock: FakeClock) -> Iterator[ClusterCache]:
    found = ClusterCache(client, watch_seconds=2, sync_timeout_seconds=5.0, clock=clock)
    yield found
    found.stop()


def seed(client: KubeClient) -> None:
    client.create(NODES, node_object("n1", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    client.create(NODES, node_object("n2"))
    client.create(PODS, pod_object("a", node="n1", cpu="1"))
    client.create(PODS, pod_object("b", node="n1", cpu="250m"))
    client.create(PODS, pod_object("c", node="n2", cpu="2"))
    client.create(PODS, pod_object("waiting-for-scheduler"))
    create_unschedulable_pod(client, "stuck", cpu="3")
    create_unschedulable_pod(client, "bad", cpu="lots")
    client.create(DAEMON_SETS, daemonset("logs", "100m"))


def view(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """What the scheduler reads, in a comparable form."""
    return {
        "nodes": [
            (
                n.name,
                sorted(n.labels.items()),
                n.allocatable,
                [t.key for t in n.taints],
                n.unschedulable,
                [(p.key, p.requests) for p in n.pods],
            )
            for n in snapshot.nodes
        ],
        "pending": [(p.key, p.requests) for p in snapshot.pending_pods],
        "daemonsets": [(p.key, p.requests) for p in snapshot.daemonsets],
        "errors": sorted(str(e) for e in snapshot.errors),
    }


def finish(apiserver: ApiServer, name: str) -> None:
    apiserver.store.mutate(
        emu.PODS, "default", name, lambda p: {**p, "status": {**p["status"], "phase": "Succeeded"}}, "status"
    )


def test_the_cache_gives_what_three_lists_give(
    client: KubeClient, cluster: KubeCluster, cache: ClusterCache
) -> None:
    seed(client)
    assert view(cache.snapshot()) == view(read_snapshot(cluster))
    assert [p.name for p in cache.snapshot().pending_pods] == ["stuck"]


def test_a_change_made_before_a_sync_is_seen_by_it(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster, cache: ClusterCache
) -> None:
    seed(client)
    cache.snapshot()
    # No wait between the writes and the read: sync must catch up with the watch itself.
    create_unschedulable_pod(client, "new", cpu="2")
    client.patch(PODS, "stuck", {"spec": {}}, "default")
    client.delete(PODS, "c", "default")
    finish(apiserver, "a")
    client.patch(NODES, "n2", {"spec": {"unschedulable": True}})
    client.create(NODES, node_object("n3"))
    snapshot = cache.snapshot()
    assert view(snapshot) == view(read_snapshot(cluster))
    nodes = {n.name: n for n in snapshot.nodes}
    assert [p.name for p in nodes["n1"].pods] == ["b"]
    assert nodes["n2"].pods == [] and nodes["n2"].unschedulable
    assert sorted(p.name for p in snapshot.pending_pods) == ["new", "stuck"]


def test_objects_are_converted_once_when_they_change(
    client: KubeClient, cache: ClusterCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(client)
    converted: list[str] = []
    real = cache_module.pod_from_object

    def counting(obj: Any, ref: Any = None) -> Any:
        converted.append(obj["metadata"]["name"])
        return real(obj, ref)

    monkeypatch.setattr(cache_module, "pod_from_object", counting)
    cache.snapshot()
    first = sorted(converted)
    assert first == ["a", "b", "bad", "c", "stuck"]  # the pod no scheduler has looked at is not converted
    converted.clear()
    client.patch(PODS, "b", {"metadata": {"labels": {"x": "y"}}}, "default")
    cache.snapshot()
    cache.snapshot()
    assert converted == ["b"]
    converted.clear()
    cache.informers["pods"].relist()  # a relist keeps what did not change
    assert converted == []


def test_a_relist_after_410_gone_drops_what_was_deleted_while_the_watch_was_down(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster, cache: ClusterCache
) -> None:
    seed(client)
    cache.snapshot()
    lists = cache.stats()["lists"]["pods"]
    apiserver.faults.down()
    try:
        time.sleep(1.0)  # every watch connection is reset (within 0.5 s) and keeps failing
        apiserver.store.delete(emu.PODS, "default", "b")
        apiserver.store.create(emu.PODS, pod_object("d", node="n2"))
        apiserver.store.compact()  # the history those events were in is gone: resuming gets 410
    finally:
        apiserver.faults.up()
    snapshot = cache.snapshot()
    assert view(snapshot) == view(read_snapshot(cluster))
    assert cache.stats()["lists"]["pods"] > lists
    nodes = {n.name: [p.name for p in n.pods] for n in snapshot.nodes}
    assert nodes == {"n1": ["a"], "n2": ["c", "d"]}


def test_a_dropped_watch_resumes_from_its_resource_version(
    apiserver: ApiServer, client: KubeClient, cluster: KubeCluster, cache: ClusterCache
) -> None:
    seed(client)
    cache.snapshot()
    lists = dict(cache.stats()["lists"])
    apiserver.faults.outage(0.5)  # connections reset mid-stream
    time.sleep(0.1)
    apiserver.store.delete(emu.PODS, "default", "a")  # deleted while the watch is down
    time.sleep(0.6)
    snapshot = cache.snapshot()
    assert view(snapshot) == view(read_snapshot(cluster))
    assert [p.name for p in next(n for n in snapshot.nodes if n.name == "n1").pods] == ["b"]
    assert cache.stats()["lists"] == lists  # resumed from history, not listed again


def test_bookmarks_move_a_quiet_watch_to_the_current_resource_version(
    client: KubeClient, cache: ClusterCache, apiserver: ApiServer
) -> None:
    seed(client)
    cache.snapshot()
    for i in range(3):
        client.create(PODS, pod_object(f"p{i}", node="n1"))
    # The nodes watch sees no event; the bookmark that ends its request (every 2 s here) carries the
    # current resourceVersion.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if int(cache.informers["nodes"].resource_version) >= apiserver.store.resource_version:
            break
        time.sleep(0.1)
    assert int(cache.informers["nodes"].resource_version) >= apiserver.store.resource_version


def test_the_api_server_down_fails_the_sync_instead_of_serving_a_stale_view(
    apiserver: ApiServer, client: KubeClient, cache: ClusterCache
) -> None:
    seed(client)
    cache.snapshot()
    apiserver.faults.down()
    try:
        apiserver.store.create(emu.PODS, pod_object("unseen", node="n1"))
        with pytest.raises(KubeError):
            cache.snapshot()
    finally:
        apiserver.faults.up()
    assert "unseen" in [p.name for n in cache.snapshot().nodes for p in n.pods]


def test_a_watch_that_never_catches_up_is_reported_stale(client: KubeClient, cache: ClusterCache) -> None:
    seed(client)
    cache.snapshot()
    cache.sync_timeout_seconds = 0.5
    # A watch that cannot open (its thread is gone) and has not reached the quorum resourceVersion.
    informer = cache.informers["daemonsets"]
    informer.stop()
    informer.resource_version = "1"
    cache.idle_restart_seconds = cache.resume_after_seconds = 3600
    client.create(PODS, pod_object("later", node="n1"))
    with pytest.raises(CacheStaleError, match="daemonsets"):
        cache.sync()


def freeze(cache: ClusterCache) -> None:
    """What a frozen Lambda does: its watch threads stop reading (nothing is heard until it thaws)."""
    for informer in cache.informers.values():
        informer.stop()


def test_a_frozen_process_resumes_its_watches_and_relists_when_too_old(
    client: KubeClient, cluster: KubeCluster, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    cache = ClusterCache(client, watch_seconds=60, clock=clock)
    request.addfinalizer(cache.stop)
    seed(client)
    cache.snapshot()
    lists = dict(cache.stats()["lists"])
    freeze(cache)
    client.delete(PODS, "b", "default")
    clock.advance(60)  # a minute frozen
    report = cache.sync()
    assert set(report.resumed) == {"pods", "nodes", "daemonsets", "pdbs"} and report.listed == ()
    assert cache.stats()["lists"] == lists  # the deletion was replayed from the watch history
    assert view(cache.snapshot(sync=False)) == view(read_snapshot(cluster))
    freeze(cache)
    client.delete(PODS, "c", "default")
    clock.advance(3600)  # an hour: longer than a resume can be trusted to replay
    report = cache.sync()
    assert set(report.listed) == {"pods", "nodes", "daemonsets", "pdbs"}
    assert {n: c - lists[n] for n, c in cache.stats()["lists"].items()} == dict.fromkeys(lists, 1)
    assert view(cache.snapshot(sync=False)) == view(read_snapshot(cluster))


def test_pending_listeners_hear_each_pod_that_becomes_unschedulable_once(
    client: KubeClient, cache: ClusterCache
) -> None:
    seed(client)
    cache.snapshot()
    heard: list[int] = []
    got = threading.Event()

    def listener(count: int) -> None:
        heard.append(count)
        got.set()

    cache.add_pending_listener(listener)
    create_unschedulable_pod(client, "new")
    assert got.wait(5)
    # The kube-scheduler rewriting the condition of a pod already waiting is not news.
    client.patch(PODS, "new", {"metadata": {"labels": {"retry": "1"}}}, "default")
    cache.snapshot()
    assert heard == [1]


def test_pdbs_and_nodes_are_kept_compact(client: KubeClient, cache: ClusterCache) -> None:
    node = node_object("n1")
    node["status"]["images"] = [{"names": ["big"], "sizeBytes": 1}]
    client.create(NODES, node)
    client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
        },
    )
    cache.sync()
    (obj,) = cache.node_objects()
    assert "images" not in obj["status"] and obj["status"]["allocatable"]["cpu"] == "4"
    (pdb,) = cache.pdb_objects()
    assert pdb["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def nodeclaim_object(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        },
    }


class RecordingRequests:
    """Every request a client makes, as (method, path, query)."""

    def __init__(self, client: KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        real = client.request

        def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, path, dict(kwargs.get("query") or {})))
            return real(method, path, *args, **kwargs)

        monkeypatch.setattr(client, "request", request)

    def lists(self, resource: Any) -> int:
        """Unfiltered LISTs of ``resource`` (the quorum read, ``limit=1``, is not one)."""
        return sum(
            1
            for method, path, query in self.calls
            if method == "GET" and path == resource.path() and query.get("limit") != 1
        )


def test_nodeclaims_are_followed_once_their_crd_is_installed(
    apiserver: ApiServer, client: KubeClient, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    cache = ClusterCache(client, watch_seconds=2, sync_timeout_seconds=5.0, clock=clock, crd_check_seconds=0)
    request.addfinalizer(cache.stop)
    seed(client)
    cache.sync()  # no NodeClaim CRD: the cache works as without NodeClaims
    assert cache.nodeclaims_installed is False and cache.nodeclaim_objects() is None
    assert "nodeclaims" not in cache.stats()["lists"]

    install_karpenter_crds(apiserver.store)
    claim = nodeclaim_object("default-a")
    claim["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    client.create(NODE_CLAIMS, claim)
    report = cache.sync()
    assert report.listed == ("nodeclaims",) and cache.nodeclaims_installed is True
    (obj,) = cache.nodeclaim_objects() or []
    assert obj["metadata"]["name"] == "default-a" and "managedFields" not in obj["metadata"]
    assert obj["spec"]["nodeClassRef"]["name"] == "default"


def test_a_nodeclaim_created_or_deleted_between_syncs_is_seen_without_a_list(
    apiserver: ApiServer, client: KubeClient, cache: ClusterCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_karpenter_crds(apiserver.store)
    seed(client)
    client.create(NODE_CLAIMS, nodeclaim_object("default-a"))
    cache.sync()
    recorded = RecordingRequests(client, monkeypatch)
    # No wait between the writes and the read: the sync catches up with the watch itself.
    client.create(NODE_CLAIMS, nodeclaim_object("default-b"))
    client.delete(NODE_CLAIMS, "default-a")
    client.patch(NODE_CLAIMS, "default-b", {"metadata": {"labels": {"seen": "yes"}}})
    client.patch(NODES, "n1", {"spec": {"unschedulable": True}})
    cache.sync()
    objects = cache.nodeclaim_objects() or []
    assert [(o["metadata"]["name"], o["metadata"]["labels"]) for o in objects] == [
        ("default-b", {"seen": "yes"})
    ]
    assert next(n for n in cache.node_objects() if n["metadata"]["name"] == "n1")["spec"]["unschedulable"]
    assert recorded.lists(NODE_CLAIMS) == 0 and recorded.lists(NODES) == 0
    assert cache.stats()["lists"]["nodeclaims"] == 1


def nodeclaims_type(apiserver: ApiServer) -> Any:
    found = apiserver.store.registry.lookup("karpenter.sh", "v1", "nodeclaims")
    assert found is not None
    return found


def test_nodeclaims_are_listed_again_after_410_gone(
    apiserver: ApiServer, client: KubeClient, cache: ClusterCache
) -> None:
    install_karpenter_crds(apiserver.store)
    client.create(NODE_CLAIMS, nodeclaim_object("default-a"))
    client.create(NODE_CLAIMS, nodeclaim_object("default-b"))
    cache.sync()
    lists = cache.stats()["lists"]["nodeclaims"]
    apiserver.faults.down()
    try:
        time.sleep(1.0)  # every watch connection is reset and keeps failing
        apiserver.store.delete(nodeclaims_type(apiserver), None, "default-a")
        apiserver.store.create(nodeclaims_type(apiserver), nodeclaim_object("default-c"))
        apiserver.store.compact()  # resuming gets 410 Gone
    finally:
        apiserver.faults.up()
    cache.sync()
    assert [o["metadata"]["name"] for o in cache.nodeclaim_objects() or []] == ["default-b", "default-c"]
    assert cache.stats()["lists"]["nodeclaims"] > lists


def test_a_removed_nodeclaim_crd_stops_the_watch_without_failing_syncs(
    apiserver: ApiServer, client: KubeClient, cache: ClusterCache
) -> None:
    install_karpenter_crds(apiserver.store)
    seed(client)
    client.create(NODE_CLAIMS, nodeclaim_object("default-a"))
    cache.sync()
    assert cache.nodeclaim_objects()
    client.delete(CUSTOM_RESOURCE_DEFINITIONS, "nodeclaims.karpenter.sh")
    deadline = time.monotonic() + 10
    while not cache.nodeclaim_informer.gone and time.monotonic() < deadline:
        time.sleep(0.1)
    cache.sync()
    assert cache.nodeclaims_installed is False and cache.nodeclaim_objects() is None
    client.create(PODS, pod_object("later", node="n2"))
    assert "later" in [p.name for n in cache.snapshot().nodes for p in n.pods]


def test_a_sync_is_reused_only_within_a_pass_and_while_this_process_has_written_nothing(
    client: KubeClient, cache: ClusterCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(client)
    cache.sync()
    recorded = RecordingRequests(client, monkeypatch)
    before = cache.last_sync
    assert cache.sync(reuse=True) is not before and recorded.calls  # no pass begun: a full sync
    recorded.calls.clear()
    cache.begin_pass()
    assert recorded.calls == []
    first = cache.sync(reuse=True)  # the pass's first sync (the one before began before the pass)
    assert [c[2].get("limit") for c in recorded.calls] == [1]
    assert cache.sync(reuse=True) is first  # the next step of the pass: no quorum read
    assert len(recorded.calls) == 1
    client.patch(NODES, "n2", {"spec": {"unschedulable": True}})  # this process writes
    assert cache.sync(reuse=True) is not first
    assert next(n for n in cache.node_objects() if n["metadata"]["name"] == "n2")["spec"]["unschedulable"]
    second = cache.last_sync
    cache.begin_pass()  # the next pass (or a re-validation) reads again
    assert cache.sync(reuse=True) is not second
