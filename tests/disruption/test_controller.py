"""The disruption controller against moto and the Kubernetes API emulator: what it removes, what it leaves,
and how it acts (replacements first, then a termination workflow per node)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws import amis as aws_amis
from fleetwright.aws.amis import alias_parameters
from fleetwright.disruption import metrics as m
from fleetwright.disruption.candidates import Cluster
from fleetwright.disruption.drift import drift_reason
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DisruptionInput, DisruptionSettings, Plan
from fleetwright.kube.resources import POD_DISRUPTION_BUDGETS, PODS
from fleetwright.local.aws_fakes import seed_ssm_parameter
from fleetwright.local.inprocess.disruption import run_disruption
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.model.nodepool import NodePool
from fleetwright.state.nodeclaims import ClaimStatus
from tests.provisioning.faults import ThrottleEveryAttempt
from tests.support.disruption import RigFactory, nodepool
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


def test_an_empty_node_goes_after_consolidate_after_and_not_before(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="60s", policy="WhenEmpty"))
    empty = rig.node("m5.large")
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")
    controller = rig.controller()

    first = controller.run_once()
    rig.world.wall.advance(45)
    second = controller.run_once()
    assert rig.workflows.started == {}
    assert first.commands == [] and second.commands == [] and not first.error

    rig.world.wall.advance(20)
    report = controller.run_once()

    [request] = rig.workflows.started.values()
    assert request.node == empty and request.reason == "Empty"
    assert request.instance_id == rig.instance_id(empty)
    assert request.claim_id.startswith("default-")
    assert request.wait_for_replacement is False and request.replacement_claims == []
    # No terminationGracePeriod on the pool: the default drain bound applies, and at it the disruption
    # is called off rather than deleting pods a PodDisruptionBudget or do-not-disrupt still protects.
    assert abs(request.deadline_epoch - (rig.world.wall() + 3600)) < 2
    assert request.on_deadline == "abandon"
    assert request.uncordon_on_failure is True  # a failed workflow gives the node back
    assert [c.status for c in report.commands] == ["executed"]
    assert rig.metrics.total(m.NODES_DISRUPTED, Reason="Empty") == 1
    assert rig.metrics.total(m.DISRUPTION_COMMANDS, Method="emptiness") == 1


def test_in_process_run_drains_and_terminates_the_empty_node(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", grace="10m"))
    empty = rig.node("m5.large")
    instance_id = rig.instance_id(empty)

    run = run_disruption(
        kube=rig.world.kube,
        cloud=rig.world.cloud,
        state=rig.world.state,
        config=rig.config,
        clock=rig.world.wall,
        sleep=lambda _s: None,
        collect_garbage=False,
    )

    assert [e.status for e in run.executions] == ["SUCCEEDED"]
    assert rig.world.kube.get_node(empty) is None
    state = rig.world.aws.clients.ec2.describe_instances(InstanceIds=[instance_id])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] in ("shutting-down", "terminated")
    claims = [r for r in rig.world.state.nodeclaims.list() if r.instance_id == instance_id]
    assert [c.status for c in claims] == [ClaimStatus.TERMINATED]


def test_two_underutilized_nodes_are_merged_into_one_cheaper_node(make_rig: RigFactory) -> None:
    # The default budget (10%) would let only one of the two nodes go at a time.
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "100%"}]))
    a = rig.node("m5.2xlarge")
    b = rig.node("m5.2xlarge", zone="us-east-1b")
    rig.pod("web-a", a, cpu="500m")
    rig.pod("web-b", b, cpu="500m")
    before = rig.claim_ids()

    report = rig.controller().run_once()

    [replacement] = rig.replacements(before)
    assert replacement.status == ClaimStatus.LAUNCHED and replacement.instance_id
    assert replacement.price is not None and replacement.price < 2 * 0.384
    assert replacement.nodepool_hash and replacement.nodeclass_hash
    requests = list(rig.workflows.started.values())
    assert {r.node for r in requests} == {a, b}
    assert all(r.reason == "Underutilized" for r in requests)
    assert all(r.wait_for_replacement and r.replacement_claims == [replacement.id] for r in requests)
    [command] = report.commands
    assert command.replacements == [replacement.id] and command.savings > 0
    assert rig.metrics.total(m.DISRUPTION_SAVINGS) == command.savings


def test_nodes_whose_pods_fit_nowhere_stay(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", instance_types=["m5.large"]))
    for name in ("a", "b"):
        node = rig.node("m5.large")
        rig.pod(f"big-{name}", node, cpu="1500m")
    before = rig.claim_ids()

    report = rig.controller().run_once()

    assert rig.workflows.started == {} and report.commands == []
    assert rig.claim_ids() == before
    assert report.nodes == 2 and report.candidates == 2


def test_a_zero_budget_blocks_removal(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "0%"}]))
    rig.node("m5.large")

    report = rig.controller().run_once()

    assert rig.workflows.started == {} and report.commands == []


def test_do_not_disrupt_on_the_node_or_a_pod_blocks_removal(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    rig.node("m5.large", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    guarded = rig.node("m5.xlarge")
    rig.pod("batch-0", guarded, cpu="100m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})

    report = rig.controller().run_once()

    assert rig.workflows.started == {} and report.commands == []


def test_a_pod_disruption_budget_at_zero_blocks_consolidation(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    a = rig.node("m5.xlarge")
    b = rig.node("m5.xlarge")
    rig.pod("web-a", a, cpu="200m")
    rig.pod("web-b", b, cpu="200m")
    rig.world.client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    wait_for(lambda: "disruptionsAllowed" in (rig.world.kube.list_pdbs()[0].get("status") or {}))
    controller = rig.controller()

    blocked = controller.run_once()
    assert rig.workflows.started == {} and blocked.commands == []

    rig.world.client.delete(POD_DISRUPTION_BUDGETS, "web", "default")
    allowed = controller.run_once()
    assert len(allowed.commands) == 1 and rig.workflows.nodes() <= {a, b} and rig.workflows.started


def _publish_new_ami(rig: Any) -> str:
    """A newer EKS AMI appears under the alias's SSM parameter (as after an EKS AMI release)."""
    ec2 = rig.world.aws.clients.ec2
    image = ec2.register_image(
        Name="amazon-eks-node-al2023-x86_64-standard-1.31-v20261201",
        Architecture="x86_64",
        RootDeviceName="/dev/xvda",
    )["ImageId"]
    for parameter, arch, variant in alias_parameters("al2023@latest", rig.world.aws.cluster.version):
        if (arch, variant) == ("amd64", "standard"):
            seed_ssm_parameter(parameter, image)
    aws_amis._CACHE.invalidate()  # the five-minute AMI cache would hide the release from this test
    return str(image)


