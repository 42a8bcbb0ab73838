"""Drift and expiration: nodes that no longer match their NodePool, and nodes past their lifetime."""

from __future__ import annotations

from dataclasses import replace

from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT, DRIFTED, EXPIRATION, EXPIRED
from fleetwright.model import labels as wk
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from tests.disruption.plan_builders import DAY, busy, node, planner_input, pod, pool


def test_changed_nodepool_hash_drifts_a_node_and_replaces_it() -> None:
    nodes = [node("old", "m5.xlarge", pods=busy("w", 6, cpu="500m"), nodepool_hash="h1")]
    inp = planner_input(nodes, nodepool_hashes={"default": "h2"})
    command = plan(inp).command
    assert command is not None
    assert (command.method, command.reason, command.node_names) == (DRIFT, DRIFTED, ["old"])
    assert len(command.replacements) == 1
    assert sorted(p.key for p in command.replacements[0].pods) == sorted(p.key for p in nodes[0].node.pods)
    assert "NodePool default changed" in command.explanation


def test_unknown_or_equal_hashes_are_no_drift() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), nodepool_hash="h1", nodeclass_hash="")]
    for hashes in ({"default": "h1"}, {}):
        inp = planner_input(nodes, nodepool_hashes=hashes, nodeclass_hashes={"default": "c2"})
        command = plan(inp).command
        assert command is None or command.method != DRIFT


def test_changed_nodeclass_hash_drifts() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), nodeclass_hash="c1")]
    command = plan(planner_input(nodes, nodeclass_hashes={"default": "c2"})).command
    assert command is not None and command.method == DRIFT
    assert "EC2NodeClass default changed" in command.explanation


def test_ami_no_longer_selected_drifts() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), image_id="ami-old")]
    command = plan(planner_input(nodes, amis={"default": {"ami-new"}})).command
    assert command is not None and command.method == DRIFT
    assert "ami-old" in command.explanation
    still = plan(planner_input(nodes, amis={"default": {"ami-old", "ami-new"}})).command
    assert still is None or still.method != DRIFT


def test_labels_outside_the_nodepool_requirements_drift() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"))]
    narrowed = pool(instance_types=["c5.xlarge", "c5.2xlarge"])
    command = plan(planner_input(nodes, [narrowed])).command
    assert command is not None and command.method == DRIFT
    assert wk.INSTANCE_TYPE in command.explanation
    assert command.replacements[0].instance_types[0].name.startswith("c5")
    zoned = pool(
        requirements=[{"key": wk.ZONE, "operator": "In", "values": ["us-east-1b"]}],
    )
    command = plan(planner_input(nodes, [zoned])).command
    assert command is not None and command.method == DRIFT
    assert command.replacements[0].zones == ["us-east-1b"]


def test_empty_drifted_nodes_go_together_without_replacements() -> None:
    daemon = pod("agent", daemonset=True)
    nodes = [node(f"n{i}", pods=[daemon], nodepool_hash="h1") for i in range(3)]
    command = plan(planner_input(nodes, nodepool_hashes={"default": "h2"})).command
    assert command is not None
    assert command.method == DRIFT and len(command.candidates) == 3
    assert command.replacements == []


