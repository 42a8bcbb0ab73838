"""Scale-up end to end: pending pods in the emulator → a NodeClaim launched in moto EC2 → the node
registers and initializes."""

from __future__ import annotations

from fleetwright.aws.tags import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG
from fleetwright.observability.metrics import (
    CLAIMS_LAUNCHED,
    HOURLY_COST_LAUNCHED,
    NODE_STARTUP_DURATION,
    NODES_INITIALIZED,
    NODES_REGISTERED,
    PENDING_PODS,
    RecordingMetrics,
)
from fleetwright.state import ClaimStatus
from tests.support.provisioning import World, make_config, nodepool


def test_pending_pods_get_a_node_that_registers_and_initializes(world: World) -> None:
    world.pending(3, cpu="1")
    metrics = RecordingMetrics()
    provisioner = world.provisioner(metrics=metrics)

    report = provisioner.run_once()

    assert report.lease_acquired
    [claim] = report.launched
    assert claim.pod_count == 3
    assert claim.nodepool == "default"
    # The instance exists in EC2, tagged with its claim, NodePool and cluster.
    [instance] = world.instances()
    tags = world.instance_tags(instance)
    assert tags[NODECLAIM_TAG] == claim.id
    assert tags[NODEPOOL_TAG] == "default"
    assert tags[CLUSTER_TAG] == "demo"
    assert instance["InstanceType"] == claim.instance_type
    assert world.aws.fleet.requests[0]["ClientToken"] == claim.id
    # The record says so too.
    stored = world.state.nodeclaims.get(claim.id)
    assert stored is not None
    assert stored.status == ClaimStatus.LAUNCHED
    assert stored.instance_id == instance["InstanceId"]
    assert stored.zone == instance["Placement"]["AvailabilityZone"]
    assert stored.price is not None and stored.price > 0
    assert metrics.total(PENDING_PODS) == 3
    assert metrics.total(CLAIMS_LAUNCHED, NodePool="default", InstanceType=claim.instance_type) == 1
    assert metrics.total(HOURLY_COST_LAUNCHED) == stored.price

    # The kubelet registers the node (not ready yet): the claim is registered, not initialized.
    world.register_node(stored.provider_id, "ip-10-0-0-1.ec2.internal", ready=False)
    reconciled = provisioner.reconcile()
    assert reconciled.registered == [claim.id] and reconciled.initialized == []
    registered = world.state.nodeclaims.get(claim.id)
    assert registered is not None and registered.status == ClaimStatus.REGISTERED
    assert registered.node_name == "ip-10-0-0-1.ec2.internal"
    assert registered.registered_at == world.wall()

    world.register_node(stored.provider_id, "ip-10-0-0-1.ec2.internal", ready=True)
    world.wall.advance(40)
    assert provisioner.reconcile().initialized == [claim.id]
    initialized = world.state.nodeclaims.get(claim.id)
    assert initialized is not None and initialized.status == ClaimStatus.INITIALIZED
    assert initialized.initialized_at == world.wall()
    assert metrics.total(NODES_REGISTERED) == 1 and metrics.total(NODES_INITIALIZED) == 1
    # Time to a usable node: from the launch decision (the claim's creation) to initialized.
    startup = metrics.total(NODE_STARTUP_DURATION, NodePool="default")
    assert startup == initialized.initialized_at - initialized.created_at and startup >= 40


def test_a_node_with_startup_taints_is_not_initialized_until_they_are_gone(world: World) -> None:
    startup = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    config = make_config(nodepool(startup_taints=[startup]))
    world.pending(1)
    provisioner = world.provisioner(config)
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[startup])
    first = provisioner.reconcile()
    assert first.registered == [claim.id] and first.initialized == []
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    assert provisioner.reconcile().initialized == [claim.id]


def test_pods_that_fit_on_existing_nodes_launch_nothing(world: World) -> None:
    world.register_node("aws:///us-east-1a/i-existing", "existing", ready=True)  # 4 CPUs free
    world.pending(3, cpu="1")
    report = world.provisioner().run_once()
    assert report.launched == []
    assert report.passes[0].placed_on_existing == 3
    assert world.create_fleet_calls() == 0


def test_pods_no_nodepool_can_run_launch_nothing_and_are_explained(world: World) -> None:
    world.pending(1, cpu="64")  # larger than every allowed instance type
    report = world.provisioner().run_once()
    assert report.launched == []
    assert report.passes[0].unschedulable == 1
    assert world.create_fleet_calls() == 0


def test_distinct_claims_are_launched_in_one_pass(world: World) -> None:
    # Two NodePools with different instance types: two claims, two CreateFleet calls, one pass.
    config = make_config(
        nodepool("compute", instance_types=["c5.xlarge"]),
        nodepool("memory", instance_types=["r5.xlarge"]),
    )
    world.pending(2, cpu="3")  # each needs its own 4-CPU node
    report = world.provisioner(config).run_once()
    assert len(report.launched) == 2
    assert len(report.passes) == 1
    assert {len(world.instances())} == {2}
