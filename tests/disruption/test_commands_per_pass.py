"""One disruption invocation starts as many commands as the budgets allow, as Karpenter's controller
re-queues after each command: N drifted nodes under a budget of B roll in about ⌈N/B⌉ invocations, not N.
No node is started twice, the budget is never exceeded, and a replacement's room stays promised to the
pods it was launched for."""

from __future__ import annotations

from fleetwright.disruption.promised import reserve_promised_pods, room_is_kept
from fleetwright.disruption.types import Command
from fleetwright.model.pod import Pod
from fleetwright.scheduling.types import NewNodeClaim
from fleetwright.state.nodeclaims import NodeClaimRecord
from tests.disruption.plan_builders import node, planner_input, pod
from tests.disruption.test_controller import _publish_new_ami
from tests.support.disruption import Rig, RigFactory, nodepool


def drifted(make_rig: RigFactory, count: int, budget: str) -> tuple[Rig, list[str]]:
    rig = make_rig(nodepool(consolidate_after="Never", budgets=[{"nodes": budget}]))
    nodes = [rig.node("m5.large") for _ in range(count)]
    for i, name in enumerate(nodes):
        rig.pod(f"web-{i}", name, cpu="1500m")  # fits on no other node: each needs a replacement
    rig.controller().run_once()
    assert rig.workflows.started == {}  # nothing drifted yet
    _publish_new_ami(rig)
    return rig, nodes


def test_drifted_nodes_roll_as_many_at_once_as_the_budget_allows(make_rig: RigFactory) -> None:
    rig, nodes = drifted(make_rig, 6, "50%")
    before = rig.claim_ids()

    report = rig.controller().run_once()

    started = rig.workflows.started.values()
    assert sorted(r.node for r in started) == sorted({r.node for r in started})  # none twice
    assert len(started) == 3  # 50 % of 6, in one invocation
    assert {r.node for r in started} <= set(nodes)
    replacements = rig.replacements(before)
    assert len(replacements) == 3  # one per drifted node, none launched twice
    assert report.rounds == 4  # three commands, then a round that finds the budget used up


def test_rounds_stop_at_the_budget(make_rig: RigFactory) -> None:
    rig, _ = drifted(make_rig, 6, "1")
    before = rig.claim_ids()

    report = rig.controller().run_once()

    assert len(rig.workflows.started) == 1
    assert len(rig.replacements(before)) == 1
    assert report.rounds == 2


def test_a_replacement_on_its_way_keeps_the_room_of_the_pods_it_was_launched_for() -> None:
    leaving_pods = [pod("web-0", "1500m"), pod("web-1", "200m")]
    leaving = node("a", pods=leaving_pods, terminating=True, claim_id="claim-a")
    starting = node("b", initialized=False, claim_id="claim-b")
    inp = planner_input([leaving, starting])
    claims = {
        "claim-b": NodeClaimRecord(
            id="claim-b", nodepool="default", status="Registered", created_at=0.0, pods=["default/web-0"]
        ),
    }
    assert reserve_promised_pods(inp, claims) == 1
    assert [p.key for p in starting.node.pods] == ["default/web-0"]
    assert reserve_promised_pods(inp, claims) == 0  # already there: not counted twice


def claim(pods: list[Pod]) -> NewNodeClaim:
    return NewNodeClaim("r", "default", [], ["us-east-1a"], ["on-demand"], {}, [], list(pods), {}, {}, 0.1)


def test_only_a_command_whose_pods_all_go_to_its_replacements_lets_the_invocation_plan_again() -> None:
    moving = [pod("web-0", "500m"), pod("web-1", "500m")]
    leaving = node("a", pods=moving)
    replacement = claim(moving)
    assert room_is_kept(Command("drift", "Drifted", [leaving], [replacement]))
    half = claim(moving[:1])
    assert not room_is_kept(Command("drift", "Drifted", [leaving], [half]))  # web-1 goes to a node that stays
    assert not room_is_kept(Command("consolidation", "Underutilized", [leaving], []))
    assert room_is_kept(Command("emptiness", "Empty", [node("b", pods=[pod("agent", daemonset=True)])], []))
