"""The planner's emptiness method and the rules every graceful method shares (budgets, do-not-disrupt,
PodDisruptionBudgets, nodes that are not ours)."""

from __future__ import annotations

import pytest

from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import EMPTINESS, EMPTY, Pdb
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.model.pod import LabelSelector
from tests.disruption.plan_builders import HOUR, busy, node, planner_input, pod, pool

DAEMON = [pod("agent", "50m", "64Mi", daemonset=True)]
ROOT_VOLUME = 20 * 0.08 / 730  # the default 20 GiB gp3 root volume, $/h


def test_empty_node_is_removed_once_empty_for_consolidate_after() -> None:
    nodes = [node("empty", pods=list(DAEMON), empty_for=31), node("busy", "m5.xlarge", pods=busy("w", 10))]
    command = plan(planner_input(nodes, [pool(after="30s")])).command
    assert command is not None
    assert (command.method, command.reason, command.node_names) == (EMPTINESS, EMPTY, ["empty"])
    assert command.replacements == []
    assert command.savings == pytest.approx(nodes[0].price + ROOT_VOLUME)  # the instance and its volume


def test_empty_node_stays_before_consolidate_after() -> None:
    nodes = [node("empty", pods=list(DAEMON), empty_for=29)]
    assert plan(planner_input(nodes, [pool(after="30s")])).command is None


def test_finished_pods_do_not_keep_a_node() -> None:
    nodes = [node("empty", pods=[pod("job", phase="Succeeded")], empty_for=60)]
    command = plan(planner_input(nodes, [pool(after="30s")])).command
    assert command is not None and command.node_names == ["empty"]


def test_consolidate_after_never_keeps_empty_nodes() -> None:
    nodes = [node("empty", empty_for=10 * HOUR)]
    assert plan(planner_input(nodes, [pool(after="Never")])).command is None


def test_all_empty_nodes_go_together_longest_empty_first() -> None:
    nodes = [node("a", empty_for=100), node("b", empty_for=300), node("c", empty_for=200)]
    command = plan(planner_input(nodes)).command
    assert command is not None
    assert command.node_names == ["b", "c", "a"]
    assert command.savings == pytest.approx(sum(n.price + ROOT_VOLUME for n in nodes))
    assert "remove 3 empty nodes" in command.explanation


def test_count_budget_limits_the_command_to_the_longest_empty() -> None:
    nodes = [node("a", empty_for=100), node("b", empty_for=300), node("c", empty_for=200)]
    command = plan(planner_input(nodes, [pool(budgets=[{"nodes": "1"}])])).command
    assert command is not None and command.node_names == ["b"]


def test_percentage_budget_rounds_up_and_counts_nodes_already_disrupting() -> None:
    nodes = [node(f"e{i}", empty_for=100 + i) for i in range(4)] + [
        node(f"x{i}", "m5.xlarge", pods=busy(f"w{i}", 3)) for i in range(6)
    ]
    # 10 nodes at 30% → 3; one node already terminating leaves 2.
    nodes[-1].terminating = True
    command = plan(planner_input(nodes, [pool(budgets=[{"nodes": "30%"}])])).command
    assert command is not None and command.node_names == ["e3", "e2"]


def test_zero_budget_blocks_and_says_so() -> None:
    nodes = [node("a", empty_for=100)]
    result = plan(planner_input(nodes, [pool(budgets=[{"nodes": "0%"}])]))
    assert result.command is None
    assert "budget" in result.skipped["a"]


def test_scheduled_budget_blocks_only_inside_its_window() -> None:
    nodes = [node("a", empty_for=100)]
    # NOW is 2025-06-15 15:06:40 UTC: a daily freeze from 15:00 for 1h covers it, one from 09:00 does not.
    frozen = pool(budgets=[{"nodes": "0", "schedule": "0 15 * * *", "duration": "1h"}, {"nodes": "100%"}])
    assert plan(planner_input(nodes, [frozen])).command is None
    later = pool(budgets=[{"nodes": "0", "schedule": "0 9 * * *", "duration": "1h"}, {"nodes": "100%"}])
    assert plan(planner_input(nodes, [later])).command is not None


def test_budget_for_another_reason_does_not_block_emptiness() -> None:
    nodes = [node("a", empty_for=100)]
    other = pool(budgets=[{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}])
    command = plan(planner_input(nodes, [other])).command
    assert command is not None and command.node_names == ["a"]


def test_do_not_disrupt_node_annotation_blocks() -> None:
    nodes = [node("a", empty_for=100, annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})]
    result = plan(planner_input(nodes))
    assert result.command is None
    assert DO_NOT_DISRUPT_ANNOTATION in result.skipped["a"]


def test_do_not_disrupt_pod_blocks_consolidation() -> None:
    guarded = pod("guarded-0", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    nodes = [node("a", "m5.2xlarge", pods=[guarded])]
    result = plan(planner_input(nodes))
    assert result.command is None
    assert "pod default/guarded-0" in result.skipped["a"]
    # Without the annotation the same node is replaced by a cheaper one.
    nodes = [node("a", "m5.2xlarge", pods=[pod("guarded-0")])]
    assert plan(planner_input(nodes)).command is not None


def test_pdb_with_no_disruptions_left_blocks() -> None:
    pdb = Pdb("default", "web", LabelSelector(match_labels=(("app", "web"),)), disruptions_allowed=0)
    nodes = [node("a", "m5.2xlarge", pods=[pod("web-0")])]
    result = plan(planner_input(nodes, pdbs=[pdb]))
    assert result.command is None
    assert "PodDisruptionBudget default/web" in result.skipped["a"]


def test_pdb_in_another_namespace_does_not_block() -> None:
    pdb = Pdb("other", "web", LabelSelector(match_labels=(("app", "web"),)), disruptions_allowed=0)
    nodes = [node("a", "m5.2xlarge", pods=[pod("web-0")])]
    assert plan(planner_input(nodes, pdbs=[pdb])).command is not None


def test_a_node_may_go_alone_when_its_pdb_allows_fewer_than_it_holds() -> None:
    # Draining evicts one pod at a time as the PDB permits.
    pdb = Pdb("default", "web", LabelSelector(match_labels=(("app", "web"),)), disruptions_allowed=1)
    nodes = [node("a", "m5.2xlarge", pods=[pod("web-0"), pod("web-1")])]
    command = plan(planner_input(nodes, pdbs=[pdb])).command
    assert command is not None and command.node_names == ["a"]


def test_pdb_allowance_caps_the_pods_one_command_evicts() -> None:
    pdb = Pdb("default", "web", LabelSelector(match_labels=(("app", "web"),)), disruptions_allowed=2)
    nodes = [node(f"n{i}", "m5.xlarge", pods=[pod(f"web-{i}")]) for i in range(4)]
    command = plan(planner_input(nodes, pdbs=[pdb])).command
    assert command is not None
    assert len(command.candidates) == 2


def test_nodes_of_unknown_nodepools_are_never_removed_but_receive_pods() -> None:
    foreign = node("foreign", "m5.4xlarge", nodepool="", empty_for=HOUR)
    mine = node("mine", "m5.large", pods=busy("w", 2))
    command = plan(planner_input([foreign, mine])).command
    assert command is not None
    assert command.node_names == ["mine"]
    assert command.replacements == []  # its pods move to the foreign node


def test_terminating_and_uninitialized_nodes_are_left_alone() -> None:
    nodes = [node("going", empty_for=100, terminating=True), node("new", empty_for=100, initialized=False)]
    result = plan(planner_input(nodes))
    assert result.command is None
    assert "not initialized" in result.skipped["new"]
    assert "going" not in result.skipped
