"""The replay and the sandbox (moto, the API emulator, the provisioner on real threads and clocks) launch
the same nodes for the same pods: same instance types, same counts, from the same instance types and
offerings (the sandbox provider's listing of moto)."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import pytest

from fleetwright.kube.resources import PODS
from fleetwright.local.apiserver.resources import PODS as STORED_PODS
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.sandbox import _KUBE_PROXY, FAKE_CREDENTIALS, SandboxOptions, sandbox
from fleetwright.local.simulate.engine import pod_object
from fleetwright.local.simulate.runner import replay
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.world import WorldSpec
from fleetwright.manifests import load_manifests
from fleetwright.model.instancetype import InstanceType
from tests.support.simulate import NODECLASS, nodepool
from tests.support.waiting import wait_for

# Left out of `make quick` (tests/conftest.py); waits for other threads on the real clock.
pytestmark = [pytest.mark.slow, pytest.mark.real_time]

ZONES = frozenset({"us-east-1a", "us-east-1b", "us-east-1c"})  # the sandbox's subnets
PODS_OF_THE_TRACE = [
    TracePod("big-0", 5.0, None, "1500m", "1Gi"),
    TracePod("big-1", 5.0, None, "1500m", "1Gi"),
    TracePod("big-2", 5.0, None, "1500m", "1Gi"),
    TracePod("mem-0", 5.0, None, "500m", "6Gi"),
    TracePod("mem-1", 5.0, None, "500m", "6Gi"),
    TracePod("small-0", 5.0, None, "250m", "512Mi"),
]
TYPES = ("m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "r5.large")


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(nodepool(types=TYPES) + "\n---\n" + NODECLASS)
    return path


def sandbox_launches(
    manifests: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Counter[str], list[InstanceType]]:
    """What the sandbox launches for the trace's pods, and the instance types its provider listed."""
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    options = SandboxOptions(
        manifests=(str(manifests),), node_start=NodeStart.fast(0.05), provisioner_window=10.0
    )
    with sandbox(options) as box:
        applied = box.kubectl("apply", "-f", str(manifests))
        assert applied.returncode == 0, applied.stderr
        box.start_provisioner()
        # All at once, as in the trace (one by one over HTTP, a loaded machine may split the batch).
        with box.server.store.transaction():
            for pod in PODS_OF_THE_TRACE:
                box.server.store.create(STORED_PODS, pod_object(pod), "default")

        def all_running() -> bool:
            pods = box.client.list(PODS, "default").items
            return len(pods) == len(PODS_OF_THE_TRACE) and all(
                p.get("status", {}).get("phase") == "Running" for p in pods
            )

        assert wait_for(all_running, timeout=120), box.errors
        claims = box.state.nodeclaims.list()
        first = min(r.created_at for r in claims)
        # The first pass's launches: a later pass may launch again for pods whose node registered but
        # is not initialized yet (a race of real threads and clocks; the replay shows it too, when an
        # invocation starts in that window: test_engine.py).
        return Counter(
            r.instance_type for r in claims if r.created_at < first + 1
        ), box.cloud.instance_types()


def test_the_replay_launches_what_the_sandbox_launches(
    manifests: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched, catalog = sandbox_launches(manifests, monkeypatch)
    documents = load_manifests([str(manifests)])
    # The instance types and offerings the sandbox's provider read from moto (its zones: its subnets').
    spec = WorldSpec(
        documents.nodepools,
        documents.nodeclasses,
        catalog,
        zones=ZONES,
        daemonsets=[copy.deepcopy(_KUBE_PROXY)],  # the sandbox runs kube-proxy on every node
    )
    outcome = replay(spec, Trace(tuple(PODS_OF_THE_TRACE), 300.0))
    first = min(i.launched_at for i in outcome.instances)
    replayed = Counter(i.launched.instance_type for i in outcome.instances if i.launched_at == first)
    assert len(outcome.instances) == sum(replayed.values())
    assert all(started is not None for life in outcome.lives.values() for started in life.started)
    assert replayed == launched, (dict(replayed), dict(launched))
