"""The provisioning loop on the watch-fed cluster cache: pending pods found from watch events, warm
invocations reading nothing again, and no launch on a view the API server could not confirm."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.claims.nodeclaim_objects import FINALIZER, MANAGED_BY, MANAGER
from fleetwright.claims.reports import RunReport
from fleetwright.kube.cache import ClusterCache
from fleetwright.kube.resources import CUSTOM_RESOURCE_DEFINITIONS, NODE_CLAIMS, NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.observability.metrics import BATCH_SIZE, RecordingMetrics
from tests.kube.test_cache import RecordingRequests, nodeclaim_object
from tests.provisioning.virtual_clock import VirtualLoopClock, arrivals
from tests.support.provisioning import World, make_config, nodepool


@pytest.fixture
def cache(world: World) -> Iterator[ClusterCache]:
    found = ClusterCache(world.client, watch_seconds=5)
    yield found
    found.stop()


def test_pods_arriving_together_are_found_from_watch_events_and_launched_in_one_batch(
    world: World, cache: ClusterCache
) -> None:
    config = make_config(nodepool(instance_types=["m5.2xlarge"]), batch_idle_seconds=0.5, batch_max_seconds=5)
    metrics = RecordingMetrics()
    # The cache's start signals the pods already waiting at once; later ones come from its pod watch.
    clock = VirtualLoopClock(signals_at_start=0)
    provisioner = world.provisioner(config, metrics=metrics, cache=cache, loop_clock=clock)
    arrivals(clock, [0.5, 0.6, 0.7, 0.8, 0.9], lambda i: world.pending(1, cpu="1", prefix=f"burst-{i}"))
    report = provisioner.run_until(clock.monotonic() + 6.0)
    launched_passes = [p for p in report.passes if p.launched]
    assert len(launched_passes) == 1
    [claim] = report.launched
    assert claim.pod_count == 5
    assert metrics.total(BATCH_SIZE) == 5
    assert world.create_fleet_calls() == 1
    assert cache.stats()["lists"]["pods"] == 1  # listed once, then only watched


def test_a_warm_invocation_lists_nothing_and_launches_nothing_twice(
    world: World, cache: ClusterCache
) -> None:
    config = make_config(batch_idle_seconds=0.2)
    clock = VirtualLoopClock(signals_at_start=0)

    def invocation(seconds: float) -> RunReport:
        return world.provisioner(config, cache=cache, loop_clock=clock).run_until(clock.monotonic() + seconds)

    world.pending(3)
    first = invocation(4)
    assert len(first.launched) == 1 and world.create_fleet_calls() == 1
    lists = dict(cache.stats()["lists"])

    # The next invocation (same process, warm cache): the pods still wait for the node launched for them.
    second = invocation(3)
    assert second.launched == [] and world.create_fleet_calls() == 1
    assert cache.stats()["lists"] == lists

    world.pending(1, prefix="late")
    third = invocation(4)
    assert [c.pod_count for c in third.launched] in ([1], [])  # the late pod may fit the claim in flight
    assert world.create_fleet_calls() == 1 + len(third.launched)


def test_no_launch_while_the_api_server_cannot_confirm_the_cache(
    world: World, cache: ClusterCache, apiserver: ApiServer
) -> None:
    config = make_config(batch_idle_seconds=0.2)
    world.pending(1, prefix="before")
    cache.sync()
    world.pending(2, prefix="during")
    apiserver.faults.down()
    try:
        provisioner = world.provisioner(config, cache=cache)
        report = provisioner.run_once()
    finally:
        apiserver.faults.up()
    # The pass failed instead of deciding on the cached view, which misses the pods created meanwhile.
    assert report.passes and report.passes[0].error.startswith(("KubeConnectionError", "CacheStaleError"))
    assert world.create_fleet_calls() == 0
    after = world.provisioner(config, cache=cache).run_once()
    assert [c.pod_count for c in after.launched] == [3]
    assert world.create_fleet_calls() == 1


def test_a_warm_pass_reconciles_nodeclaim_objects_from_the_cache(
    world: World, cache: ClusterCache, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_karpenter_crds(apiserver.store)
    config = make_config()
    world.pending(2)
    [claim] = world.provisioner(config, cache=cache).run_once().launched
    assert world.client.get(NODE_CLAIMS, claim.id)["status"]["providerID"] == claim.provider_id

    recorded = RecordingRequests(world.client, monkeypatch)
    # Between invocations: a stray object of ours appears, and the claim's object is removed by force.
    world.client.create(NODE_CLAIMS, nodeclaim_object("default-stray", **{MANAGED_BY: MANAGER}))
    world.client.patch(NODE_CLAIMS, claim.id, {"metadata": {"finalizers": None}})
    world.client.delete(NODE_CLAIMS, claim.id)

    warm = world.provisioner(config, cache=cache).run_once()
    assert warm.launched == [] and world.create_fleet_calls() == 1
    # The warm pass read NodeClaims and Nodes from the cache and did not ask for the CRD.
    assert recorded.calls and recorded.lists(NODES) == 0 and recorded.lists(NODE_CLAIMS) == 0
    assert not [c for c in recorded.calls if c[1].startswith(CUSTOM_RESOURCE_DEFINITIONS.path())]
    names = [o["metadata"]["name"] for o in world.client.list(NODE_CLAIMS).items]
    assert names == [claim.id]  # the stray one deleted, the claim's written again
    rewritten = world.client.get(NODE_CLAIMS, claim.id)
    assert rewritten["metadata"]["finalizers"] == [FINALIZER]
    assert rewritten["status"]["providerID"] == claim.provider_id
