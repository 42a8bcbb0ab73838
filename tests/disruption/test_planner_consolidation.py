"""Consolidation: underutilized nodes merged or replaced by cheaper ones, and the anti-churn rules."""

from __future__ import annotations

import pytest

from fleetwright.disruption.consolidation import SINGLE_NODE_ATTEMPTS
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import MULTI_NODE, SINGLE_NODE, UNDERUTILIZED, DisruptionSettings
from fleetwright.model import labels as wk
from tests.disruption.plan_builders import NOW, busy, node, nodeclass, planner_input, pod, pool

ROOT_VOLUME = 20 * 0.08 / 730  # the default 20 GiB gp3 root volume, $/h
BROAD_SPOT = [
    {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
]


def test_underutilized_nodes_are_merged_into_one_cheaper_node() -> None:
    nodes = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 2)) for i in range(3)]
    command = plan(planner_input(nodes)).command
    assert command is not None
    assert (command.method, command.reason) == (MULTI_NODE, UNDERUTILIZED)
    assert sorted(command.node_names) == ["n0", "n1", "n2"]
    [replacement] = command.replacements
    # Savings count whole bills: three instances and root volumes (20 GiB gp3) become one of each.
    before = sum(n.price + ROOT_VOLUME for n in nodes)
    assert replacement.price < before
    assert replacement.bill.total == pytest.approx(replacement.price + ROOT_VOLUME)
    assert command.savings == pytest.approx(before - replacement.bill.total)
    assert sorted(p.key for p in replacement.pods) == sorted(p.key for n in nodes for p in n.node.pods)
    assert all(t.cheapest(None, frozenset(replacement.capacity_types)) for t in replacement.instance_types)
    assert command.explanation.startswith("consolidate 3 nodes (m5.xlarge ×3, $0.583/h) into 1 ")
    assert f"saves ${command.savings:.3f}/h" in command.explanation


def test_node_whose_pods_fit_nowhere_cheaper_stays() -> None:
    # 7 CPUs requested: within the NodePool's types only another m5.2xlarge (or bigger) holds them.
    nodes = [node("full", "m5.2xlarge", pods=[pod("huge-0", "7", "8Gi")])]
    assert plan(planner_input(nodes)).command is None


def test_when_empty_pool_never_consolidates_underutilized_nodes() -> None:
    nodes = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 1)) for i in range(3)]
    assert plan(planner_input(nodes, [pool(policy="WhenEmpty")])).command is None
    assert plan(planner_input(nodes, [pool(policy="WhenEmptyOrUnderutilized")])).command is not None


def test_no_replacement_of_a_candidate_by_its_own_type_in_multi_node_commands() -> None:
    # Merging both into a new m5.2xlarge would only move the big node's pods; deleting the small one
    # (its pods fit on the big node) saves the same money.
    nodes = [
        node("roomy", "m5.2xlarge", pods=busy("big", 6, cpu="1")),
        node("small", "m5.large", pods=busy("w", 2)),
    ]
    command = plan(planner_input(nodes)).command
    assert command is not None
    assert command.node_names == ["small"]
    assert command.replacements == []


def test_a_node_is_never_replaced_by_its_own_type() -> None:
    # An on-demand m5.large in a NodePool that may also buy spot: a spot m5.large would be "cheaper".
    nodes = [node("n", "m5.large", pods=busy("w", 1))]
    only_m5 = pool(instance_types=["m5.large"], capacity_types=["on-demand", "spot"])
    assert plan(planner_input(nodes, [only_m5])).command is None
    with_c5 = pool(instance_types=["m5.large", "c5.large"], capacity_types=["on-demand", "spot"])
    command = plan(planner_input(nodes, [with_c5])).command
    assert command is not None
    assert [t.name for t in command.replacements[0].instance_types] == ["c5.large"]


def test_a_replacement_can_only_fall_back_to_offerings_that_still_save() -> None:
    # An on-demand m5.large ($0.096/h): r5.large saves money as spot ($0.045–0.050/h) but not on-demand
    # ($0.126/h), so the launch must not fall back to on-demand when spot runs out.
    nodes = [node("n", "m5.large", pods=busy("w", 1))]
    both = pool(instance_types=["m5.large", "r5.large"], capacity_types=["on-demand", "spot"])
    command = plan(planner_input(nodes, [both])).command
    assert command is not None
    [replacement] = command.replacements
    assert [t.name for t in replacement.instance_types] == ["r5.large"]
    assert replacement.capacity_types == ["spot"]
    offerings = [o for t in replacement.instance_types for o in t.offerings]
    assert offerings and all(o.capacity_type == "spot" and o.price < 0.096 * 0.9 for o in offerings)