def test_a_node_on_an_outdated_ami_is_replaced(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    old = rig.node("m5.large")
    rig.pod("web-0", old, cpu="1500m")
    controller = rig.controller()
    controller.run_once()
    assert rig.workflows.started == {}  # nothing drifted yet
    new_image = _publish_new_ami(rig)
    before = rig.claim_ids()

    controller.run_once()

    [replacement] = rig.replacements(before)
    if rig.strict is not None:  # looked at a while later: EC2 lists the replacement by now
        rig.strict.consistency.settle()
    launched = rig.world.aws.clients.ec2.describe_instances(InstanceIds=[replacement.instance_id])
    assert launched["Reservations"][0]["Instances"][0]["ImageId"] == new_image
    [request] = rig.workflows.started.values()
    assert request.node == old and request.reason == "Drifted"
    assert request.wait_for_replacement and request.replacement_claims == [replacement.id]


def test_an_expired_node_is_replaced(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never", expire_after="1h", grace="30m"))
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="1500m")
    controller = rig.controller()
    controller.run_once()
    assert rig.workflows.started == {}
    rig.world.wall.advance(3601)
    before = rig.claim_ids()

    controller.run_once()

    [replacement] = rig.replacements(before)
    [request] = rig.workflows.started.values()
    assert request.node == node and request.reason == "Expired"
    assert request.replacement_claims == [replacement.id]
    assert abs(request.deadline_epoch - (rig.world.wall() + 1800)) < 2  # the pool's terminationGracePeriod
    assert request.on_deadline == "delete"  # an explicit deadline: what is left then is deleted
    assert rig.metrics.total(m.NODES_DISRUPTED, Reason="Expired") == 1


def test_empty_since_is_cleared_when_a_pod_lands(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="60s", policy="WhenEmpty"))
    node = rig.node("m5.large")
    controller = rig.controller()
    emptiness = rig.world.state.emptiness

    controller.run_once()
    first = emptiness.get(node)
    assert first is not None and abs(first.since - rig.world.wall()) < 1

    rig.world.wall.advance(40)
    rig.pod("web-0", node, cpu="1500m")
    controller.run_once()
    assert emptiness.get(node) is None

    rig.world.wall.advance(40)
    rig.world.client.delete(PODS, "web-0", "default")
    wait_for(lambda: not rig.world.kube.list_pods_on_node(node))
    controller.run_once()
    again = emptiness.get(node)
    assert again is not None and again.since > first.since + 60

    rig.world.wall.advance(30)  # 110 s after first seen empty, but only 30 s since the pod left
    controller.run_once()
    assert rig.workflows.started == {}
    rig.world.wall.advance(31)
    controller.run_once()
    assert rig.workflows.nodes() == {node}


