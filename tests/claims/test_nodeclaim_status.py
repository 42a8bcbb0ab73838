"""What ``kubectl describe nodeclaim`` shows beyond the lifecycle: ``ConsistentStateFound`` from the shape
check at initialization, ``DisruptionReason`` while a disruption's workflow runs (gone once none does), and
an object left alone when nothing about it changed."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube.resources import NODE_CLAIMS, NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from tests.disruption.test_controller import _publish_new_ami
from tests.support.disruption import RigFactory
from tests.support.disruption import nodepool as disruption_pool
from tests.support.provisioning import World


@pytest.fixture
def crds(apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)


def nodeclaim(world: World, name: str) -> dict[str, Any]:
    return dict(world.client.get(NODE_CLAIMS, name))


def condition(world: World, name: str, kind: str) -> dict[str, Any] | None:
    conditions = nodeclaim(world, name)["status"]["conditions"]
    return next((c for c in conditions if c["type"] == kind), None)


@pytest.mark.usefixtures("crds")
def test_a_node_of_the_launched_shape_is_found_consistent_and_its_object_is_then_left_alone(
    world: World,
) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    assert provisioner.reconcile().initialized == [claim.id]

    found = condition(world, claim.id, "ConsistentStateFound")
    assert found is not None and (found["status"], found["reason"]) == ("True", "ConsistentStateFound")
    version = nodeclaim(world, claim.id)["metadata"]["resourceVersion"]

    for _ in range(2):
        provisioner.reconcile()
        provisioner.run_once()
    assert nodeclaim(world, claim.id)["metadata"]["resourceVersion"] == version  # nothing changed: no write


@pytest.mark.usefixtures("crds")
def test_a_node_much_smaller_than_its_type_fails_the_consistency_check(world: World) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    world.client.patch(NODES, "node-a", {"status": {"capacity": {"cpu": "100m"}}}, subresource="status")

    assert provisioner.reconcile().initialized == [claim.id]

    found = condition(world, claim.id, "ConsistentStateFound")
    assert found is not None
    assert (found["status"], found["reason"], found["message"]) == (
        "False",
        "ConsistencyCheckFailed",
        "Consistency Check Failed",
    )
    ready = condition(world, claim.id, "Ready")
    assert ready is not None and ready["status"] == "True"  # not one of Ready's dependents


def test_a_drifted_node_being_replaced_says_why_and_stops_saying_it_once_no_workflow_runs(
    make_rig: RigFactory,
    apiserver: ApiServer,
) -> None:
    from fleetwright.claims.nodeclaim_objects import NodeClaimObjects

    install_karpenter_crds(apiserver.store)
    rig = make_rig(disruption_pool(consolidate_after="Never", budgets=[{"nodes": "1"}]))
    nodes = [rig.node("m5.large") for _ in range(2)]
    for i, name in enumerate(nodes):
        rig.pod(f"web-{i}", name, cpu="1500m")
    claims = {r.node_name: r.id for r in rig.world.state.nodeclaims.list()}
    NodeClaimObjects(rig.world.client).sync(rig.world.state.nodeclaims.list())
    _publish_new_ami(rig)

    rig.controller().run_once()

    [started] = rig.workflows.started.values()
    marked = condition(rig.world, claims[started.node], "DisruptionReason")
    assert marked is not None and (marked["status"], marked["reason"], marked["message"]) == (
        "True",
        "Drifted",
        "Drifted",
    )
    [other] = [n for n in nodes if n != started.node]
    assert condition(rig.world, claims[other], "DisruptionReason") is None  # held back by the budget
    drifted = condition(rig.world, claims[other], "Drifted")
    assert drifted is not None and drifted["reason"] == "AMIDrift"

    # The disruption is called off (its workflow gone, the node not cordoned) and no budget lets it go again.
    rig.workflows.started.clear()
    rig.config.nodepools = [disruption_pool(consolidate_after="Never", budgets=[{"nodes": "0"}])]
    rig.controller().run_once()

    assert rig.workflows.started == {}
    assert condition(rig.world, claims[started.node], "DisruptionReason") is None

    # Nothing changes any more: the next passes write nothing.
    versions = {c: nodeclaim(rig.world, c)["metadata"]["resourceVersion"] for c in claims.values()}
    rig.controller().run_once()
    assert {c: nodeclaim(rig.world, c)["metadata"]["resourceVersion"] for c in claims.values()} == versions