def test_spot_to_spot_needs_fifteen_cheaper_types() -> None:
    nodes = [node("n", "m5.2xlarge", capacity_type="spot", pods=busy("w", 2))]
    few = pool(instance_types=["m5.large", "c5.large", "m5.2xlarge"], capacity_types=["spot"])
    on = DisruptionSettings(spot_to_spot=True)
    assert plan(planner_input(nodes, [few], settings=on)).command is None
    command = plan(planner_input(nodes, [pool(requirements=BROAD_SPOT)], settings=on)).command
    assert command is not None and command.method == SINGLE_NODE
    [replacement] = command.replacements
    assert len(replacement.instance_types) == 15
    assert replacement.capacity_types == ["spot"]
    assert all(t.name != "m5.2xlarge" for t in replacement.instance_types)
    assert replacement.price < nodes[0].price


def test_spot_to_spot_is_off_unless_switched_on() -> None:
    nodes = [node("n", "m5.2xlarge", capacity_type="spot", pods=busy("w", 2))]
    assert plan(planner_input(nodes, [pool(requirements=BROAD_SPOT)])).command is None
    settings = DisruptionSettings(spot_to_spot=False)
    assert plan(planner_input(nodes, [pool(requirements=BROAD_SPOT)], settings=settings)).command is None


def test_minimum_saving_is_required() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 2))]
    assert plan(planner_input(nodes)).command is not None
    # c5.large saves $0.107 of $0.192/h (56%): not enough when 60% is required.
    assert plan(planner_input(nodes, settings=DisruptionSettings(min_saving_fraction=0.6))).command is None
    assert plan(planner_input(nodes, settings=DisruptionSettings(min_saving_dollars=0.2))).command is None


def test_any_cheaper_replacement_is_taken_as_karpenters_consolidation_does() -> None:
    # Karpenter replaces a node by any cheaper one; an m5.large saves under 5 % of an m7i.large's bill.
    nodes = [node("n", "m7i.large", pods=busy("w", 2))]
    pools = [pool(instance_types=["m7i.large", "m5.large"])]
    command = plan(planner_input(nodes, pools)).command
    assert command is not None and command.method == SINGLE_NODE
    [replacement] = command.replacements
    assert [t.name for t in replacement.instance_types] == ["m5.large"]
    assert 0 < command.savings < 0.05 * (nodes[0].price + ROOT_VOLUME)


def test_without_a_minimum_saving_a_replacement_of_equal_price_is_still_refused() -> None:
    # Karpenter's consolidation needs a strictly cheaper replacement: an m5.large costs what an m6i.large
    # costs, so moving the pods would evict them for nothing.
    nodes = [node("n", "m6i.large", pods=busy("w", 2))]
    result = plan(planner_input(nodes, [pool(instance_types=["m6i.large", "m5.large"])]))
    assert result.command is None


def test_the_minimum_saving_setting_refuses_a_move_saving_five_percent() -> None:
    nodes = [node("n", "m7i.large", pods=busy("w", 2))]
    pools = [pool(instance_types=["m7i.large", "m5.large"])]
    by_fraction = DisruptionSettings(min_saving_fraction=0.10)
    assert plan(planner_input(nodes, pools, settings=by_fraction)).command is None
    by_dollars = DisruptionSettings(min_saving_dollars=0.01)
    assert plan(planner_input(nodes, pools, settings=by_dollars)).command is None


def test_consolidate_after_counts_from_the_last_pod_event_not_the_launch() -> None:
    # Launched a day ago, but a pod was bound 10 s ago: consolidateAfter 30s has not passed.
    busy_now = [node("n", "m5.xlarge", pods=busy("w", 2))]
    busy_now[0].last_pod_event = NOW - 10
    assert plan(planner_input(busy_now)).command is None
    busy_now[0].last_pod_event = NOW - 31
    assert plan(planner_input(busy_now)).command is not None
    # Without a known pod event the launch counts; a young node waits for consolidateAfter.
    young = [node("n", "m5.xlarge", pods=busy("w", 2), age=120)]
    assert plan(planner_input(young, [pool(after="5m")])).command is None
    assert plan(planner_input(young, [pool(after="1m")])).command is not None


def test_a_minimum_node_age_still_holds_when_set() -> None:
    young = [node("n", "m5.xlarge", pods=busy("w", 2), age=120)]
    young[0].last_pod_event = NOW - 100
    assert plan(planner_input(young)).command is not None
    settings = DisruptionSettings(min_node_age_seconds=300)
    assert plan(planner_input(young, settings=settings)).command is None


