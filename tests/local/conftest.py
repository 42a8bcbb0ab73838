"""Fixtures: an emulator per test module, kubectl pointed at it, and the official Python client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from fleetwright.local.apiserver import ApiServer
from tests.support.local import KUBECTL, TOKEN, Kubectl


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    """An emulator on an ephemeral port, with a bearer token, for one test module."""
    with ApiServer(port=0, token=TOKEN) as server:
        yield server


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """kubectl from ``.tools/bin`` (installed by ``.ci/install-kubectl``)."""
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run .ci/install-kubectl first")
    path = apiserver.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    return Kubectl(KUBECTL, path)


@pytest.fixture(scope="module")
def api_client(apiserver: ApiServer) -> Iterator[client.ApiClient]:
    """The official client, configured like a user would: host plus bearer token."""
    config = client.Configuration(
        host=apiserver.url,
        api_key={"authorization": TOKEN},
        api_key_prefix={"authorization": "Bearer"},
    )
    with client.ApiClient(config) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)
