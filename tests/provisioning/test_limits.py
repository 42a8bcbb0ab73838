"""NodePool limits hold, counting claims still in flight, whoever launches them."""

from __future__ import annotations

import threading
import time

from tests.provisioning.conftest import World, make_config, nodepool


def _capped() -> object:
    # m5.xlarge has 4 vCPUs; 3-CPU pods need one node each; the limit allows two nodes.
    return make_config(nodepool(instance_types=["m5.xlarge"], limits={"cpu": "8"}))


def test_limits_stop_launches_and_explain_the_rest(world: World) -> None:
    world.pending(5, cpu="3")
    report = world.provisioner(_capped()).run_once()  # type: ignore[arg-type]
    assert len(report.launched) == 2
    assert report.passes[0].unschedulable == 3


def test_in_flight_claims_count_against_limits_in_later_runs(world: World) -> None:
    world.pending(2, cpu="3")
    assert len(world.provisioner(_capped()).run_once().launched) == 2  # type: ignore[arg-type]
    world.pending(3, cpu="3", prefix="more")
    world.wall.advance(60)
    later = world.provisioner(_capped()).run_once()  # type: ignore[arg-type]
    assert later.launched == []
    assert later.passes[0].unschedulable == 3
    assert len(world.instances()) == 2


def test_limits_hold_when_invocations_race(world: World) -> None:
    world.pending(6, cpu="3")
    start = threading.Barrier(3)
    launched: list[int] = []

    def invoke(name: str) -> None:
        provisioner = world.provisioner(_capped(), holder=name, sleep=time.sleep)  # type: ignore[arg-type]
        start.wait()
        launched.append(len(provisioner.run_until(time.monotonic() + 5.0).launched))

    threads = [threading.Thread(target=invoke, args=(f"p{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(launched) == 2
    assert len(world.instances()) == 2