def test_nodes_of_unknown_price_are_not_consolidated() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 2))]
    nodes[0].price = 0.0
    assert plan(planner_input(nodes)).command is None


def test_underutilized_budget_blocks_consolidation() -> None:
    nodes = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 2)) for i in range(3)]
    zero = pool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}])
    result = plan(planner_input(nodes, [zero]))
    assert result.command is None
    assert all("budget" in result.skipped[n.name] for n in nodes)
    two = pool(budgets=[{"nodes": "2"}])
    command = plan(planner_input(nodes, [two])).command
    assert command is not None and len(command.candidates) == 2


def test_a_consolidation_never_needs_two_new_nodes() -> None:
    # The preferred NodePool only offers m5.2xlarge (one 7-CPU pod each): moving all three pods would
    # open three nodes, so no multi-node command; n0 alone is replaced by one m5.2xlarge.
    pools = [
        pool("large", instance_types=["m5.4xlarge"]),
        pool("small", instance_types=["m5.2xlarge"], weight=10),
    ]
    nodes = [
        node("n0", "m5.4xlarge", nodepool="large", pods=[pod("a-0", "7", "1Gi")]),
        node("n1", "m5.4xlarge", nodepool="large", pods=[pod("b-0", "7", "1Gi"), pod("c-0", "5", "1Gi")]),
    ]
    command = plan(planner_input(nodes, pools)).command
    assert command is not None
    assert command.method == SINGLE_NODE
    assert command.node_names == ["n0"]
    [replacement] = command.replacements
    assert replacement.nodepool == "small"
    assert [p.key for p in replacement.pods] == ["default/a-0"]


def test_most_wasteful_node_goes_first() -> None:
    nodes = [
        node("a-half", "m5.2xlarge", pods=busy("a", 4, cpu="1")),
        node("b-idle", "m5.2xlarge", pods=busy("b", 1, cpu="1")),
    ]
    settings = DisruptionSettings(max_candidates=1)  # no multi-node command: single-node order decides
    command = plan(planner_input(nodes, settings=settings)).command
    assert command is not None and command.node_names == ["b-idle"]


def test_single_node_attempts_are_bounded() -> None:
    assert SINGLE_NODE_ATTEMPTS >= 10


def _burstable_choice(cpu: str) -> tuple[float, list[str], str]:
    """One m5.large ($0.096/h) running one pod of ``cpu``, in a NodePool of m5.large and t3.large
    ($0.0832/h, 2 vCPUs at a 30% baseline: 600m CPU, surplus at $0.05 per vCPU-hour)."""
    nodes = [node("n", "m5.large", pods=[pod("w-0", cpu, "1Gi")])]
    command = plan(planner_input(nodes, [pool(instance_types=["m5.large", "t3.large"])])).command
    if command is None:
        return 0.0, [], ""
    [replacement] = command.replacements
    return command.savings, [t.name for t in replacement.instance_types], command.explanation


def test_consolidation_does_not_move_pods_to_a_lower_price_whose_credits_cost_more() -> None:
    # 1500m on the t3.large spends 0.9 vCPU-hour of surplus credits an hour: $0.0832 + $0.045 (+ the
    # volume) is more than the m5.large's whole bill, though its price is 13% lower.
    savings, types, _ = _burstable_choice("1500m")
    assert (savings, types) == (0.0, [])


def test_consolidation_moves_pods_to_a_burstable_type_whose_baseline_covers_them() -> None:
    # 500m is below the t3.large's 600m baseline: no credits, the bill is $0.0128/h lower.
    savings, types, explanation = _burstable_choice("500m")
    assert types == ["t3.large"]
    assert savings == pytest.approx(0.096 - 0.0832)
    assert "into 1 t3.large ($0.085/h): saves $0.013/h" in explanation


def test_a_public_ipv4_address_per_node_counts_in_the_savings() -> None:
    nodes = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 2)) for i in range(3)]
    public = nodeclass(associatePublicIPAddress=True)
    command = plan(planner_input(nodes, nodeclasses=[public])).command
    assert command is not None
    [replacement] = command.replacements
    assert replacement.bill.address == 0.005
    before = sum(n.price + ROOT_VOLUME + 0.005 for n in nodes)
    assert command.savings == pytest.approx(before - replacement.price - ROOT_VOLUME - 0.005)


