"""Fixtures: one chaos world per test (see ``tests/chaos/harness.py``), on a fake wall clock that moto's Step
Functions waits and retries, the Kubernetes client's back-offs and the provisioner's sleeps all move."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import botocore.endpoint
import botocore.retries.bucket
import pytest
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function

from fleetwright.kube import ClusterConfig, KubeClient
from fleetwright.local.apiserver import ApiServer
from tests.aws.strict import StrictEc2
from tests.chaos.harness import Chaos, PdbWatch, VirtualSleep
from tests.support.interruption import Interruptions
from tests.support.termination import Harness


@pytest.fixture
def virtual_sleep() -> VirtualSleep:
    return VirtualSleep()


@pytest.fixture
def client(apiserver: ApiServer, virtual_sleep: VirtualSleep) -> Iterator[KubeClient]:
    """The Kubernetes client every component shares; its back-offs pass on the world's clock."""
    kube = KubeClient(ClusterConfig(server=apiserver.url), sleep=virtual_sleep)
    yield kube
    kube.close()


@pytest.fixture
def chaos(
    harness: Harness,
    interruptions: Interruptions,
    apiserver: ApiServer,
    virtual_sleep: VirtualSleep,
    strict_ec2: StrictEc2 | None,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Chaos]:
    wall = harness.world.wall
    # moto stamps instances with the real time: the wall clock starts a minute later, as if they had booted.
    wall.now = time.time() + 60
    virtual_sleep.clock = wall

    def wait(_self: object, env: object, wait_seconds: int) -> None:
        wall.advance(wait_seconds)

    monkeypatch.setattr(wait_function.WaitFunction, "_wait_interval", wait)
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=wall.advance))
    # botocore's retry back-off and adaptive rate limiting wait on the same clock.
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=wall.advance))
    monkeypatch.setattr(botocore.retries.bucket.Clock, "current_time", lambda _self: wall())

    def acquire(bucket: botocore.retries.bucket.TokenBucket, amount: float, block: bool) -> bool:
        bucket._refill()
        if amount > bucket._current_capacity:
            wall.advance(bucket._sleep_amount(amount))
            bucket._refill()
        bucket._current_capacity -= amount
        return True

    monkeypatch.setattr(botocore.retries.bucket.TokenBucket, "_acquire", acquire)
    rig = Chaos(harness, interruptions, apiserver, virtual_sleep, PdbWatch(apiserver, wall))
    if strict_ec2 is not None:
        # EC2's rules hold for Fleetwright's clients; its consistency lag passes on the world's clock, and
        # the harness's own observer sees EC2 as it is.
        strict_ec2.consistency.follow(wall)
        strict_ec2.exempt(rig.observer)
    try:
        yield rig
    finally:
        apiserver.faults.clear()
        rig.pdbs.close()
