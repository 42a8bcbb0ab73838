"""The watch loop: pods created while it runs are batched into one pass and launched before the deadline."""

from __future__ import annotations

from fleetwright.observability.metrics import BATCH_SIZE, RecordingMetrics
from fleetwright.provisioning.batcher import Batcher
from tests.provisioning.virtual_clock import VirtualLoopClock, arrivals
from tests.support.provisioning import World, make_config, nodepool


def test_pods_arriving_together_are_launched_in_one_batch(world: World) -> None:
    config = make_config(nodepool(instance_types=["m5.2xlarge"]), batch_idle_seconds=0.5, batch_max_seconds=5)
    metrics = RecordingMetrics()
    clock = VirtualLoopClock()
    provisioner = world.provisioner(config, metrics=metrics, loop_clock=clock)
    # Five pods 0.1 s apart, from 0.3 s into the run: one window, closed 0.5 s after the last one.
    arrivals(clock, [0.3, 0.4, 0.5, 0.6, 0.7], lambda i: world.pending(1, cpu="1", prefix=f"burst-{i}"))
    report = provisioner.run_until(clock.monotonic() + 6.0)
    assert report.lease_acquired
    launched_passes = [p for p in report.passes if p.launched]
    assert len(launched_passes) == 1
    [claim] = report.launched
    assert claim.pod_count == 5
    assert metrics.total(BATCH_SIZE) == 5
    assert world.state.lease(holder="someone-else").try_acquire()  # released at the end


def test_pods_pending_at_start_are_provisioned_at_once(world: World) -> None:
    world.pending(2)
    config = make_config(batch_idle_seconds=0.2)
    clock = VirtualLoopClock()
    report = world.provisioner(config, loop_clock=clock).run_until(clock.monotonic() + 6)
    assert len(report.launched) == 1
    assert report.passes[0].batch_size == 2


def test_economy_mode_makes_one_pass(world: World) -> None:
    world.pending(2)
    clock = VirtualLoopClock()
    started = clock.monotonic()
    report = world.provisioner(make_config(economy=True), loop_clock=clock).run_until(started + 30)
    assert clock.monotonic() == started  # did not wait for the deadline
    assert len(report.passes) == 1 and len(report.launched) == 1


def test_the_batch_window_closes_when_idle_or_at_its_maximum() -> None:
    batcher = Batcher(idle=1.0, maximum=10.0)
    assert not batcher.open and batcher.closes_at() is None
    batcher.add(100.0)
    assert batcher.closes_at() == 101.0
    for t in range(1, 20):
        batcher.add(100.0 + t * 0.5)  # a steady trickle never leaves the window idle
        if 100.0 + t * 0.5 >= 110.0:
            break
    assert batcher.ready(110.0)
    assert batcher.reset() > 1 and not batcher.open
