"""Fixtures: the project's API emulator, and a client and a ``KubeCluster`` pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.kube import ClusterConfig, KubeClient, KubeCluster
from fleetwright.local.apiserver import ApiServer

JsonObject = dict[str, Any]


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """A fresh emulator (one per test, so tests do not see each other's objects)."""
    with ApiServer(port=0) as server:
        yield server


@pytest.fixture
def client(apiserver: ApiServer) -> Iterator[KubeClient]:
    """A client for the emulator that never sleeps between retries."""
    kube = KubeClient(ClusterConfig(server=apiserver.url), sleep=lambda _s: None)
    yield kube
    kube.close()


@pytest.fixture
def cluster(client: KubeClient) -> KubeCluster:
    """The adapter's operations against the emulator."""
    return KubeCluster(client)
