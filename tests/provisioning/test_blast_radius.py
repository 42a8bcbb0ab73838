"""The bounds on a runaway launcher, on virtual clocks (the wall clock tests move by hand, and the watching
loop's): the cluster-wide launch-rate cap holds across passes and invocations and fails closed, and a
NodePool whose nodes never register stops launching for a cool-off instead of relaunching every 15 minutes
for ever."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube.resources import EVENTS
from fleetwright.observability.metrics import (
    LAUNCH_RATE_CAPPED,
    REGISTRATION_BREAKER_HELD,
    REGISTRATION_BREAKER_OPENED,
    RecordingMetrics,
)
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.state import ClaimStatus
from tests.provisioning.virtual_clock import VirtualLoopClock
from tests.support.provisioning import World, make_config, nodepool

ONE_POD_PER_NODE = nodepool(instance_types=["c5.large"])  # 1-cpu pods: one per c5.large


def _failed_scheduling(world: World) -> dict[str, str]:
    """Pod name → the message of its FailedScheduling event."""
    events = world.client.list(EVENTS, "default").items
    return {
        e["involvedObject"]["name"]: e["message"] for e in events if e.get("reason") == "FailedScheduling"
    }


def test_the_cap_holds_across_invocations_and_releases_with_the_window(world: World) -> None:
    world.pending(5)
    config = make_config(ONE_POD_PER_NODE, launch_rate_limit=3, launch_rate_window_seconds=600.0)
    metrics = RecordingMetrics()

    first = world.provisioner(config, metrics=metrics).run_once()

    assert len(first.launched) == 3
    [capped] = first.passes
    assert len(capped.held) == 2 and all("launch-rate cap reached" in r for r in capped.held.values())
    assert metrics.total(LAUNCH_RATE_CAPPED) == 2
    assert len(world.state.nodeclaims.list()) == 3  # nothing recorded, so nothing in flight, for the rest
    told = _failed_scheduling(world)
    assert len(told) == 2 and all("launch-rate cap reached" in m for m in told.values())
    # Another invocation a few minutes later shares the count.
    world.wall.advance(300)
    assert world.provisioner(config).run_once().launched == []
    # Once the window (and the tenth of it the count is kept in) has passed, the two pods left get nodes.
    world.wall.advance(360)
    assert len(world.provisioner(config).run_once().launched) == 2
    assert len(world.instances()) == 5


def test_a_scheduler_that_launches_every_pass_is_held_to_the_cap_in_every_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runaway: claims in flight are forgotten, so every pass launches again for the same pods.
    monkeypatch.setattr(Provisioner, "_in_flight_nodes", lambda *_args: [])
    world.pending(2)
    config = make_config(ONE_POD_PER_NODE, launch_rate_limit=5, launch_rate_window_seconds=600.0)
    launched_at: list[float] = []
    for _ in range(60):  # a pass every 20 s for 20 minutes, each a new invocation
        launched_at += [world.wall()] * len(world.provisioner(config).run_once().launched)
        world.wall.advance(20)

    assert launched_at  # the runaway launched, and was held to the cap
    for start in launched_at:
        in_window = [t for t in launched_at if start <= t < start + 600.0]
        assert len(in_window) <= 5
    assert len(launched_at) <= 5 * 3  # 20 minutes: at most two whole windows and a part of a third


def test_a_runaway_watching_loop_is_held_to_the_cap_and_so_is_the_next_invocation(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Provisioner, "_in_flight_nodes", lambda *_args: [])  # every pass launches again
    world.pending(4)
    config = make_config(ONE_POD_PER_NODE, launch_rate_limit=2, batch_idle_seconds=0.2)
    clock = VirtualLoopClock()

    report = world.provisioner(config, loop_clock=clock).run_until(clock.monotonic() + 50.0)

    assert len(report.launched) == 2
    assert len([p for p in report.passes if p.held]) >= 3  # it kept retrying, held back every time
    world.wall.advance(60)
    following = VirtualLoopClock()
    again = world.provisioner(config, loop_clock=following).run_until(following.monotonic() + 50.0)
    assert again.launched == [] and again.passes  # the next invocation shares the count
    assert len(world.instances()) == 2


def test_the_cap_fails_closed_when_its_record_changes_meanwhile(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.pending(2)
    table = world.state.table
    original = table.put

    def conflicting(item: Any, **kwargs: Any) -> bool:
        if str(item.get("pk", "")).startswith("LAUNCHRATE#"):
            return False  # another launcher wrote the record between our read and our write
        return original(item, **kwargs)

    monkeypatch.setattr(table, "put", conflicting)
    metrics = RecordingMetrics()

    report = world.provisioner(metrics=metrics).run_once()

    assert report.launched == [] and world.instances() == []
    assert world.state.nodeclaims.list() == []
    assert metrics.total(LAUNCH_RATE_CAPPED) == 1
    assert report.passes[0].needs_retry  # the loop tries again shortly


def test_a_nodepool_whose_nodes_never_register_is_not_relaunched_for_ever(world: World) -> None:
    world.pending(1)
    metrics = RecordingMetrics()
    launched_at: list[float] = []
    start = world.wall()
    # Twelve hours, a pass every 4 minutes (each a new invocation); no node ever registers.
    for _ in range(12 * 15):
        report = world.provisioner(metrics=metrics).run_once()
        launched_at += [world.wall() - start] * len(report.launched)
        world.wall.advance(240)

    # Without the breaker: a launch every 16 minutes, 45 in twelve hours. With it: three, then the
    # breaker opens (30 min), and each failed probe doubles the cool-off up to 4 h.
    assert len(launched_at) <= 8
    assert metrics.total(REGISTRATION_BREAKER_OPENED, NodePool="default") >= 3
    assert metrics.total(REGISTRATION_BREAKER_HELD, NodePool="default") > 0
    late = [t for t in launched_at if t >= 6 * 3600]
    assert len(late) <= 2  # in the second six hours, at most one probe every 4 h
    assert "registration breaker" in _failed_scheduling(world)["app-0"]
    events = world.client.list(EVENTS, "default").items
    opened = [e for e in events if e.get("reason") == "RegistrationBreakerOpen"]
    assert len(opened) == metrics.total(REGISTRATION_BREAKER_OPENED)  # one Event per opening, on the NodePool
    for event in opened:
        assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("NodePool", "default")
        assert event["type"] == "Warning" and "launches nothing until" in event["message"]


def test_a_node_that_becomes_ready_resets_the_count(world: World) -> None:
    world.pending(1)
    config = make_config(breaker_threshold=2)
    [failed] = world.provisioner(config).run_once().launched
    world.wall.advance(16 * 60)
    [healthy] = world.provisioner(config).run_once().launched  # the first timed out; a relaunch
    assert healthy.id != failed.id
    world.register_node(healthy.provider_id, "node-a", ready=True)
    provisioner = world.provisioner(config)
    reconciled = provisioner.reconcile()
    assert reconciled.initialized == [healthy.id]
    world.pending(1, cpu="3.5", prefix="more")  # does not fit beside the first pod
    [late] = provisioner.run_once().launched
    world.wall.advance(16 * 60)

    report = world.provisioner(config).run_once()

    # One timeout before the Ready node, one after: not two in a row, so the breaker stays closed.
    assert late.id in report.reconciles[0].timed_out
    assert len(report.launched) == 1
    assert world.state.launchguard.open_breakers(world.wall()) == {}
    ended = world.state.nodeclaims.get(late.id)
    assert ended is not None and ended.status == ClaimStatus.TERMINATED


def test_a_few_hosts_that_never_join_a_scale_up_do_not_stop_the_nodepool(world: World) -> None:
    world.pending(6, cpu="3")  # one per node: a c5.xlarge, or a registered 4-cpu node
    config = make_config(nodepool(instance_types=["c5.xlarge"]))
    launched = world.provisioner(config).run_once().launched
    assert len(launched) == 6
    joined, lost = launched[:3], launched[3:]
    for i, claim in enumerate(joined):
        world.register_node(claim.provider_id, f"node-{i}", ready=True)
    assert len(world.provisioner(config).reconcile().initialized) == 3
    world.wall.advance(16 * 60)

    report = world.provisioner(config).run_once()

    # Three timeouts at once, but the NodePool's other nodes are Ready: the hosts' fault, not the NodePool's.
    assert sorted(report.reconciles[0].timed_out) == sorted(c.id for c in lost)
    assert world.state.launchguard.open_breakers(world.wall()) == {}
    assert len(report.launched) == 3  # the three pods get new nodes at once
