"""A node Fleetwright launched that is still starting (registered, NotReady, its startup taint on) is, in
disruption's simulations, what Karpenter takes it for: not an empty node to remove, and not a place the
pods of a leaving node can go until it is initialized (they would wait there, and its room is for the pods
it was launched for)."""

from __future__ import annotations

from fleetwright.state.nodeclaims import ClaimStatus
from tests.support.disruption import RigFactory, nodepool

STARTUP = "node.cilium.io/agent-not-ready:NoSchedule"
STARTING_TAINTS = [
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    {"key": "node.cilium.io/agent-not-ready", "effect": "NoSchedule"},
]


def test_a_starting_node_is_no_empty_node(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", policy="WhenEmpty"))
    starting = rig.node(
        "m5.large",
        ready=False,
        status=ClaimStatus.REGISTERED,
        taints=STARTING_TAINTS,
        startup_taints=[STARTUP],
    )
    controller = rig.controller()

    controller.run_once()
    rig.world.wall.advance(600)
    report = controller.run_once()

    assert report.commands == [] and rig.workflows.started == {}
    assert rig.world.kube.get_node(starting) is not None


def test_a_starting_node_does_not_take_the_pods_of_a_consolidated_node(make_rig: RigFactory) -> None:
    rig = make_rig(
        nodepool(consolidate_after="0s", instance_types=["m5.2xlarge"], budgets=[{"nodes": "100%"}])
    )
    busy = rig.node("m5.2xlarge")
    rig.pod("web-0", busy, cpu="500m")
    rig.node(
        "m5.2xlarge",
        zone="us-east-1b",
        ready=False,
        status=ClaimStatus.REGISTERED,
        taints=STARTING_TAINTS,
        startup_taints=[STARTUP],
    )
    before = rig.claim_ids()

    report = rig.controller().run_once()

    # Karpenter: "would schedule against uninitialized node": the busy node stays, nothing is launched.
    assert report.commands == [] and rig.workflows.started == {}
    assert rig.replacements(before) == []
