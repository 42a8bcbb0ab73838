"""Concurrent CreateFleet calls against moto: every claim of a pass launches.

The provisioner launches a pass's claims in a thread pool (``launch_parallelism``), so several CreateFleet
calls reach moto at once. moto hands out a subnet's private addresses from one generator shared by every
request, and a thread advancing it while another is inside it fails with ``generator already executing``
(about 1 launch in 400 with 8 threads and frequent thread switches). ``tests/conftest.py`` installs
``fleetwright.local.aws_fakes.thread_safe_moto``, which serializes the address pool, as EC2 never fails a
launch that way.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto.ec2.models.subnets import Subnet

from fleetwright.state import ClaimStatus
from tests.support.provisioning import World, make_config, nodepool

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

CLAIMS = 24


def _slowly(hosts: Iterator[Any]) -> Iterator[Any]:
    for host in hosts:
        time.sleep(0.002)  # inside the shared generator: another launch thread runs meanwhile
        yield host


@pytest.fixture
def slow_subnet_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each subnet address takes 2 ms to hand out, so concurrent launches meet inside moto's shared
    address generator every time instead of once in hundreds of launches."""
    shared = Subnet._base_avail_ip_iterator

    @functools.cache
    def slow(subnet: Subnet) -> Iterator[Any]:
        return _slowly(iter(shared(subnet)))

    monkeypatch.setattr(Subnet, "_base_avail_ip_iterator", slow)


def test_every_claim_of_a_parallel_pass_launches(world: World, slow_subnet_addresses: None) -> None:
    # One pod per node: 3 CPUs fit a c5.xlarge once and nothing smaller.
    world.pending(CLAIMS, cpu="3")
    config = make_config(nodepool(instance_types=["c5.xlarge"]), launch_parallelism=8)

    report = world.provisioner(config).run_once()

    assert report.error == ""
    assert [p.failed for p in report.passes] == [{}]
    assert len(report.launched) == CLAIMS
    assert world.create_fleet_calls() == CLAIMS
    instances = world.instances()
    assert len(instances) == CLAIMS
    assert len({i["PrivateIpAddress"] for i in instances}) == CLAIMS
    for claim in report.launched:
        stored = world.state.nodeclaims.get(claim.id)
        assert stored is not None and stored.status == ClaimStatus.LAUNCHED