def test_a_command_gone_stale_is_revalidated_and_dropped(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    node = rig.node("m5.large")

    def slow_plan(inp: DisruptionInput) -> Plan:
        decided = plan(inp)
        rig.pod("web-late", node, cpu="1500m")  # a pod lands while the decision is being made
        rig.ticker.now += 20  # longer than revalidate_after_seconds (15)
        return decided

    controller = rig.controller(_planner=slow_plan)
    report = controller.run_once()

    assert report.revalidated
    assert [c.status for c in report.commands] == ["invalidated"]
    assert rig.workflows.started == {}
    assert rig.metrics.total(m.COMMANDS_INVALIDATED) == 1


def test_dry_run_decides_but_acts_on_nothing(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", expire_after="1h"))
    rig.node("m5.large")
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")
    rig.world.wall.advance(7200)
    before = rig.claim_ids()
    instances = len(rig.world.instances())

    report = rig.controller(dry_run=True).run_once()

    assert report.dry_run and report.commands
    assert {c.status for c in report.commands} == {"dry-run"}
    assert rig.workflows.started == {}
    assert rig.claim_ids() == before and len(rig.world.instances()) == instances
    assert all(n["spec"].get("unschedulable") is None for n in rig.world.kube.list_nodes())


def test_a_node_whose_disruption_was_called_off_can_be_disrupted_again(make_rig: RigFactory) -> None:
    # The recording starter leaves the node as it was, like a workflow that called its disruption off
    # (uncordoned) or failed before terminating: a later pass must be able to start a new execution.
    rig = make_rig(nodepool(consolidate_after="0s", policy="WhenEmpty"))
    empty = rig.node("m5.large")
    controller = rig.controller()
    controller.run_once()
    controller.run_once()  # seen empty since the first pass
    assert len(rig.workflows.started) == 1
    rig.world.wall.advance(3700)

    report = controller.run_once()

    assert [c.status for c in report.commands] == ["executed"]
    names = sorted(rig.workflows.started)
    assert len(names) == 2 and all(n.startswith(f"{rig.instance_id(empty)}-Empty-") for n in names)
    assert rig.metrics.total(m.NODES_DISRUPTED, Reason="Empty") == 2


def _spot_market(rig: Any) -> None:
    """Spot prices at 35% of on-demand (moto's are all 0.00001), read before any catalog is cached."""
    from fleetwright.aws.ttlcache import clear_all_caches
    from fleetwright.local.aws_fakes import SpotMarket

    catalog = {t.name: t for t in rig.world.cloud.instance_types(rig.config.nodeclasses[0])}

    def price(name: str, zone: str) -> float:
        on_demand = next((o.price for o in catalog[name].offerings if o.capacity_type == "on-demand"), 1.0)
        return round(on_demand * 0.35 * (1 + 0.02 * (ord(zone[-1]) - ord("a"))), 6)

    offered = {n: frozenset(o.zone for o in t.offerings) for n, t in catalog.items()}
    SpotMarket(offered, price).install(rig.world.aws.clients.ec2)
    clear_all_caches()


def test_a_node_is_never_replaced_by_its_own_type_even_when_spot_is_cheaper(make_rig: RigFactory) -> None:
    # An on-demand m5.large in a pool that may also buy spot: only a spot m5.large would be cheaper.
    rig = make_rig(
        nodepool(consolidate_after="0s", instance_types=["m5.large"], capacity_types=["on-demand", "spot"])
    )
    _spot_market(rig)
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="500m")

    report = rig.controller().run_once()

    assert report.commands == [] and rig.workflows.started == {}
    assert rig.claim_ids() == {c for c in rig.claim_ids() if c.endswith("0000001")}


def test_an_on_demand_node_goes_for_a_spot_node_of_another_type(make_rig: RigFactory) -> None:
    # The control for the test above: with m5.xlarge allowed too, the node is replaced by a spot
    # m5.xlarge, bought as spot only (its on-demand price would not save the minimum).
    rig = make_rig(
        nodepool(
            consolidate_after="0s",
            instance_types=["m5.large", "m5.xlarge"],
            capacity_types=["on-demand", "spot"],
        )
    )
    _spot_market(rig)
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="500m")
    before = rig.claim_ids()

    report = rig.controller().run_once()

    [outcome] = report.commands
    assert outcome.method == "single-node-consolidation" and outcome.nodes == [node]
    [replacement] = rig.replacements(before)
    assert replacement.instance_type == "m5.xlarge" and replacement.capacity_type == "spot"
    assert replacement.capacity_types == ["spot"]


