"""expireAfter and terminationGracePeriod as Karpenter keeps them: copied onto each NodeClaim at launch, so a
node expires by its own lifetime and an edit on the NodePool is drift, rolled within the budgets."""

from __future__ import annotations

from dataclasses import replace

from fleetwright.claims.terms import ClaimTerms, claim_terms, recorded_terms
from fleetwright.disruption.inputs import unreadable_terms
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT, EXPIRATION, NodeState
from fleetwright.model.hashes import UNVERSIONED, nodepool_hash
from fleetwright.state.nodeclaims import NodeClaimRecord
from tests.disruption.plan_builders import DAY, HOUR, busy, node, planner_input, pool
from tests.support.disruption import RigFactory, nodepool

MONTH_TERMS = ClaimTerms(expire_after=720 * 3600, termination_grace_period=None)
DAY_TERMS = ClaimTerms(expire_after=24 * 3600, termination_grace_period=None)


def _fleet(count: int, launched_with: str, terms: ClaimTerms | None, age: float = 2 * DAY) -> list[NodeState]:
    return [
        node(
            f"n{i:02d}",
            "m5.large",
            pods=busy(f"w{i}", 2),
            age=age + i,
            nodepool_hash=launched_with,
            terms=terms,
        )
        for i in range(count)
    ]


def test_lowering_expire_after_drifts_nodes_within_the_budget_instead_of_expiring_them_all() -> None:
    # Karpenter: expireAfter is copied onto each NodeClaim and hashed; 720h → 24h is drift, budgeted.
    before = pool(expire_after="720h", policy="WhenEmpty")
    after = pool(expire_after="24h", policy="WhenEmpty", budgets=[{"nodes": "10%"}])
    nodes = _fleet(10, nodepool_hash(before), MONTH_TERMS)
    hashes = {"default": nodepool_hash(after)}

    result = plan(planner_input(nodes, [after], nodepool_hashes=hashes))

    assert result.expirations == []
    assert result.command is not None and result.command.method == DRIFT
    assert len(result.command.candidates) == 1
    assert "NodePool default changed" in result.command.explanation


def test_an_expire_after_edit_rolls_every_node_one_budget_at_a_time() -> None:
    before = pool(expire_after="720h", policy="WhenEmpty")
    after = pool(expire_after="24h", policy="WhenEmpty", budgets=[{"nodes": "10%"}])
    fleet = _fleet(10, nodepool_hash(before), MONTH_TERMS)
    hashes = {"default": nodepool_hash(after)}
    rolled: list[str] = []
    for _ in range(12):
        result = plan(planner_input(fleet, [after], nodepool_hashes=hashes))
        assert result.expirations == []
        if result.command is None:
            break
        assert result.command.method == DRIFT
        [going] = result.command.candidates
        # While it drains, the 10 % budget (one node) is used up: nothing else goes.
        draining = [replace(s, terminating=True) if s is going else s for s in fleet]
        held = plan(planner_input(draining, [after], nodepool_hashes=hashes)).command
        assert held is None or held.method != DRIFT
        rolled.append(going.name)
        fresh = node(f"r{len(rolled):02d}", "m5.large", pods=busy(f"r{len(rolled)}", 2), age=HOUR)
        fleet = [s for s in fleet if s is not going] + [
            replace(fresh, nodepool_hash=hashes["default"], terms=DAY_TERMS)
        ]
    assert sorted(rolled) == [f"n{i:02d}" for i in range(10)]


def test_nodeclaim_expires_by_its_own_expire_after_not_the_nodepools_current_one() -> None:
    # Karpenter's expiration controller reads spec.expireAfter from the NodeClaim.
    old = node("old", "m5.large", pods=busy("w", 2), age=3 * DAY, terms=DAY_TERMS)
    young = node("young", "m5.large", pods=busy("y", 2), age=3 * DAY, terms=MONTH_TERMS)
    result = plan(planner_input([old, young], [pool(expire_after="720h")]))
    assert [(c.method, c.node_names) for c in result.expirations] == [(EXPIRATION, ["old"])]
    assert (
        "its NodeClaim's" in result.expirations[0].explanation
        and "expireAfter 24h" in result.expirations[0].explanation
    )


