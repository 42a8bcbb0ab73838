"""Fencing: a pass that loses the lease writes and launches nothing more, passes and replacement launches
take turns, and a launch slower than the lease is neither failed nor repeated by the next run."""

from __future__ import annotations

import threading
from typing import Any

from fleetwright.aws.tags import NODECLAIM_TAG
from fleetwright.claims.reports import PassReport, RunReport
from fleetwright.kube.snapshot import read_snapshot
from fleetwright.observability.metrics import LEASE_LOST, RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.state import ClaimStatus
from tests.provisioning.faults import Stall
from tests.support.provisioning import World, make_config, nodepool

TWO_CPU_TYPES = ["c5.large", "m5.large"]
VCPUS = {"c5.large": 2, "m5.large": 2}


def _capped() -> Any:
    """A NodePool of 2-CPU types limited to 2 CPUs: one node at most."""
    return make_config(nodepool(instance_types=TWO_CPU_TYPES, limits={"cpu": "2"}))


def _cpus_launched(world: World) -> int:
    return sum(VCPUS[i["InstanceType"]] for i in world.instances())


def test_a_pass_that_stalls_past_its_lease_writes_no_claim_and_calls_no_create_fleet(world: World) -> None:
    world.pending(1)
    metrics = RecordingMetrics()
    stale = world.provisioner(_capped(), holder="stale", metrics=metrics)
    successor = world.provisioner(_capped(), holder="successor")

    def overtaken() -> None:
        world.wall.advance(31)  # the pass stalls past its lease...
        assert successor.lifecycle.lease.try_acquire()  # ...and the next invocation takes it over

    stall = Stall("before-call.dynamodb.Query", overtaken).install(world.aws.clients.client("dynamodb"))
    stall.arm()
    report = stale.run_once()

    assert stall.fired == 1
    assert report.lease_lost and report.launched == []
    assert metrics.total(LEASE_LOST) == 1
    assert world.state.nodeclaims.list() == []
    assert world.create_fleet_calls() == 0
    # The successor's pass launches the pod's node, once.
    successor.lifecycle.lease.release()
    assert len(successor.run_once().launched) == 1
    assert len(world.instances()) == 1


def test_a_launch_overtaken_before_create_fleet_never_sends_it(world: World) -> None:
    world.pending(1)
    metrics = RecordingMetrics()
    stale = world.provisioner(_capped(), holder="stale", metrics=metrics)
    reports: list[RunReport] = []

    def next_invocation_meanwhile() -> None:
        world.wall.advance(31)  # between recording the claim and calling CreateFleet
        reports.append(world.provisioner(_capped(), holder="next").run_once())

    stall = Stall("before-call.ec2.DescribeInstances", next_invocation_meanwhile).install(
        world.aws.clients.ec2
    )
    stall.arm()
    report = stale.run_once()

    [overlapping] = reports
    assert overlapping.lease_acquired and overlapping.launched == []  # the claim counts as in flight
    assert report.lease_lost and metrics.total(LEASE_LOST) == 1
    assert world.create_fleet_calls() == 0
    [claim] = world.state.nodeclaims.list()
    assert claim.status == ClaimStatus.LAUNCHING and claim.holder == "stale"

    # Once the claim's deadline and the settle grace are over, it is failed and the pod launched once.
    assert claim.launch_deadline is not None
    world.wall.advance(claim.launch_deadline + world.provisioner().config.settle_grace_seconds - world.wall())
    after = world.provisioner(_capped(), holder="after").run_once()
    assert after.reconciles[0].abandoned == [claim.id]
    assert len(after.launched) == 1
    assert len(world.instances()) == 1 and _cpus_launched(world) <= 2


