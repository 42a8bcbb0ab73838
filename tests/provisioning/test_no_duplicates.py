"""No node is launched twice: not while a launched node is still booting, not when invocations overlap."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from fleetwright.claims.reports import RunReport
from fleetwright.state.nodeclaims import NodeClaimRecord
from tests.provisioning.virtual_clock import SETTLE_SECONDS, VirtualLoopClock
from tests.support.provisioning import World, make_config, nodepool

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


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


class Overlap:
    """Makes two invocations' passes overlap as closely as the lease lets them, whatever the machine's speed:
    an invocation that has just read the claim records holds on until the other one has read them too, been
    refused the lease, or ended. With the lease broken, both read the records before either records a claim.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.reading: set[str] = set()
        self.moves: Counter[str] = Counter()  # claim-record reads and lease refusals, per invocation
        self.ended: set[str] = set()
        self.stuck = False

    def read(self, other: str) -> None:
        me = threading.current_thread().name
        with self._cond:
            seen = self.moves[other]
            self.moves[me] += 1
            self.reading.add(me)
            self._cond.notify_all()
            met = self._cond.wait_for(
                lambda: other in self.reading or self.moves[other] != seen or other in self.ended,
                timeout=SETTLE_SECONDS,
            )
            self.reading.discard(me)
            self.stuck |= not met

    def refused(self) -> None:
        with self._cond:
            self.moves[threading.current_thread().name] += 1
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self.ended.add(threading.current_thread().name)
            self._cond.notify_all()


def test_overlapping_invocations_launch_once(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.pending(3, cpu="1")
    config = make_config(batch_idle_seconds=0.2, reconcile_interval_seconds=0.5)
    clock = VirtualLoopClock()  # one clock for both: each one's waits move it for the other too
    overlap = Overlap()
    others = {"a": "b", "b": "a"}
    list_records = world.state.nodeclaims.list

    def records() -> list[NodeClaimRecord]:
        found = list_records()
        other = others.get(threading.current_thread().name)
        if other is not None:
            overlap.read(other)
        return found

    monkeypatch.setattr(world.state.nodeclaims, "list", records)
    reports: list[RunReport] = []
    provisioners = {name: world.provisioner(config, holder=name, loop_clock=clock) for name in others}
    for provisioner in provisioners.values():
        try_acquire = provisioner.lifecycle.lease.try_acquire

        def take(try_acquire: Callable[[], bool] = try_acquire) -> bool:
            taken = try_acquire()
            if not taken:
                overlap.refused()
            return taken

        monkeypatch.setattr(provisioner.lifecycle.lease, "try_acquire", take)
    deadline = clock.monotonic() + 5.0

    def invoke(name: str) -> None:
        try:
            reports.append(provisioners[name].run_until(deadline))
        finally:
            overlap.end()

    threads = [threading.Thread(target=invoke, args=(n,), name=n) for n in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not overlap.stuck
    assert overlap.moves["a"] and overlap.moves["b"]  # both read the records or were refused the lease
    assert len(reports) == 2 and all(r.error == "" for r in reports)
    assert sum(len(r.launched) for r in reports) == 1
    assert world.create_fleet_calls() == 1
    assert len(world.instances()) == 1