def test_claims_recorded_before_terms_were_copied_follow_the_nodepool_and_do_not_drift_on_upgrade() -> None:
    # The fallback: no copied terms → the NodePool's current expireAfter; its unversioned hash still matches.
    legacy_pool = pool(expire_after="24h")
    legacy = node(
        "legacy",
        "m5.large",
        pods=busy("w", 2),
        age=2 * DAY,
        nodepool_hash=nodepool_hash(legacy_pool, UNVERSIONED),
        hash_version=UNVERSIONED,
    )
    result = plan(
        planner_input([legacy], [legacy_pool], nodepool_hashes={"default": nodepool_hash(legacy_pool)})
    )
    assert [c.node_names for c in result.expirations] == [["legacy"]]
    assert "NodePool default expireAfter 24h" in result.expirations[0].explanation
    kept = plan(
        planner_input(
            [replace(legacy, created_at=legacy.created_at + DAY + HOUR)],
            [legacy_pool],
            nodepool_hashes={"default": nodepool_hash(legacy_pool)},
        )
    )
    assert kept.expirations == []
    assert kept.command is None or kept.command.method != DRIFT


def test_drain_deadline_is_the_nodeclaims_termination_grace_period(make_rig: RigFactory) -> None:
    # Karpenter: the termination deadline comes from the NodeClaim's spec.terminationGracePeriod.
    rig = make_rig(nodepool(consolidate_after="Never", expire_after="1h", grace="30m"))
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="1500m")
    rig.config.nodepools[0] = nodepool(consolidate_after="Never", expire_after="1h", grace="2h")
    rig.world.wall.advance(3601)

    rig.controller().run_once()

    [request] = rig.workflows.started.values()
    assert request.node == node and request.reason == "Expired"
    assert abs(request.deadline_epoch - (rig.world.wall() + 1800)) < 2
    assert request.on_deadline == "delete"


def test_a_claim_recorded_before_terms_were_copied_is_drained_by_its_nodepools_grace_period(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="Never", expire_after="1h", grace="45m"))
    node = rig.node("m5.large", legacy_claim=True)
    rig.pod("web-0", node, cpu="1500m")
    controller = rig.controller()
    controller.run_once()
    assert rig.workflows.started == {}  # its unversioned hashes match: no drift on upgrade
    rig.world.wall.advance(3601)

    controller.run_once()

    [request] = rig.workflows.started.values()
    assert request.node == node and request.reason == "Expired"
    assert abs(request.deadline_epoch - (rig.world.wall() + 2700)) < 2


def test_one_invocation_after_lowering_expire_after_starts_only_what_the_drift_budget_allows(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="Never", expire_after="720h"))
    nodes = [rig.node("m5.large") for _ in range(10)]
    rig.world.wall.advance(2 * DAY)
    rig.config.nodepools[0] = nodepool(
        consolidate_after="Never", expire_after="24h", budgets=[{"nodes": "10%"}]
    )

    rig.controller().run_once()

    requests = list(rig.workflows.started.values())
    assert [r.reason for r in requests] == ["Drifted"]
    assert requests[0].node in nodes


def test_a_claim_with_unreadable_terms_follows_its_nodepool_and_is_reported() -> None:
    broken = NodeClaimRecord(id="default-abc", nodepool="default", status="Initialized", created_at=0.0)
    broken.expire_after, broken.termination_grace_period = "a fortnight", "1h"
    assert recorded_terms(broken) is None
    assert claim_terms(broken, pool(expire_after="24h")).expire_after == 24 * 3600
    [problem] = unreadable_terms([broken])
    assert "claim default-abc" in problem and "'a fortnight'" in problem
    fine = NodeClaimRecord(id="default-def", nodepool="default", status="Initialized", created_at=0.0)
    fine.expire_after = "Never"
    assert unreadable_terms([fine]) == [] and recorded_terms(fine) == ClaimTerms(None, None)