def test_drift_respects_its_budget_and_do_not_disrupt() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), nodepool_hash="h1")]
    frozen = pool(budgets=[{"nodes": "0", "reasons": ["Drifted"]}])
    result = plan(planner_input(nodes, [frozen], nodepool_hashes={"default": "h2"}))
    assert result.command is None or result.command.method != DRIFT
    assert "budget" in result.skipped["n"]
    guarded = [node("n", "m5.xlarge", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"}, nodepool_hash="h1")]
    result = plan(planner_input(guarded, nodepool_hashes={"default": "h2"}))
    assert result.command is None
    assert DO_NOT_DISRUPT_ANNOTATION in result.skipped["n"]


def test_drifted_node_whose_pods_fit_nowhere_is_skipped_for_the_next() -> None:
    # A pod whose volume claim is unknown cannot be scheduled anywhere.
    bound = replace(pod("db-0", "1", "1Gi"), volume_claims=("data-db-0",))
    stuck = node("a-stuck", "m5.xlarge", pods=[bound], nodepool_hash="h1", age=2 * DAY)
    movable = node("b-movable", "m5.xlarge", pods=busy("w", 12, cpu="300m"), nodepool_hash="h1")
    result = plan(planner_input([stuck, movable], nodepool_hashes={"default": "h2"}))
    command = result.command
    assert command is not None and command.node_names == ["b-movable"]
    assert "cannot be scheduled" in result.skipped["a-stuck"]


def test_expired_node_is_replaced_despite_zero_budget_and_do_not_disrupt() -> None:
    guarded = pod("w-0", "1", "1Gi", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    nodes = [
        node(
            "old", "m5.xlarge", pods=[guarded], age=31 * DAY, annotations={DO_NOT_DISRUPT_ANNOTATION: "true"}
        ),
        node("fresh", "m5.large", age=DAY, pods=busy("x", 7, cpu="250m")),
    ]
    expiring = pool(expire_after="720h", budgets=[{"nodes": "0"}])
    result = plan(planner_input(nodes, [expiring]))
    [expiration] = result.expirations
    assert (expiration.method, expiration.reason, expiration.node_names) == (EXPIRATION, EXPIRED, ["old"])
    assert [p.key for c in expiration.replacements for p in c.pods] == ["default/w-0"]
    assert "expired" in expiration.explanation
    assert result.command is None


def test_several_nodes_expire_in_one_pass_and_share_replacements() -> None:
    nodes = [node(f"old{i}", "m5.large", pods=busy(f"w{i}", 2), age=40 * DAY) for i in range(3)]
    result = plan(planner_input(nodes, [pool(expire_after="720h")]))
    assert sorted(c.node_names[0] for c in result.expirations) == ["old0", "old1", "old2"]
    replaced = sorted(p.key for c in result.expirations for r in c.replacements for p in r.pods)
    assert replaced == sorted(p.key for n in nodes for p in n.node.pods)
    assert sum(len(c.replacements) for c in result.expirations) == 1  # six small pods share one node


def test_expired_nodes_are_not_used_by_graceful_methods() -> None:
    nodes = [node("old", empty_for=3600, age=40 * DAY)]
    result = plan(planner_input(nodes, [pool(expire_after="720h")]))
    assert [c.node_names for c in result.expirations] == [["old"]]
    assert result.command is None


def test_a_pass_with_expirations_leaves_graceful_methods_for_the_next() -> None:
    # "empty" would go for emptiness, but "old" expires this pass and its pods might be simulated onto
    # "empty": one kind of decision per pass.
    nodes = [
        node("old", "m5.large", pods=busy("w", 2), age=40 * DAY),
        node("empty", "m5.large", empty_for=3600, age=DAY),
    ]
    result = plan(planner_input(nodes, [pool(expire_after="720h")]))
    assert [c.node_names for c in result.expirations] == [["old"]]
    assert result.command is None
    assert result.skipped["empty"] == "expirations go first this pass"
    later = plan(planner_input([nodes[1]], [pool(expire_after="720h")]))
    assert later.command is not None and later.command.node_names == ["empty"]


def test_a_subnet_no_longer_selected_drifts() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), subnet_id="subnet-old")]
    command = plan(planner_input(nodes, subnets={"default": {"subnet-a", "subnet-b"}})).command
    assert command is not None and command.method == DRIFT
    assert "subnet subnet-old is no longer selected by EC2NodeClass default" in command.explanation
    kept = plan(planner_input(nodes, subnets={"default": {"subnet-old", "subnet-b"}})).command
    assert kept is None or kept.method != DRIFT


def test_security_groups_that_differ_from_the_selected_ones_drift() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"), security_group_ids=frozenset({"sg-1"}))]
    for selected in ({"sg-2"}, {"sg-1", "sg-2"}):  # replaced, or one more group selected now
        command = plan(planner_input(nodes, security_groups={"default": selected})).command
        assert command is not None and command.method == DRIFT
        assert "security groups sg-1 differ" in command.explanation
    same = plan(planner_input(nodes, security_groups={"default": {"sg-1"}})).command
    assert same is None or same.method != DRIFT


def test_unresolved_selectors_or_unknown_instance_networking_are_no_drift() -> None:
    unknown = [node("n", "m5.xlarge", pods=busy("w", 12, cpu="300m"))]
    inp = planner_input(unknown, subnets={"default": {"subnet-a"}}, security_groups={"default": {"sg-2"}})
    command = plan(inp).command
    assert command is None or command.method != DRIFT
    known = [
        node(
            "n",
            "m5.xlarge",
            pods=busy("w", 12, cpu="300m"),
            subnet_id="subnet-old",
            security_group_ids=frozenset({"sg-1"}),
        )
    ]
    # A selector resolving to nothing (or not resolved this pass) says nothing about the node.
    inp = planner_input(known, subnets={"default": set()}, security_groups={})
    command = plan(inp).command
    assert command is None or command.method != DRIFT
