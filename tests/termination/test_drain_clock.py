"""A drain pass judges do-not-disrupt durations at the time it is given, not the wall clock, so a
workflow's pass decides the same whatever the machine's clock says."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.kube.client import KubeClient
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.resources import NODES, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.model.kube import start_time
from fleetwright.termination.drain import drain_pass
from tests.kube.objects import pod_object


@pytest.fixture
def cluster() -> Iterator[tuple[KubeCluster, KubeClient]]:
    with ApiServer(port=0) as server:
        client = KubeClient(ClusterConfig(server=server.url), sleep=lambda _s: None)
        yield KubeCluster(client), client
        client.close()


def _guarded_pod(client: KubeClient) -> float:
    """A pod on node-a protected for 10 minutes after it started; when it started."""
    client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
    body = pod_object("batch-0", node="node-a")
    body["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "10m"}
    client.create(PODS, body, "default")
    started = start_time(client.get(PODS, "batch-0", "default")["status"]["startTime"])
    assert started is not None
    return started


def test_a_pass_past_the_protection_evicts_the_pod(cluster: tuple[KubeCluster, KubeClient]) -> None:
    kube, client = cluster
    started = _guarded_pod(client)

    result = drain_pass(kube, "node-a", now=started + 3600, deadline=started + 7200)

    assert result.evicted == ["default/batch-0"]
    assert not result.waiting


def test_a_pass_within_the_protection_waits(cluster: tuple[KubeCluster, KubeClient]) -> None:
    kube, client = cluster
    started = _guarded_pod(client)

    result = drain_pass(kube, "node-a", now=started + 60, deadline=started + 7200)

    assert result.waiting == ["default/batch-0"]
    assert not result.evicted