def test_overlapping_passes_launch_one_instance_per_pod_within_the_limit(world: World) -> None:
    world.pending(1)
    first = world.provisioner(_capped(), holder="first")
    during: list[RunReport] = []

    def second_invocation_meanwhile() -> None:
        # The first pass is slow inside its launch; a second invocation's pass runs to the end meanwhile.
        world.wall.advance(5)
        during.append(world.provisioner(_capped(), holder="second").run_once())

    stall = Stall("before-call.ec2.CreateFleet", second_invocation_meanwhile).install(world.aws.clients.ec2)
    stall.arm()
    report = first.run_once()

    [second] = during
    assert not second.lease_acquired  # the first pass holds the lease for its whole pass
    assert len(report.launched) == 1
    for later in range(3):  # later invocations see the claim: nothing more
        world.wall.advance(60)
        assert world.provisioner(_capped(), holder=f"later-{later}").run_once().launched == []
    assert len(world.instances()) == 1 and _cpus_launched(world) <= 2
    assert world.create_fleet_calls() == 1


def test_create_fleet_slower_than_the_lease_is_neither_failed_nor_repeated(world: World) -> None:
    world.pending(1)
    slow = world.provisioner(_capped(), holder="slow")
    during: list[RunReport] = []

    def answer_after_40_seconds() -> None:
        world.wall.advance(40)  # EC2 answers 40 s later; the lease (30 s) expired meanwhile
        during.append(world.provisioner(_capped(), holder="next").run_once())

    stall = Stall("after-call.ec2.CreateFleet", answer_after_40_seconds).install(world.aws.clients.ec2)
    stall.arm()
    report = slow.run_once()

    [overlapping] = during
    assert overlapping.lease_acquired
    assert overlapping.reconciles[0].abandoned == [] and overlapping.launched == []
    assert report.lease_lost  # it could not record the launch: the next holder will
    [claim] = world.state.nodeclaims.list()
    assert claim.status == ClaimStatus.LAUNCHING

    world.wall.advance(30)
    settled = world.provisioner(_capped(), holder="settler").run_once()
    assert settled.reconciles[0].adopted == [claim.id] and settled.launched == []
    adopted = world.state.nodeclaims.get(claim.id)
    [instance] = world.instances()
    assert adopted is not None and adopted.status == ClaimStatus.LAUNCHED
    assert adopted.instance_id == instance["InstanceId"]
    assert world.instance_tags(instance)[NODECLAIM_TAG] == claim.id
    assert world.create_fleet_calls() == 1


def test_a_replacement_launch_racing_a_pass_waits_for_the_lease_and_launches_nothing_more(
    world: World,
) -> None:
    world.pending(2, cpu="0.5")
    config = _capped()
    snapshot = read_snapshot(world.kube)
    replacement = Provisioner(
        world.kube, world.cloud, world.state, config, wall_clock=world.wall, holder="interruption"
    )
    results: list[PassReport | BaseException] = []

    def replace() -> None:
        try:
            results.append(replacement.launch_for(snapshot.pending_pods, snapshot, snapshot.nodes))
        except BaseException as error:  # reported to the test
            results.append(error)

    racer = threading.Thread(target=replace)
    asked = threading.Event()

    def lease_request(params: dict[str, Any], **_: Any) -> None:
        if (params.get("ExpressionAttributeValues") or {}).get(":holder") == {"S": "interruption"}:
            asked.set()

    dynamodb = world.aws.clients.client("dynamodb")
    dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", lease_request)

    def replacement_meanwhile() -> None:
        racer.start()  # the interruption handler launches replacements while this pass is launching
        assert asked.wait(30)

    stall = Stall("before-call.ec2.CreateFleet", replacement_meanwhile).install(world.aws.clients.ec2)
    stall.arm()
    report = world.provisioner(config, holder="pass").run_once()
    racer.join(30)

    assert len(report.launched) == 1
    [outcome] = results
    assert isinstance(outcome, PassReport)
    assert outcome.launched == [] and outcome.placed_on_existing == 2
    assert len(world.instances()) == 1
    assert world.create_fleet_calls() == 1