# Types smaller than an m5.2xlarge, so cheaper than it as spot.
SMALL_TYPES = [
    f"{family}.{size}"
    for family in ("m5", "c5", "r5", "m5a", "c5a", "r5a", "m6i", "c6i", "r6i", "m6a", "c6a", "t3")
    for size in ("large", "xlarge")
]


def test_spot_to_spot_needs_fifteen_cheaper_types(make_rig: RigFactory) -> None:
    few = ["m5.2xlarge", "m5.xlarge", "m5.large", "c5.large", "c5.xlarge"]
    rig = make_rig(nodepool(consolidate_after="0s", instance_types=few, capacity_types=["spot"]))
    _spot_market(rig)
    node = rig.node("m5.2xlarge", capacity_type="spot")
    rig.pod("web-0", node, cpu="500m")
    settings = DisruptionSettings(min_node_age_seconds=0, spot_to_spot=True)

    report = rig.controller(settings=settings).run_once()

    assert report.commands == [] and rig.workflows.started == {}  # four cheaper types are not enough


def test_spot_to_spot_replaces_a_spot_node_among_fifteen_cheaper_types(make_rig: RigFactory) -> None:
    rig = make_rig(
        nodepool(consolidate_after="0s", instance_types=["m5.2xlarge", *SMALL_TYPES], capacity_types=["spot"])
    )
    _spot_market(rig)
    node = rig.node("m5.2xlarge", capacity_type="spot")
    rig.pod("web-0", node, cpu="500m")
    before = rig.claim_ids()

    # Off by default (like Karpenter's SpotToSpotConsolidation feature gate).
    assert rig.controller().run_once().commands == []

    report = rig.controller(settings=DisruptionSettings(min_node_age_seconds=0, spot_to_spot=True)).run_once()

    [outcome] = report.commands
    assert outcome.method == "single-node-consolidation" and outcome.nodes == [node]
    [replacement] = rig.replacements(before)
    assert replacement.capacity_type == "spot" and replacement.instance_type != "m5.2xlarge"
    assert len(replacement.instance_types) == 15  # the 15 cheapest candidates, not only the cheapest


def test_an_expired_node_without_a_grace_period_stays_cordoned_for_most_of_a_day(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="Never", expire_after="1h"))
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="1500m")
    rig.world.wall.advance(3601)

    rig.controller().run_once()

    [request] = rig.workflows.started.values()
    assert request.reason == "Expired" and request.on_deadline == "abandon"
    assert abs(request.deadline_epoch - (rig.world.wall() + 23 * 3600)) < 2


