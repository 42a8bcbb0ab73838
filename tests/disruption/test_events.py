"""The events a disruption pass leaves on Nodes and NodeClaims, as ``kubectl describe`` would list them."""

from __future__ import annotations

from typing import Any

from fleetwright.claims.nodeclaim_objects import NodeClaimObjects
from fleetwright.disruption import metrics as m
from fleetwright.disruption.notices import blocked_why
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DisruptionInput, Plan
from fleetwright.kube.resources import EVENTS, NODE_CLAIMS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from tests.support.disruption import Rig, RigFactory, nodepool

JsonObject = dict[str, Any]


def events(rig: Rig, name: str, kind: str) -> list[tuple[str, str]]:
    """(reason, message) of the events about the object ``kind``/``name``."""
    listed = rig.world.client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
    return sorted((e["reason"], e["message"]) for e in listed if e["involvedObject"]["kind"] == kind)


def conditions(rig: Rig, claim: str) -> dict[str, tuple[str, str]]:
    """The object's Drifted / Consolidatable conditions that are True, with their reasons and messages."""
    obj = rig.world.client.get(NODE_CLAIMS, claim)
    return {
        c["type"]: (c["reason"], c["message"])
        for c in obj["status"]["conditions"]
        if c["type"] in ("Drifted", "Consolidatable") and c["status"] == "True"
    }


def claim_of(rig: Rig, node: str) -> str:
    return next(r.id for r in rig.world.state.nodeclaims.list() if r.node_name == node)


def test_a_do_not_disrupt_pod_blocks_its_node_and_says_so(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    guarded = rig.node("m5.xlarge")
    rig.pod("batch-0", guarded, cpu="100m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})

    rig.controller().run_once()

    expected = ("DisruptionBlocked", f"Pod default/batch-0 is annotated {DO_NOT_DISRUPT_ANNOTATION}")
    assert events(rig, guarded, "Node") == [expected]
    assert events(rig, claim_of(rig, guarded), "NodeClaim") == [expected]
    # The dashboard's "why disruption is blocked" graph counts it.
    assert rig.metrics.total(m.DISRUPTION_BLOCKED, Why="DoNotDisrupt") == 1
    assert rig.metrics.total(m.DISRUPTION_BLOCKED) == 1


def test_a_zero_budget_blocks_and_says_which_budget(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "0%"}]))
    node = rig.node("m5.large")

    rig.controller().run_once()

    [(reason, message)] = events(rig, node, "Node")
    assert reason == "DisruptionBlocked"
    assert "NodePool default allows 0 more Empty disruption(s)" in message
    assert rig.metrics.total(m.DISRUPTION_BLOCKED, Why="Budget") == 1
    assert rig.metrics.total(m.DISRUPTION_BLOCKED) == 1


def test_the_kind_of_a_blocked_message() -> None:
    assert blocked_why("PodDisruptionBudget default/web allows 0 disruption(s)") == "PodDisruptionBudget"
    assert blocked_why("not initialized yet") == "NotInitialized"
    assert blocked_why(f"node is annotated {DO_NOT_DISRUPT_ANNOTATION}") == "DoNotDisrupt"
    assert blocked_why("something new") == "Other"


def test_a_busy_node_of_a_when_empty_pool_is_unconsolidatable(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", policy="WhenEmpty"))
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")

    rig.controller().run_once()

    assert events(rig, busy, "Node") == [
        ("Unconsolidatable", 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty')
    ]


def test_a_node_no_cheaper_node_can_replace_is_unconsolidatable(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", instance_types=["m5.large"]))
    node = rig.node("m5.large")
    rig.pod("big-0", node, cpu="1500m")

    report = rig.controller().run_once()

    assert report.commands == []
    [(reason, message)] = events(rig, node, "Node")
    assert reason == "Unconsolidatable" and message.startswith("No replacement type is cheaper than $")


def test_a_replacement_launched_for_consolidation_says_so(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "100%"}]))
    a = rig.node("m5.2xlarge")
    b = rig.node("m5.2xlarge", zone="us-east-1b")
    rig.pod("web-a", a, cpu="500m")
    rig.pod("web-b", b, cpu="500m")
    before = rig.claim_ids()

    rig.controller().run_once()

    [replacement] = rig.replacements(before)
    assert events(rig, replacement.id, "NodeClaim") == [
        ("DisruptionLaunching", "Launching NodeClaim: Underutilized")
    ]
    # The nodes being replaced are decided, not blocked: each is told it is a consolidation candidate.
    for name in (a, b):
        [(reason, message)] = events(rig, name, "Node")
        assert reason == "ConsolidationCandidate"
        assert message.startswith(
            f"Consolidation candidate: replace: [{name}] (part of 2-node consolidation)"
        )
        assert events(rig, claim_of(rig, name), "NodeClaim") == [(reason, message)]


