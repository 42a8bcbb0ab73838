"""Static NodePools (``spec.replicas``): the provisioner keeps each at its replica count, whatever the pods,
within ``limits.nodes``, and never launches twice for one missing node (crashes, throttling)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws.tags import NODECLAIM_TAG
from fleetwright.claims.static_limits import STATIC_LIMIT_REACHED, StaticLimitGuard
from fleetwright.kube.resources import EVENTS, NODES
from fleetwright.model.karpenter import NodePool
from fleetwright.observability.metrics import LAUNCH_ERRORS, RecordingMetrics
from fleetwright.provisioning.static_pools import RETRY_AFTER_FAILURE_SECONDS
from fleetwright.scheduling.static import static_claims
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.state import ClaimStatus
from tests.kube.objects import node_object
from tests.provisioning.faults import ThrottleEveryAttempt
from tests.provisioning.test_recovery import CrashAfterLaunch, _provider
from tests.provisioning.virtual_clock import VirtualLoopClock
from tests.support.provisioning import World, make_config, nodepool


def static(name: str = "static", replicas: int = 3, **options: Any) -> NodePool:
    """A NodePool with ``spec.replicas`` (the fixture's pool plus the field)."""
    document = nodepool(name, **options).model_dump(by_alias=True, exclude_none=True)
    document["spec"]["replicas"] = replicas
    document["spec"].pop("weight", None)
    return NodePool.model_validate(document)


def active(world: World, pool: str = "static") -> list[Any]:
    return [r for r in world.state.nodeclaims.list() if r.nodepool == pool and r.active]


def test_a_static_pool_is_filled_to_its_replicas_without_pods(world: World) -> None:
    config = make_config(static(replicas=3))
    report = world.provisioner(config).run_once()
    assert len(report.launched) == 3
    assert {r.nodepool for r in report.launched} == {"static"}
    instances = world.instances()
    assert len(instances) == 3
    assert {world.instance_tags(i)["karpenter.sh/nodepool"] for i in instances} == {"static"}
    # The next run finds the three claims and launches nothing.
    world.wall.advance(60)
    assert world.provisioner(config).run_once().launched == []
    assert world.create_fleet_calls() == 3


def test_limits_nodes_caps_a_static_pool(world: World) -> None:
    metrics = RecordingMetrics()
    config = make_config(static(replicas=5, limits={"nodes": "2"}))
    report = world.provisioner(config, metrics=metrics).run_once()
    assert len(report.launched) == 2
    assert metrics.total(STATIC_LIMIT_REACHED, NodePool="static") == 1
    world.wall.advance(60)
    assert world.provisioner(config).run_once().launched == []
    assert len(world.instances()) == 2


def test_pending_pods_never_open_claims_in_a_static_pool(world: World) -> None:
    config = make_config(static(replicas=0))
    world.pending(2)
    report = world.provisioner(config).run_once()
    assert report.launched == []
    assert report.passes[-1].unschedulable == 2
    assert world.create_fleet_calls() == 0
    reasons = {e["reason"]: e["message"] for e in world.client.list(EVENTS).items}
    assert "static NodePools keep their replicas: static" in reasons["FailedScheduling"]


def test_pending_pods_wait_for_a_launching_static_node(world: World) -> None:
    config = make_config(static(replicas=1, instance_types=["m5.xlarge"]), nodepool("dynamic"))
    world.pending(2, cpu="1")
    report = world.provisioner(config).run_once()
    [claim] = report.launched
    assert claim.nodepool == "static"
    assert report.passes[-1].placed_on_existing == 2  # on the static claim, not on a new dynamic one
    assert world.create_fleet_calls() == 1


def test_a_terminated_static_node_is_replaced(world: World) -> None:
    config = make_config(static(replicas=2))
    first = world.provisioner(config).run_once().launched
    gone = first[0]
    assert world.state.nodeclaims.transition(gone.id, ClaimStatus.LAUNCHED, ClaimStatus.TERMINATED)
    world.wall.advance(60)
    [replacement] = world.provisioner(config).run_once().launched
    assert replacement.id not in {r.id for r in first}
    assert len(active(world)) == 2


def test_a_labelled_node_without_a_claim_counts(world: World) -> None:
    node = node_object("adopted-node", labels={"karpenter.sh/nodepool": "static"})
    node["spec"]["providerID"] = "aws:///us-east-1a/i-0123456789abcdef0"
    world.client.create(NODES, node)
    report = world.provisioner(make_config(static(replicas=2))).run_once()
    assert len(report.launched) == 1


def test_a_crash_after_create_fleet_does_not_launch_a_static_node_twice(world: World) -> None:
    config = make_config(static(replicas=2))
    crashed = world.provisioner(config, holder="crashed")
    crashed.lifecycle.cloud = _provider(world, CrashAfterLaunch)
    report = crashed.run_once()
    orphans = world.state.nodeclaims.list()
    assert report.launched == [] and len(orphans) == 2
    assert {o.status for o in orphans} == {ClaimStatus.LAUNCHING}  # recorded before CreateFleet
    assert len(world.instances()) == 2

    # While the claims may still be launching they count: the retried invocation launches nothing.
    world.wall.advance(30)
    assert world.provisioner(config, holder="retry").run_once().launched == []
    # After the deadline and grace, their instances are adopted by tag, still nothing launched.
    world.wall.advance(30)
    recovered = world.provisioner(config, holder="later").run_once()
    assert sorted(recovered.reconciles[0].adopted) == sorted(o.id for o in orphans)
    assert recovered.launched == []
    assert world.create_fleet_calls() == 2
    instances = world.instances()
    assert sorted(world.instance_tags(i)[NODECLAIM_TAG] for i in instances) == sorted(o.id for o in orphans)


def test_a_throttled_create_fleet_is_retried_by_the_next_run_without_overshooting(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("botocore.endpoint.time.sleep", world.wall.advance)
    config = make_config(static(replicas=2))
    ec2 = world.aws.clients.ec2
    throttle = ThrottleEveryAttempt("CreateFleet", world.wall.advance, seconds=4).install(ec2)
    report = world.provisioner(config).run_once()
    assert report.launched == [] and len(report.passes[0].failed) == 2
    assert {r.status for r in world.state.nodeclaims.list()} == {ClaimStatus.FAILED}
    assert world.instances() == []

    throttle.uninstall(ec2)
    # The pool waits a while after a failure rather than sending CreateFleet on every reconciliation.
    calls = world.create_fleet_calls()
    assert world.provisioner(config).run_once().launched == []
    assert world.create_fleet_calls() == calls
    world.wall.advance(RETRY_AFTER_FAILURE_SECONDS)
    assert len(world.provisioner(config).run_once().launched) == 2
    world.wall.advance(60)
    assert world.provisioner(config).run_once().launched == []
    assert len(world.instances()) == 2


def test_registered_static_nodes_are_counted_once(world: World) -> None:
    config = make_config(static(replicas=2))
    launched = world.provisioner(config).run_once().launched
    for index, record in enumerate(launched):
        world.register_node(record.provider_id, f"static-node-{index}", ready=True)
    world.wall.advance(60)
    report = world.provisioner(config).run_once()
    assert len(report.reconciles[0].registered) == 2
    assert report.launched == []
    assert len(world.instances()) == 2


def test_a_watching_invocation_fills_a_static_pool_without_any_pending_pod(world: World) -> None:
    config = make_config(static(replicas=2), reconcile_interval_seconds=0.5)
    clock = VirtualLoopClock()
    report = world.provisioner(config, loop_clock=clock).run_until(clock.monotonic() + 8.0)
    assert len(report.launched) == 2
    assert len(world.instances()) == 2


def _replacement(provisioner: Any, pool: NodePool) -> list[Any]:
    catalog, _ = provisioner.catalogs()
    [template] = nodepool_templates([pool], provisioner.config.nodeclasses)
    return static_claims(template, catalog, [], 1)


def test_a_replacement_that_would_pass_limits_nodes_is_refused_under_the_lease(world: World) -> None:
    # A disruption replacement planned before the provisioner filled the pool to its limit.
    pool = static(replicas=2, limits={"nodes": "2"})
    provisioner = world.provisioner(make_config(pool))
    assert len(provisioner.run_once().launched) == 2
    guard = StaticLimitGuard(provisioner.lifecycle)
    refused = guard.launch_claims(_replacement(provisioner, pool))
    assert refused.launched == [] and "limits.nodes (2)" in next(iter(refused.failed.values()))
    assert world.create_fleet_calls() == 2

    roomy = static(replicas=2, limits={"nodes": "3"})
    provisioner = world.provisioner(make_config(roomy))
    guard = StaticLimitGuard(provisioner.lifecycle)
    assert len(guard.launch_claims(_replacement(provisioner, roomy)).launched) == 1
    assert len(world.instances()) == 3


def test_a_static_pool_no_instance_type_meets_is_reported_not_launched(world: World) -> None:
    metrics = RecordingMetrics()
    config = make_config(static(replicas=2, instance_types=["nope.large"]))
    report = world.provisioner(config, metrics=metrics).run_once()
    assert report.launched == []
    assert "no instance type meets its requirements" in report.passes[0].failed["static"]
    assert metrics.total(LAUNCH_ERRORS, NodePool="static") == 1
    assert world.create_fleet_calls() == 0
