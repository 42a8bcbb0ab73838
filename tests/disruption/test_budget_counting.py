"""Which nodes a NodePool's disruption budget counts, as Karpenter counts them
(``BuildDisruptionBudgetMapping``): only initialized nodes make up the total a percentage is taken of, and
of those the ones already being disrupted and the ones whose Node is not Ready use the allowance up."""

from __future__ import annotations

from dataclasses import replace

from fleetwright.disruption.candidates import Cluster
from tests.disruption.plan_builders import node, planner_input, pool

TWENTY_PERCENT = pool(budgets=[{"nodes": "20%"}])


def test_replacements_still_starting_do_not_count_towards_a_percentage() -> None:
    running = [node(f"n{i}") for i in range(10)]
    starting = [node(f"s{i}", initialized=False) for i in range(10)]
    cluster = Cluster(planner_input([*running, *starting], [TWENTY_PERCENT]))
    assert cluster.allowed("default", "Drifted") == 2  # 20 % of the 10 initialized, not of 20


def test_a_starting_node_does_not_use_up_the_budget_either() -> None:
    running = [node(f"n{i}") for i in range(10)]
    starting_and_going = node("s0", initialized=False, terminating=True)
    cluster = Cluster(planner_input([*running, starting_and_going], [TWENTY_PERCENT]))
    assert cluster.allowed("default", "Drifted") == 2


def test_not_ready_nodes_use_up_the_budget() -> None:
    nodes = [node(f"n{i}") for i in range(10)]
    nodes[3] = replace(nodes[3], node=replace(nodes[3].node, ready=False))
    cluster = Cluster(planner_input(nodes, [TWENTY_PERCENT]))
    assert cluster.allowed("default", "Drifted") == 1


def test_nodes_being_disrupted_use_up_the_budget() -> None:
    nodes = [node(f"n{i}", terminating=i < 2) for i in range(10)]
    cluster = Cluster(planner_input(nodes, [TWENTY_PERCENT]))
    assert cluster.allowed("default", "Drifted") == 0