def test_a_zero_budget_says_so_on_the_nodepool_for_each_reason(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "0", "reasons": ["Drifted"]}]))
    rig.node("m5.large")

    rig.controller().run_once()

    assert events(rig, "default", "NodePool") == [
        ("DisruptionBlocked", "No allowed disruptions for disruption reason Drifted due to blocking budget")
    ]


def test_a_balanced_move_that_scores_enough_is_approved_on_the_node(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", policy="Balanced", budgets=[{"nodes": "100%"}]))
    for i in range(3):
        kept = rig.node("m5.2xlarge")
        rig.pod(f"keep-{i}", kept, cpu="100m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    candidate = rig.node("m5.2xlarge")
    rig.pod("web-0", candidate, cpu="100m")

    report = rig.controller().run_once()

    assert [c.nodes for c in report.commands] == [[candidate]]
    approved = (
        "ConsolidationApproved",
        "score 1.00 >= threshold 0.50 (k: 2, savings 25.0%, disruption 25.0%)",
    )
    assert approved in events(rig, candidate, "Node")
    assert approved in events(rig, claim_of(rig, candidate), "NodeClaim")
    [candidacy] = [m for r, m in events(rig, candidate, "Node") if r == "ConsolidationCandidate"]
    assert candidacy.startswith(
        f"Consolidation candidate: Underutilized: delete: nodepools=[default]: [{candidate}]"
    )


def test_claim_objects_say_drifted_and_consolidatable(make_rig: RigFactory, apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)
    rig = make_rig(nodepool(consolidate_after="0s", labels={"team": "a"}, instance_types=["m5.large"]))
    node = rig.node("m5.large")
    rig.pod("big-0", node, cpu="1500m")
    claim = claim_of(rig, node)
    NodeClaimObjects(rig.world.client).sync(rig.world.state.nodeclaims.list())

    rig.controller().run_once()
    assert conditions(rig, claim) == {"Consolidatable": ("Consolidatable", "")}  # as Karpenter's SetTrue

    # The NodePool's template changes: the node has drifted from it.
    rig.config.nodepools = [
        nodepool(consolidate_after="0s", labels={"team": "b"}, instance_types=["m5.large"])
    ]
    rig.controller().run_once()
    # Karpenter's drift reason, and what changed.
    assert conditions(rig, claim)["Drifted"] == ("NodePoolDrifted", "NodePool default changed")


def test_a_consolidation_dropped_when_checked_again_says_why_on_its_node(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="0s"))
    node = rig.node("m5.2xlarge")
    rig.pod("web-0", node, cpu="100m")

    def slow_plan(inp: DisruptionInput) -> Plan:
        decided = plan(inp)
        rig.ticker.now += 20  # longer than revalidate_after_seconds (15): the command is checked again
        return decided

    controller = rig.controller(_planner=slow_plan, _validator=lambda _c, _i: "a pod arrived")
    report = controller.run_once()

    assert [(c.status, c.nodes) for c in report.commands] == [("invalidated", [node])]
    [rejected] = [m for r, m in events(rig, node, "Node") if r == "ConsolidationRejected"]
    assert rejected.startswith(
        f"Consolidation rejected: Underutilized: replace: nodepools=[default]: [{node}]"
    )
    assert ", reason: a pod arrived (savings: $" in rejected
    assert rig.workflows.started == {}


def test_an_events_api_that_refuses_never_stops_a_consolidation(
    make_rig: RigFactory, apiserver: ApiServer
) -> None:
    rig = make_rig(nodepool(consolidate_after="0s", budgets=[{"nodes": "100%"}]))
    a = rig.node("m5.2xlarge")
    b = rig.node("m5.2xlarge", zone="us-east-1b")
    rig.pod("web-a", a, cpu="500m")
    rig.pod("web-b", b, cpu="500m")
    apiserver.faults.inject(403, verb="POST", resource="events", times=1000)

    report = rig.controller().run_once()

    assert report.error == "" and report.problems == []
    assert [c.status for c in report.commands] == ["executed"]
    assert rig.workflows.nodes() == {a, b}
    assert rig.metrics.total("EventsNotRecorded") >= 1
    assert rig.world.client.list(EVENTS).items == []
