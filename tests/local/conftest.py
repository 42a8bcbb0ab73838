"""Fixtures: an emulator per test module, kubectl pointed at it, and the official Python client."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from fleetwright.local.apiserver import ApiServer

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
TOKEN = "fleetwright-test-token"


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    """An emulator on an ephemeral port, with a bearer token, for one test module."""
    with ApiServer(port=0, token=TOKEN) as server:
        yield server


@dataclass
class Kubectl:
    """Runs the real kubectl against the emulator through a kubeconfig in a temp dir."""

    binary: Path
    kubeconfig: Path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``kubectl --kubeconfig K ARGS``; with ``check``, a non-zero exit fails the test with its output."""
        result = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def __call__(self, *args: str) -> str:
        return self.run(*args).stdout


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
