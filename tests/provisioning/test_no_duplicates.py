"""No node is launched twice: not while a launched node is still booting, not when invocations overlap."""

from __future__ import annotations

import threading
import time

from fleetwright.claims.reports import RunReport
from tests.provisioning.conftest import World, make_config, nodepool


def test_pods_waiting_for_a_booting_node_launch_nothing_more(world: World) -> None:
    world.pending(3, cpu="1")
    first = world.provisioner().run_once()
    assert len(first.launched) == 1
    # A minute later the node has not registered; the next invocation sees the same pending pods.
    world.wall.advance(60)
    second = world.provisioner().run_once()
    assert second.launched == []
    assert second.passes[0].placed_on_existing == 3
    assert world.create_fleet_calls() == 1


def test_new_pods_that_fit_on_a_booting_node_wait_for_it(world: World) -> None:
    config = make_config(nodepool(instance_types=["m5.xlarge"]))  # 4 CPUs
    world.pending(1, cpu="1")
    world.provisioner(config).run_once()
    world.pending(1, cpu="1", prefix="late")
    assert world.provisioner(config).run_once().launched == []
    world.pending(1, cpu="3", prefix="big")  # no room left on the booting node
    assert len(world.provisioner(config).run_once().launched) == 1
    assert world.create_fleet_calls() == 2


def test_an_invocation_without_the_lease_does_nothing(world: World) -> None:
    world.pending(2)
    holder = world.provisioner(holder="earlier-invocation")
    assert holder.lifecycle.lease.try_acquire()
    report = world.provisioner(holder="later-invocation").run_once()
    assert not report.lease_acquired
    assert report.passes == []
    assert world.create_fleet_calls() == 0


def test_overlapping_invocations_launch_once(world: World) -> None:
    world.pending(3, cpu="1")
    config = make_config(batch_idle_seconds=0.2, reconcile_interval_seconds=0.5)
    reports: list[RunReport] = []
    start = threading.Barrier(2)

    def invoke(name: str) -> None:
        provisioner = world.provisioner(config, holder=name, sleep=time.sleep)
        start.wait()
        reports.append(provisioner.run_until(time.monotonic() + 5.0))

    threads = [threading.Thread(target=invoke, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(reports) == 2
    assert sum(len(r.launched) for r in reports) == 1
    assert world.create_fleet_calls() == 1
    assert len(world.instances()) == 1
