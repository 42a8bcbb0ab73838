"""validate(): a planned command is re-checked against a fresh read of the cluster before acting."""

from __future__ import annotations

import copy

from fleetwright.disruption.planner import plan, validate
from fleetwright.disruption.types import Command, DisruptionInput
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from tests.disruption.plan_builders import DAY, busy, node, planner_input, pod, pool


def consolidation_input() -> DisruptionInput:
    return planner_input([node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 2)) for i in range(3)])


def planned(inp: DisruptionInput) -> Command:
    command = plan(inp).command
    assert command is not None
    return command


def test_unchanged_cluster_keeps_the_command() -> None:
    command = planned(consolidation_input())
    assert validate(command, consolidation_input()) is None


def test_a_pod_added_to_a_candidate_invalidates() -> None:
    command = planned(consolidation_input())
    fresh = consolidation_input()
    late = pod("late-0")
    late.node_name = command.node_names[0]
    next(n for n in fresh.nodes if n.name == late.node_name).node.pods.append(late)
    why = validate(command, fresh)
    assert why is not None and "late-0" in why


def test_a_vanished_node_invalidates() -> None:
    command = planned(consolidation_input())
    fresh = consolidation_input()
    fresh.nodes = [n for n in fresh.nodes if n.name != command.node_names[0]]
    why = validate(command, fresh)
    assert why == f"node {command.node_names[0]} is gone"


def test_a_new_do_not_disrupt_annotation_invalidates() -> None:
    command = planned(consolidation_input())
    fresh = consolidation_input()
    fresh.nodes[1].annotations[DO_NOT_DISRUPT_ANNOTATION] = "true"
    why = validate(command, fresh)
    assert why is not None and DO_NOT_DISRUPT_ANNOTATION in why


def test_destination_filled_up_invalidates_a_delete() -> None:
    inp = planner_input(
        [
            node("roomy", "m5.2xlarge", pods=busy("big", 6, cpu="1")),
            node("small", "m5.large", pods=busy("w", 2)),
        ]
    )
    command = planned(inp)
    assert command.node_names == ["small"] and not command.replacements
    fresh = copy.deepcopy(inp)
    for extra in busy("new", 2, cpu="900m"):
        extra.node_name = "roomy"
        fresh.nodes[0].node.pods.append(extra)
    why = validate(command, fresh)
    assert why == "consolidation now needs 1 new node(s) instead of 0"


def test_empty_node_that_got_a_pod_invalidates() -> None:
    inp = planner_input([node("e", empty_for=100)])
    command = planned(inp)
    fresh = planner_input([node("e", empty_for=100, pods=[pod("web-0")])])
    assert validate(command, fresh) is not None


def test_expiration_stays_valid_while_the_node_exists() -> None:
    nodes = [node("old", "m5.large", pods=busy("w", 2), age=40 * DAY)]
    [expiration] = plan(planner_input(nodes, [pool(expire_after="720h")])).expirations
    guarded = [
        node(
            "old",
            "m5.large",
            pods=busy("w", 3),
            age=40 * DAY,
            annotations={DO_NOT_DISRUPT_ANNOTATION: "true"},
        )
    ]
    assert validate(expiration, planner_input(guarded, [pool(expire_after="720h")])) is None
    assert validate(expiration, planner_input([], [pool(expire_after="720h")])) == "node old is gone"


def test_budget_used_up_meanwhile_invalidates() -> None:
    command = planned(consolidation_input())
    fresh = consolidation_input()
    fresh.nodepools = [pool(budgets=[{"nodes": "1"}])]
    fresh.nodes.append(node("other", "m5.large", pods=busy("o", 2), terminating=True))
    why = validate(command, fresh)
    assert why is not None and "budget" in why
