"""Pods whose new node was taken by others get their next node in the same invocation: the kube-scheduler
binds in its own order, so once a claim's node is initialized the loop makes one more pass, a batching
idle window later. Virtual clock."""

from __future__ import annotations

from fleetwright.kube.resources import PODS
from tests.kube.objects import pod_object
from tests.provisioning.virtual_clock import VirtualLoopClock
from tests.support.provisioning import World, make_config, nodepool

INVOCATION_SECONDS = 50.0


def _loop(world: World, clock: VirtualLoopClock, *, taken: bool) -> list[str]:
    """Three 1-CPU pods launch one c5.xlarge; 20 s in, its node registers Ready and, with ``taken``, the
    kube-scheduler gives 3.5 of its CPUs to a pod of another owner first. The instance types launched."""
    world.pending(3, cpu="1")
    provisioner = world.provisioner(
        make_config(nodepool(instance_types=["c5.xlarge"]), batch_idle_seconds=1.0), loop_clock=clock
    )

    def node_ready() -> int:
        [claim] = world.state.nodeclaims.list_active()
        world.register_node(claim.provider_id, "node-a", ready=True)
        if taken:
            world.client.create(PODS, pod_object("other-0", cpu="3500m", node="node-a"))
        return 0  # app-0..2 stay Pending: the watch has seen them already

    clock.at(20.0, node_ready)
    report = provisioner.run_until(clock.monotonic() + INVOCATION_SECONDS)
    assert not report.error and all(not p.error for p in report.passes)
    return [claim.instance_type for claim in report.launched]


def test_pods_whose_new_node_was_taken_get_another_in_the_same_invocation(world: World) -> None:
    clock = VirtualLoopClock()
    started = clock.monotonic()
    assert _loop(world, clock, taken=True) == ["c5.xlarge", "c5.xlarge"]
    second = max(world.state.nodeclaims.list_active(), key=lambda c: c.launched_at or 0.0)
    assert second.pod_count == 3
    assert clock.monotonic() - started <= INVOCATION_SECONDS


def test_a_node_initialized_with_room_for_its_pods_launches_nothing_more(world: World) -> None:
    assert _loop(world, VirtualLoopClock(), taken=False) == ["c5.xlarge"]
    assert world.create_fleet_calls() == 1
