"""Static NodePools in the planner: surplus nodes scaled down (empty first, do-not-disrupt last, not
budgeted), never consolidated or removed for emptiness, still drifted and expired."""

from __future__ import annotations

from typing import Any

from fleetwright.disruption.planner import plan, validate
from fleetwright.disruption.static_pools import OVERPROVISIONED, SCALE_DOWN
from fleetwright.disruption.types import DRIFT, EXPIRATION
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION, NODEPOOL
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from tests.disruption.plan_builders import DAY, busy, node, planner_input, pod, pool


def static(
    replicas: int, name: str = "static", *, limits: dict[str, str] | None = None, **options: Any
) -> NodePool:
    document = pool(name, **options).model_dump(by_alias=True, exclude_none=True)
    document["spec"]["replicas"] = replicas
    if limits:
        document["spec"]["limits"] = limits
    return NodePool.model_validate(document)


def removed(result: Any) -> list[str]:
    return [c.name for command in result.scale_down for c in command.candidates]


def test_surplus_nodes_go_empty_first_then_cheapest_to_move_and_do_not_disrupt_last() -> None:
    guarded = pod("guarded-0", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    nodes = [
        node("busy", pods=busy("web", 3), nodepool="static"),
        node("light", pods=busy("api", 1), nodepool="static"),
        node("guarded", pods=[guarded], nodepool="static"),
        node("empty", pods=[pod("agent-0", daemonset=True)], nodepool="static"),
    ]
    # A budget of zero does not hold scale-down back (Karpenter deletes surplus static NodeClaims directly).
    result = plan(planner_input(nodes, [static(1, budgets=[{"nodes": "0"}])]))
    assert removed(result) == ["empty", "light", "busy"]
    assert {(c.method, c.reason) for c in result.scale_down} == {(SCALE_DOWN, OVERPROVISIONED)}
    assert result.command is None and result.expirations == []


def test_a_pool_at_its_replicas_loses_nothing() -> None:
    nodes = [node(f"n{i}", nodepool="static") for i in range(3)]
    assert removed(plan(planner_input(nodes, [static(3)]))) == []
    assert removed(plan(planner_input(nodes, [static(5)]))) == []


def test_nodes_already_going_count_as_gone() -> None:
    nodes = [node("a", nodepool="static", terminating=True), node("b", nodepool="static")]
    assert removed(plan(planner_input(nodes, [static(1)]))) == []


def test_a_pool_with_claims_launching_waits_for_them() -> None:
    launching = Node(name="static-claim", labels={NODEPOOL: "static"}, allocatable={}, in_flight=True)
    nodes = [node("a", nodepool="static"), node("b", nodepool="static")]
    result = plan(planner_input(nodes, [static(1)], in_flight=[launching]))
    assert removed(result) == []
    assert "launching" in result.skipped["a"]


def test_empty_static_nodes_are_not_removed_for_emptiness() -> None:
    nodes = [node(f"n{i}", nodepool="static", empty_for=DAY) for i in range(2)]
    assert plan(planner_input(nodes, [static(2, policy="WhenEmpty")])).command is None
    # The same nodes in a dynamic pool go.
    dynamic = [node(f"n{i}", empty_for=DAY) for i in range(2)]
    assert plan(planner_input(dynamic, [pool(policy="WhenEmpty")])).command is not None


def test_underutilized_static_nodes_are_not_consolidated() -> None:
    nodes = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 1), nodepool="static") for i in range(2)]
    assert plan(planner_input(nodes, [static(2)])).command is None
    dynamic = [node(f"n{i}", "m5.xlarge", pods=busy(f"w{i}", 1)) for i in range(2)]
    assert plan(planner_input(dynamic, [pool()])).command is not None


def test_a_drifted_static_node_is_replaced_by_a_node_of_its_pool() -> None:
    # Its pods fit on no other node (there is none, and pods never open claims in a static pool): the
    # pool's own replacement is there for them.
    drifted = [node("old", nodepool="static", nodepool_hash="h1", pods=busy("web", 2))]
    inp = planner_input(drifted, [static(1)], nodepool_hashes={"static": "h2"})
    command = plan(inp).command
    assert command is not None and (command.method, command.node_names) == (DRIFT, ["old"])
    [claim] = command.replacements
    assert claim.nodepool == "static" and claim.pods == []
    assert len(claim.instance_types) > 1  # every type the pool's requirements allow
    assert validate(command, inp) is None
    # Drift keeps the pool's budgets.
    held = plan(
        planner_input(drifted, [static(1, budgets=[{"nodes": "0"}])], nodepool_hashes={"static": "h2"})
    )
    assert held.command is None and "budget" in held.skipped["old"]


def test_an_expired_static_node_is_replaced_by_a_node_of_its_pool() -> None:
    aged = [
        node("aged", nodepool="static", age=2 * DAY, pods=busy("web", 2)),
        node("young", nodepool="static", age=60),
    ]
    result = plan(planner_input(aged, [static(1, expire_after="24h")]))
    [command] = result.expirations
    assert (command.method, command.node_names) == (EXPIRATION, ["aged"])
    assert [c.nodepool for c in command.replacements] == ["static"]
    assert removed(result) == []  # the expiring node is the one the pool had too many


def test_validation_drops_a_scale_down_the_pool_no_longer_needs() -> None:
    nodes = [node("a", nodepool="static"), node("b", nodepool="static", pods=busy("w", 1))]
    [command] = plan(planner_input(nodes, [static(1)])).scale_down
    assert command.node_names == ["a"]
    assert validate(command, planner_input(nodes, [static(1)])) is None
    fewer = [node("a", nodepool="static")]
    assert "beyond its replicas" in (validate(command, planner_input(fewer, [static(1)])) or "")
    assert "no longer static" in (validate(command, planner_input(nodes, [pool("static")])) or "")


def test_replacements_never_take_a_static_pool_past_limits_nodes() -> None:
    drifted = [node("old", nodepool="static", nodepool_hash="h1"), node("other", nodepool="static")]
    limited = static(2, limits={"nodes": "2"})
    held = plan(planner_input(drifted, [limited], nodepool_hashes={"static": "h2"}))
    assert held.command is None and "limits.nodes" in held.skipped["old"]

    aged = [node("aged", nodepool="static", age=2 * DAY), node("young", nodepool="static", age=60)]
    [command] = plan(planner_input(aged, [static(2, expire_after="24h", limits={"nodes": "2"})])).expirations
    assert command.node_names == ["aged"] and command.replacements == []