def test_nodes_are_not_merged_into_a_new_node_costing_as_much_as_one_of_them() -> None:
    # Karpenter's filterOutSameInstanceType: m5a.large could hold both pods, so a new m6a.large ($0.0864)
    # is no better than keeping the m5a.large ($0.086) and moving the other pod onto it.
    types = ["m5.large", "m5a.large", "m6a.large"]
    nodes = [
        node("a", "m5.large", pods=busy("a", 1, cpu="500m", memory="3Gi")),
        node("b", "m5a.large", pods=busy("b", 1, cpu="500m", memory="3Gi")),
    ]
    result = plan(planner_input(nodes, [pool(instance_types=types)]))

    command = result.command
    assert command is not None and command.method == SINGLE_NODE and command.replacements == []
    assert command.node_names == ["a"]


def test_a_pending_pod_keeps_the_room_it_is_about_to_take() -> None:
    nodes = [
        node("a", "m5.large", pods=busy("a", 1, cpu="1")),
        node("b", "m5.large", pods=busy("b", 1, cpu="500m")),
    ]
    pools = [pool(instance_types=["m5.large"])]
    assert plan(planner_input(nodes, pools)).command is not None  # either node's pod fits on the other

    # A pod waits for capacity and fits on b; moving a's pod there, or b's pods away, would leave it none.
    waiting = pod("waiting-0", "1", "512Mi")
    result = plan(planner_input(nodes, pools, pending=[waiting]))
    assert result.command is None
    assert "waiting-0 is waiting for" in result.unconsolidatable["a"]

    # A pending pod that needs a new node whatever happens does not hold consolidation up.
    huge = pod("huge-0", "64", "1Gi")
    assert plan(planner_input(nodes, pools, pending=[huge])).command is not None


def test_a_replacement_keeps_the_min_values_its_nodepool_asks_for() -> None:
    def requirements(min_values: int) -> list[dict[str, object]]:
        types = ["m5.xlarge", "m5.large", "m5a.large", "c5.large"]
        return [
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": types, "minValues": min_values},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ]

    nodes = [node("n", "m5.xlarge", pods=busy("w", 2))]
    # Three types are cheaper than the m5.xlarge: enough for minValues 3.
    command = plan(planner_input(nodes, [pool(requirements=requirements(3))])).command
    assert command is not None and len(command.replacements[0].instance_types) == 3
    # minValues 4: the launch could pick among all four, but only three of them save anything.
    result = plan(planner_input(nodes, [pool(requirements=requirements(4))]))
    assert result.command is None
    assert "minValues is 4" in result.unconsolidatable["n"]


def test_a_node_whose_pods_lowest_cost_would_spread_over_two_nodes_is_replaced_by_one() -> None:
    # 6 CPU-heavy and 4 memory-heavy pods (7 CPU, 30 GiB) on an m5.8xlarge ($1.536/h). LowestCost puts
    # them on a c5.2xlarge and an r5.xlarge ($0.592/h), two nodes, which one command cannot launch; as
    # Karpenter packs them, one m5.4xlarge ($0.768/h) holds them all and halves the bill.
    pods = busy("cpu", 6, cpu="1", memory="1Gi") + busy("mem", 4, cpu="250m", memory="6Gi")
    nodes = [node("big", "m5.8xlarge", pods=pods)]
    types = ["c5.2xlarge", "r5.xlarge", "m5.4xlarge", "m5.8xlarge"]
    command = plan(planner_input(nodes, [pool(instance_types=types)])).command
    assert command is not None
    assert (command.method, command.node_names) == (SINGLE_NODE, ["big"])
    [replacement] = command.replacements
    assert replacement.instance_types[0].name == "m5.4xlarge"
    assert sorted(p.key for p in replacement.pods) == sorted(p.key for p in pods)


def test_spot_to_spot_keeps_more_than_fifteen_types_when_min_values_needs_them() -> None:
    # Karpenter raises its 15-type spot-to-spot cap until the NodePool's minValues hold.
    nodes = [node("n", "m5.2xlarge", capacity_type="spot", pods=busy("w", 2))]
    twenty = [*BROAD_SPOT, {"key": wk.INSTANCE_TYPE, "operator": "Exists", "minValues": 20}]
    on = DisruptionSettings(spot_to_spot=True)
    command = plan(planner_input(nodes, [pool(requirements=twenty)], settings=on)).command
    assert command is not None and command.method == SINGLE_NODE
    [replacement] = command.replacements
    assert len({t.name for t in replacement.instance_types}) == 20
    assert replacement.capacity_types == ["spot"]
    assert all(t.name != "m5.2xlarge" for t in replacement.instance_types)
