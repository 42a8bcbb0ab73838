"""The replay's functions read the cluster from a cache that follows the emulator's store, as warm
functions read theirs: each change is seen by the next step, and passes list nothing."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest

from fleetwright.kube import KubeCluster
from fleetwright.kube.snapshot import read_snapshot
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.store import Store
from fleetwright.local.simulate.cache import StoreFedCache
from fleetwright.local.simulate.cluster import StoreClient
from fleetwright.local.simulate.runner import replay
from fleetwright.local.simulate.trace import TracePod
from fleetwright.local.simulate.world import VirtualClock, WorldSpec
from tests.kube.objects import UNSCHEDULABLE_STATUS, node_object, pod_object
from tests.support.simulate import nodepool, trace

SpecFor = Callable[..., WorldSpec]


def test_every_change_is_in_the_next_snapshot_without_a_list() -> None:
    clock = VirtualClock()
    store = Store(clock=clock.now)
    client = StoreClient(store)
    cache = StoreFedCache(store, client, clock=clock)
    store.create(NODES, node_object("n1"))
    store.create(PODS, {**pod_object("waiting"), **UNSCHEDULABLE_STATUS}, "default")
    assert [p.name for p in cache.snapshot().pending_pods] == ["waiting"]
    lists = client.requests
    store.create(PODS, pod_object("running", node="n1"), "default")
    store.delete(PODS, "default", "waiting", grace_period=0)
    store.create(NODES, node_object("n2"))
    snapshot = cache.snapshot()
    assert snapshot.pending_pods == []
    assert {n.name: [p.name for p in n.pods] for n in snapshot.nodes} == {"n1": ["running"], "n2": []}
    assert client.requests == lists  # followed, not listed
    listed = read_snapshot(KubeCluster(client, clock=clock.now))
    assert [(n.name, [p.name for p in n.pods]) for n in listed.nodes] == [
        (n.name, [p.name for p in n.pods]) for n in snapshot.nodes
    ]


def test_a_replays_passes_list_no_pods_or_nodes(spec_for: SpecFor, monkeypatch: pytest.MonkeyPatch) -> None:
    listed: collections.Counter[str] = collections.Counter()
    perform = StoreClient._perform

    def counting(self: StoreClient, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET":
            listed[path] += 1
        return perform(self, method, path, *args, **kwargs)

    monkeypatch.setattr(StoreClient, "_perform", counting)
    arrivals = [TracePod(f"p{i}", 5.0 + 120 * i, 1800.0, "1", "1Gi") for i in range(10)]
    outcome = replay(spec_for(nodepool()), trace(arrivals, 1800.0))
    assert outcome.passes >= 10
    assert len(outcome.instances) == 10  # a 1-CPU pod per m5.large: every arrival was seen and served
    assert listed["/api/v1/pods"] == listed["/api/v1/nodes"] == 0