def test_nodes_outside_the_selected_subnets_or_security_groups_are_replaced(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    aws = rig.world.aws
    ec2 = aws.clients.ec2
    other = ec2.create_security_group(GroupName="old-nodes", Description="old", VpcId=aws.vpc_id)["GroupId"]
    steady = rig.node("m5.large", security_groups=[aws.security_group])
    rig.pod("web-0", steady, cpu="1500m")
    controller = rig.controller()
    controller.run_once()
    assert rig.workflows.started == {}  # its subnet and security group are the selected ones

    wrong_group = rig.node("m5.large", security_groups=[other])
    rig.pod("web-1", wrong_group, cpu="1500m")
    controller.run_once()
    [request] = rig.workflows.started.values()
    assert request.node == wrong_group and request.reason == "Drifted"

    untagged = rig.node("m5.large", subnet=aws.subnets["c-untagged"], security_groups=[aws.security_group])
    rig.pod("web-2", untagged, cpu="1500m")
    cluster = Cluster(controller.reader.read().input)
    reasons = {name: drift_reason(cluster, cluster.by_name[name]) for name in (steady, wrong_group, untagged)}
    assert reasons[steady] is None
    assert reasons[wrong_group] is not None and other in reasons[wrong_group]
    assert reasons[untagged] == (
        f"subnet {aws.subnets['c-untagged']} is no longer selected by EC2NodeClass default"
    )


def test_a_static_pool_above_its_replicas_drains_its_empty_node_through_the_workflow(
    make_rig: RigFactory,
) -> None:
    document = nodepool(budgets=[{"nodes": "0"}]).model_dump(by_alias=True, exclude_none=True)
    document["spec"]["replicas"] = 1
    rig = make_rig(NodePool.model_validate(document))
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="500m")
    empty = rig.node("m5.large")

    report = rig.controller().run_once()

    [request] = rig.workflows.started.values()
    assert request.node == empty and request.reason == "Overprovisioned"
    assert request.on_deadline == "abandon"  # no terminationGracePeriod: PDBs are never overridden
    assert request.replacement_claims == []
    assert [(c.method, c.status) for c in report.commands] == [("static-scale-down", "executed")]
    # Once the workflow has cordoned it, the next pass counts the node as going: the pool is at its replicas.
    rig.world.kube.mark_disrupted(empty)
    assert rig.controller().run_once().commands == []


def _static(replicas: int, **options: Any) -> NodePool:
    document = nodepool(**options).model_dump(by_alias=True, exclude_none=True)
    document["spec"]["replicas"] = replicas
    return NodePool.model_validate(document)


def test_a_drifted_static_node_is_replaced_by_a_node_of_its_pool_before_it_drains(
    make_rig: RigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("botocore.endpoint.time.sleep", lambda _s: None)
    rig = make_rig(_static(1, consolidate_after="Never"))
    old = rig.node("m5.large")
    rig.pod("web-0", old, cpu="1500m")
    controller = rig.controller()
    _publish_new_ami(rig)
    before = rig.claim_ids()

    # CreateFleet throttled: the replacement fails, so nothing is drained and the node keeps running.
    ec2 = rig.world.aws.clients.ec2
    throttle = ThrottleEveryAttempt("CreateFleet", rig.world.wall.advance, seconds=4).install(ec2)
    failed = controller.run_once()
    assert [c.status for c in failed.commands] == ["failed"]
    assert rig.workflows.started == {}
    assert not rig.world.kube.get_node(old)["spec"].get("unschedulable")
    assert [r.status for r in rig.replacements(before)] == [ClaimStatus.FAILED]

    throttle.uninstall(ec2)
    rig.world.wall.advance(60)
    controller.run_once()
    [replacement] = [r for r in rig.replacements(before) if r.status != ClaimStatus.FAILED]
    assert replacement.nodepool == "default" and replacement.pods == []
    [request] = rig.workflows.started.values()
    assert request.node == old and request.reason == "Drifted"
    assert request.wait_for_replacement and request.replacement_claims == [replacement.id]


def test_nodes_and_their_hourly_cost_are_counted_by_nodepool_and_by_capacity_type(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="1h"))
    for capacity_type in ("spot", "on-demand", "on-demand"):
        busy = rig.node("m5.large", capacity_type=capacity_type)
        rig.pod(f"web-{busy}", busy, cpu="1500m")

    report = rig.controller().run_once()

    assert rig.metrics.total(m.NODE_COUNT, CapacityType="on-demand") == 2
    assert rig.metrics.total(m.NODE_COUNT, CapacityType="spot") == 1
    assert rig.metrics.total(m.NODE_COUNT, NodePool="default") == 3
    costs = {p.dimensions: p.value for p in rig.metrics.points if p.name == m.CLUSTER_HOURLY_COST}
    # The total, and each split adding up to it.
    total = costs[()]
    assert total == report.hourly_cost > 0
    assert costs[(("NodePool", "default"),)] == total
    by_capacity = [v for k, v in costs.items() if k and k[0][0] == "CapacityType"]
    assert len(by_capacity) == 2 and abs(sum(by_capacity) - total) < 1e-9
