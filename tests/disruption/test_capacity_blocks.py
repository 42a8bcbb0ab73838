"""Capacity Blocks about to end: their nodes are replaced and drained before EC2 reclaims the instances."""

from __future__ import annotations

from typing import Any

from fleetwright.disruption.inputs import InputReader
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import EXPIRATION, EXPIRED
from fleetwright.model import labels as wk
from tests.disruption.plan_builders import NOW, busy, node, planner_input, pool

BLOCK = "cr-0b1c2d3e4f5a6b7c8"
BLOCK_LABELS = {
    wk.CAPACITY_TYPE: "reserved",
    wk.CAPACITY_RESERVATION_ID: BLOCK,
    wk.CAPACITY_RESERVATION_TYPE: "capacity-block",
    wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
}


def _pool() -> Any:
    return pool(capacity_types=["reserved", "on-demand"], budgets=[{"nodes": "0"}])


def test_a_node_in_an_expiring_capacity_block_is_replaced_and_drained_despite_a_zero_budget() -> None:
    nodes = [
        node("gpu-block", "m5.xlarge", pods=busy("train", 3, cpu="1"), labels=BLOCK_LABELS),
        node("ordinary", "m5.xlarge", pods=busy("web", 3, cpu="1")),
    ]
    result = plan(planner_input(nodes, [_pool()], expiring_reservations={BLOCK: NOW + 25 * 60}))
    [command] = result.expirations
    assert (command.method, command.reason, command.node_names) == (EXPIRATION, EXPIRED, ["gpu-block"])
    assert sorted(p.key for c in command.replacements for p in c.pods) == sorted(
        p.key for p in nodes[0].node.pods
    )
    assert f"capacity block {BLOCK} ends in 25m" in command.explanation


def test_a_capacity_block_not_yet_in_its_window_leaves_the_node_alone() -> None:
    nodes = [node("gpu-block", "m5.xlarge", pods=busy("train", 3, cpu="1"), labels=BLOCK_LABELS)]
    result = plan(planner_input(nodes, [_pool()]))
    assert result.expirations == []


class _Reader(InputReader):
    def __init__(self, answer: dict[str, float] | Exception) -> None:
        self.asked: list[list[str]] = []

        def reservations(ids: Any) -> dict[str, float]:
            self.asked.append(list(ids))
            if isinstance(answer, Exception):
                raise answer
            return answer

        self.reservations = reservations


def test_the_reader_asks_only_about_capacity_blocks_of_our_nodes_and_survives_errors() -> None:
    states = [
        node("gpu-block", "m5.xlarge", labels=BLOCK_LABELS),
        node(
            "odcr",
            "m5.xlarge",
            labels={
                wk.CAPACITY_RESERVATION_ID: "cr-0aaaaaaaaaaaaaaaa",
                wk.CAPACITY_RESERVATION_TYPE: "default",
            },
        ),
        node("plain", "m5.large"),
    ]
    reader = _Reader({BLOCK: NOW + 60})
    problems: list[str] = []
    assert reader._expiring(states, problems) == {BLOCK: NOW + 60}
    assert reader.asked == [[BLOCK]]
    failing = _Reader(RuntimeError("throttled"))
    assert failing._expiring(states, problems) == {}
    assert problems and BLOCK in problems[0]
    quiet = _Reader({})
    assert quiet._expiring([node("plain", "m5.large")], []) == {}
    assert quiet.asked == []
