"""Disruption passes on the watch-fed cluster cache: the same decisions as with LISTs, on a view at least
as new as the pass, and instance descriptions reused across passes only while they cannot have changed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from fleetwright.claims.registration import TERMINATION_FINALIZER
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.controller import DisruptionController
from fleetwright.disruption.deletion import NODECLAIM_DELETED
from fleetwright.disruption.described import DescribedInstances
from fleetwright.disruption.gc import DEFAULT_LIST_EVERY_SECONDS
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.kube.cache import ClusterCache
from fleetwright.kube.resources import CUSTOM_RESOURCE_DEFINITIONS, NODE_CLAIMS, NODES, POD_DISRUPTION_BUDGETS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.runtime.disruption import build_controller
from tests.kube.test_cache import RecordingRequests, nodeclaim_object
from tests.support.disruption import RecordingWorkflows, Rig, RigFactory, nodepool
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


class CountingCloud:
    """The provider, counting the instance ids it is asked to describe."""

    def __init__(self, cloud: Any) -> None:
        self.cloud = cloud
        self.described: list[str] = []

    def describe(self, instance_ids: Iterable[str]) -> Any:
        ids = list(instance_ids)
        self.described.extend(ids)
        return self.cloud.describe(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cloud, name)


@pytest.fixture
def cache(make_rig: RigFactory) -> Iterator[ClusterCache]:
    rig = make_rig()
    found = ClusterCache(rig.world.client, watch_seconds=5)
    yield found
    found.stop()


def controller(rig: Rig, cache: ClusterCache, cloud: Any = None, *, gc: bool = False) -> DisruptionController:
    return build_controller(
        rig.world.kube,
        cloud or rig.world.cloud,
        rig.world.state,
        rig.config,
        rig.workflows,
        options=DisruptionOptions(settings=DisruptionSettings(min_node_age_seconds=0)),
        metrics=rig.metrics,
        clock=rig.world.wall,
        monotonic=rig.ticker,
        collect_garbage=gc,
        cache=cache,
    )


def test_a_pod_bound_just_before_the_pass_keeps_its_node(make_rig: RigFactory, cache: ClusterCache) -> None:
    rig = make_rig(nodepool(consolidate_after="60s", policy="WhenEmpty"))
    empty = rig.node("m5.large")
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")
    run = controller(rig, cache)
    first = run.run_once()
    assert not first.error and first.nodes == 2 and first.commands == []
    rig.world.wall.advance(61)  # the empty node is due
    # A pod lands on it right before the next pass: no wait, the pass must see it.
    rig.pod("web-1", empty, cpu="100m")
    second = run.run_once()
    assert rig.workflows.started == {} and second.commands == []


def test_an_empty_node_is_removed_as_without_the_cache(make_rig: RigFactory, cache: ClusterCache) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", policy="WhenEmpty"))
    empty = rig.node("m5.large")
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")
    report = controller(rig, cache).run_once()
    assert [c.status for c in report.commands] == ["executed"]
    assert rig.workflows.nodes() == {empty}


def test_a_pdb_created_just_before_the_pass_blocks_consolidation(
    make_rig: RigFactory, cache: ClusterCache
) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    a = rig.node("m5.xlarge")
    b = rig.node("m5.xlarge")
    rig.pod("web-a", a, cpu="200m")
    rig.pod("web-b", b, cpu="200m")
    run = controller(rig, cache)
    cache.sync()
    rig.world.client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    wait_for(lambda: "disruptionsAllowed" in (rig.world.kube.list_pdbs()[0].get("status") or {}))
    blocked = run.run_once()
    assert rig.workflows.started == {} and blocked.commands == []


def test_instances_are_described_again_only_when_new_or_possibly_changed(
    make_rig: RigFactory, cache: ClusterCache
) -> None:
    rig = make_rig(nodepool(consolidate_after="1h"))
    a = rig.node("m5.large")
    b = rig.node("m5.large")
    rig.pod("web-a", a, cpu="1500m")
    rig.pod("web-b", b, cpu="1500m")
    cloud = CountingCloud(rig.world.cloud)
    run = controller(rig, cache, cloud, gc=True)

    run.run_once()
    assert sorted(cloud.described) == sorted([rig.instance_id(a), rig.instance_id(b)])
    cloud.described.clear()
    second = run.run_once()
    assert cloud.described == [] and second.candidates == 2

    c = rig.node("m5.large")
    rig.pod("web-c", c, cpu="1500m")
    run.run_once()
    assert cloud.described == [rig.instance_id(c)]

    # Someone stops an instance behind our back: the collector's next listing of live instances (at most
    # 4 minutes after its last) no longer shows it, so the next pass describes it again and sees it going.
    stopped = rig.instance_id(b)
    rig.world.aws.clients.ec2.stop_instances(InstanceIds=[stopped])
    cloud.described.clear()
    run.run_once()  # decided on the kept description; the collector's kept listing still holds it
    assert stopped not in cloud.described
    rig.world.wall.advance(DEFAULT_LIST_EVERY_SECONDS)
    run.run_once()  # decided on the description of 4 minutes ago; the collector lists and drops it
    assert stopped not in cloud.described
    report = run.run_once()
    assert cloud.described == [stopped]
    assert report.candidates == 2  # a and c; b is going
    gathered = run.reader.read(track_emptiness=False)
    assert {n.name for n in gathered.ours() if n.terminating} == {b}


def test_descriptions_expire(make_rig: RigFactory) -> None:
    rig = make_rig()
    node = rig.node("m5.large")
    instance_id = rig.instance_id(node)
    cloud = CountingCloud(rig.world.cloud)
    described = DescribedInstances(cloud, max_age_seconds=300, clock=rig.world.wall)
    assert set(described.describe([instance_id])) == {instance_id}
    described.describe([instance_id])
    assert cloud.described == [instance_id]
    rig.world.wall.advance(301)
    described.describe([instance_id])
    assert cloud.described == [instance_id, instance_id]


def test_a_pass_on_an_unreachable_api_server_decides_nothing(
    make_rig: RigFactory, cache: ClusterCache, apiserver: ApiServer
) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", policy="WhenEmpty"))
    rig.node("m5.large")
    run = controller(rig, cache)
    cache.sync()
    apiserver.faults.down()
    try:
        report = run.run_once()
    finally:
        apiserver.faults.up()
    assert report.error and report.commands == [] and rig.workflows.started == {}


class ListingWorkflows(RecordingWorkflows):
    """A starter that also lists its running executions, so the pass runs the sweep and the retirer."""

    def running(self) -> list[str]:
        return list(self.started)


def test_warm_passes_read_nodes_and_nodeclaims_from_the_cache(
    make_rig: RigFactory, cache: ClusterCache, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_karpenter_crds(apiserver.store)
    rig = make_rig(nodepool(consolidate_after="1h"))
    rig.workflows = ListingWorkflows()
    a = rig.node("m5.large")
    b = rig.node("m5.large")
    rig.pod("web-a", a, cpu="1500m")
    rig.pod("web-b", b, cpu="1500m")
    # b was left cordoned by a workflow that ended long ago.
    rig.world.kube.mark_disrupted(b, at=rig.world.wall() - 3600)
    run = controller(rig, cache, gc=True)
    first = run.run_once()
    assert not first.error and first.swept.uncordoned == [b]

    recorded = RecordingRequests(rig.world.client, monkeypatch)
    second = run.run_once()
    # The uncordon of the pass before is seen: b is not given back twice, and nothing is listed.
    assert not second.error and second.swept.uncordoned == [] and second.candidates == 2
    assert not rig.world.client.get(NODES, b)["spec"].get("unschedulable")
    assert recorded.calls and recorded.lists(NODES) == 0 and recorded.lists(NODE_CLAIMS) == 0
    assert not [c for c in recorded.calls if c[1].startswith(CUSTOM_RESOURCE_DEFINITIONS.path())]

    # Between passes someone deletes a's NodeClaim object: the next pass retires a.
    claim = next(r.id for r in rig.world.state.nodeclaims.list() if r.node_name == a)
    body = nodeclaim_object(claim)
    body["metadata"]["finalizers"] = [TERMINATION_FINALIZER]
    rig.world.client.create(NODE_CLAIMS, body)
    rig.world.client.delete(NODE_CLAIMS, claim)
    third = run.run_once()
    assert third.retired.deleted == {a: NODECLAIM_DELETED}
    assert rig.workflows.nodes() == {a}
    assert recorded.lists(NODES) == 0 and recorded.lists(NODE_CLAIMS) == 0


def test_the_sweep_and_the_retirer_act_on_nothing_while_the_cache_cannot_be_confirmed(
    make_rig: RigFactory, cache: ClusterCache, apiserver: ApiServer
) -> None:
    install_karpenter_crds(apiserver.store)
    rig = make_rig(nodepool(consolidate_after="1h"))
    rig.workflows = ListingWorkflows()
    a = rig.node("m5.large")
    b = rig.node("m5.large")
    rig.pod("web-a", a, cpu="1500m")
    run = controller(rig, cache)
    cache.sync()
    rig.world.kube.mark_disrupted(b, at=rig.world.wall() - 3600)
    claim = next(r.id for r in rig.world.state.nodeclaims.list() if r.node_name == a)
    body = nodeclaim_object(claim)
    body["metadata"]["finalizers"] = [TERMINATION_FINALIZER]
    rig.world.client.create(NODE_CLAIMS, body)
    rig.world.client.delete(NODE_CLAIMS, claim)
    apiserver.faults.down()
    try:
        blind = run.run_once()
    finally:
        apiserver.faults.up()
    # Nothing decided on the view from before the writes: no uncordon, no retirement, no workflow.
    assert blind.swept is None and blind.retired is None and rig.workflows.started == {}
    assert any(p.startswith("sweep failed") for p in blind.problems)
    assert any(p.startswith("retiring deleted nodes failed") for p in blind.problems)
    seeing = run.run_once()
    assert seeing.retired.deleted == {a: NODECLAIM_DELETED} and seeing.swept.uncordoned == [b]
    assert rig.workflows.nodes() == {a}
