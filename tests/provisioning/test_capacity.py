"""Insufficient capacity: the launch falls back to another type or zone, and the refusal is shared."""

from __future__ import annotations

from fleetwright.observability.metrics import CLAIMS_LAUNCHED, RecordingMetrics
from fleetwright.state import DynamoUnavailableOfferings
from tests.support.provisioning import World, make_config, nodepool

ZONES = ("us-east-1a", "us-east-1b")


def test_no_capacity_for_the_cheapest_type_falls_back_to_another_type(world: World) -> None:
    config = make_config(nodepool(instance_types=["c5.large", "m5.large"]))
    world.aws.fleet.exhausted = {("c5.large", zone) for zone in ZONES}
    world.pending(1, cpu="1")
    metrics = RecordingMetrics()
    [claim] = world.provisioner(config, metrics=metrics).run_once().launched
    assert claim.instance_type == "m5.large"
    assert metrics.total(CLAIMS_LAUNCHED, InstanceType="m5.large") == 1
    # Another process (the next invocation) reads the refusals from the table.
    shared = DynamoUnavailableOfferings(world.state.table, "demo", clock=world.wall)
    assert {(e.instance_type, e.zone) for e in shared.entries()} == {("c5.large", z) for z in ZONES}


def test_no_capacity_in_one_zone_falls_back_to_another_zone(world: World) -> None:
    config = make_config(nodepool(instance_types=["m5.large"]))
    world.aws.fleet.exhausted = {("m5.large", "us-east-1a")}
    world.pending(1, cpu="1")
    [claim] = world.provisioner(config).run_once().launched
    assert claim.instance_type == "m5.large"
    assert claim.zone == "us-east-1b"


def test_the_next_pass_avoids_offerings_refused_earlier(world: World) -> None:
    config = make_config(nodepool(instance_types=["c5.large", "m5.large"]))
    world.aws.fleet.exhausted = {("c5.large", zone) for zone in ZONES}
    world.pending(1, cpu="1")
    world.provisioner(config).run_once()
    calls = world.create_fleet_calls()
    world.pending(1, cpu="1.5", prefix="second")  # does not fit next to the first pod
    world.provisioner(config).run_once()
    later = world.aws.fleet.requests[calls:]
    offered = {o["InstanceType"] for r in later for c in r["LaunchTemplateConfigs"] for o in c["Overrides"]}
    assert offered == {"m5.large"}  # c5.large is not even asked for while it is marked unavailable


def test_a_claim_nothing_can_launch_fails_and_is_retried_later(world: World) -> None:
    config = make_config(nodepool(instance_types=["m5.large"]))
    world.aws.fleet.exhausted = {("m5.large", zone) for zone in ZONES}
    world.pending(1, cpu="1")
    report = world.provisioner(config).run_once()
    assert report.launched == []
    [(claim_id, reason)] = report.passes[0].failed.items()
    assert "InsufficientInstanceCapacity" in reason
    failed = world.state.nodeclaims.get(claim_id)
    assert failed is not None and failed.status == "Failed" and failed.expires_at is not None
    # Capacity comes back and the refusals expire: the next run launches.
    world.aws.fleet.exhausted = set()
    world.wall.advance(181)
    [claim] = world.provisioner(config).run_once().launched
    assert claim.instance_type == "m5.large"
