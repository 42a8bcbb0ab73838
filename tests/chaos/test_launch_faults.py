"""Launch faults: a provisioner killed around CreateFleet, a lease that runs out mid-pass, throttling, no
capacity, partial fulfilment, a NodePool limit — never an instance paid for twice, never above the limit,
never an instance left without a claim."""

from __future__ import annotations

from tests.chaos.faults import During, EmptyFleet, Kill, throttle
from tests.chaos.figures import check
from tests.chaos.harness import Chaos
from tests.support.provisioning import nodepool

LEASE_SECONDS = 30.0
XLARGE = ["m5.xlarge"]  # 4 vCPUs: a 3-CPU pod per node


def recover(chaos: Chaos, runs: int = 3) -> None:
    """Later invocations, a minute apart, with no fault left."""
    for _ in range(runs):
        chaos.wall.advance(60)
        chaos.provision("next-run")


def test_killed_before_create_fleet(chaos: Chaos) -> None:
    Kill("before-call.ec2.CreateFleet").install(chaos.ec2)
    chaos.world.pending(2)
    assert chaos.provision("killed") is None
    recover(chaos)
    chaos.settle()
    check("killed before CreateFleet", chaos.figures(needed=1))


def test_killed_after_create_fleet(chaos: Chaos) -> None:
    Kill("after-call.ec2.CreateFleet").install(chaos.ec2)
    chaos.world.pending(2)
    assert chaos.provision("killed") is None
    recover(chaos)
    chaos.settle()
    check("killed after CreateFleet", chaos.figures(needed=1))


def test_killed_after_create_fleet_with_several_claims(chaos: Chaos) -> None:
    chaos.use(nodepool(instance_types=XLARGE, limits={"cpu": "12"}))
    Kill("after-call.ec2.CreateFleet").install(chaos.ec2)
    chaos.world.pending(3, cpu="3")
    assert chaos.provision("killed") is None
    recover(chaos)
    chaos.settle()
    check("killed after CreateFleet, 3 claims in one pass", chaos.figures(needed=3))


def test_killed_after_create_fleet_at_the_nodepool_limit(chaos: Chaos) -> None:
    chaos.use(nodepool(instance_types=XLARGE, limits={"cpu": "8"}))
    Kill("after-call.ec2.CreateFleet").install(chaos.ec2)
    chaos.world.pending(4, cpu="3")
    assert chaos.provision("killed") is None
    recover(chaos)
    chaos.settle()
    check("killed after CreateFleet at the NodePool limit", chaos.figures(needed=2))


def _competing_run(chaos: Chaos) -> None:
    """Another invocation starts once the first one's lease has run out."""
    chaos.wall.advance(LEASE_SECONDS + 1)
    chaos.provision("competitor")


def test_lease_lost_during_a_slow_pass(chaos: Chaos) -> None:
    During("before-call.ec2.CreateFleet", lambda: _competing_run(chaos)).install(chaos.ec2)
    chaos.world.pending(2)
    chaos.provision("slow")
    recover(chaos)
    chaos.settle()
    check("lease lost during a slow pass", chaos.figures(needed=1))


def test_create_fleet_slower_than_the_lease(chaos: Chaos) -> None:
    During("after-call.ec2.CreateFleet", lambda: _competing_run(chaos)).install(chaos.ec2)
    chaos.world.pending(2)
    chaos.provision("slow")
    recover(chaos)
    chaos.settle()
    check("CreateFleet slower than the lease", chaos.figures(needed=1))


def test_create_fleet_throttled(chaos: Chaos) -> None:
    fault = throttle(chaos.ec2, "CreateFleet", 2)
    chaos.world.pending(2)
    chaos.provision("throttled")
    recover(chaos)
    chaos.settle()
    assert fault.throttled == fault.times and fault.executed >= 1
    check("CreateFleet throttled", chaos.figures(needed=1))


def test_create_tags_throttled(chaos: Chaos) -> None:
    chaos.use(nodepool(instance_types=XLARGE))
    throttle(chaos.ec2, "CreateTags", 12)
    chaos.world.pending(3, cpu="3")
    chaos.provision("throttled")
    recover(chaos)
    chaos.settle()
    check("CreateTags throttled", chaos.figures(needed=3))


def test_describe_instances_throttled_after_a_crash(chaos: Chaos) -> None:
    Kill("after-call.ec2.CreateFleet").install(chaos.ec2)
    chaos.world.pending(2)
    assert chaos.provision("killed") is None
    throttled = throttle(chaos.ec2, "DescribeInstances", 12)
    recover(chaos)
    for _ in range(20):  # the throttling outlasts three runs: recovery goes on until it ends
        if throttled.throttled >= throttled.times:
            break
        recover(chaos, runs=1)
    chaos.settle()
    check("DescribeInstances throttled after a crash", chaos.figures(needed=1))


def test_no_capacity_on_any_offering(chaos: Chaos) -> None:
    zones = [f"us-east-1{z}" for z in "abcdef"]
    chaos.world.aws.fleet.exhausted = {
        (t, z) for t in ["c5.large", "m5.large", "c5.xlarge", "m5.xlarge"] for z in zones
    }
    chaos.world.pending(2)
    recover(chaos)
    chaos.settle()
    assert chaos.world.create_fleet_calls() >= 1
    check("insufficient capacity on every offering", chaos.figures(needed=0))


def test_partial_fulfilment(chaos: Chaos) -> None:
    # Each claim has its own one-instance fleet, so a fleet short of capacity is one that launches nothing
    # and lists its offering under Errors: the claim falls back to another offering.
    chaos.use(nodepool(instance_types=XLARGE, limits={"cpu": "12"}))
    fleet = EmptyFleet(times=2)
    fleet.install(chaos.ec2)
    chaos.world.pending(3, cpu="3")
    chaos.provision("partial")
    recover(chaos)
    chaos.settle()
    assert len(fleet.refused) == 2
    check("CreateFleet fulfils 0 of 1 (twice)", chaos.figures(needed=3))


def test_instances_that_never_register(chaos: Chaos) -> None:
    chaos.world.pending(2)
    chaos.provision("first")
    chaos.settle(register=False)
    # The claim timed out and its instance went; the pods still wait: the next pass launches once more.
    chaos.provision("after-timeout")
    check("instances that never register", chaos.figures(needed=2))
