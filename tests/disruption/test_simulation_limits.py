"""NodePool limits in the disruption simulation: a leaving node gives back its place under limits.nodes."""

from __future__ import annotations

from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT, DisruptionSettings
from fleetwright.model.nodepool import NodePool
from tests.disruption.plan_builders import busy, node, planner_input, pool


def _limited(nodes: str) -> NodePool:
    base = pool()
    data = base.model_dump(by_alias=True, exclude_none=True)
    data["spec"]["limits"] = {"nodes": nodes}
    return NodePool.model_validate(data)


def test_drift_replacement_fits_under_limits_nodes_when_the_drifted_node_leaves() -> None:
    nodes = [
        node("a", "m5.xlarge", pods=busy("a", 14, cpu="250m"), nodepool_hash="old"),
        node("b", "m5.xlarge", pods=busy("b", 14, cpu="250m"), nodepool_hash="new"),
    ]
    command = plan(planner_input(nodes, [_limited("2")], nodepool_hashes={"default": "new"})).command
    assert command is not None and command.method == DRIFT
    assert command.node_names == ["a"]
    assert len(command.replacements) == 1


def test_limits_nodes_still_bounds_the_replacements() -> None:
    # Two drifted nodes' worth of pods cannot become two new nodes while only one node leaves.
    nodes = [
        node("a", "m5.xlarge", pods=busy("a", 14, cpu="250m"), nodepool_hash="old"),
        node("b", "m5.xlarge", pods=busy("b", 14, cpu="250m"), nodepool_hash="new"),
    ]
    # Merging both into one m5.2xlarge would save only a root volume ($0.002/h), a consolidation this
    # test is not about: a minimum saving keeps it out.
    settings = DisruptionSettings(min_saving_dollars=0.01)
    result = plan(
        planner_input(nodes, [_limited("1")], nodepool_hashes={"default": "new"}, settings=settings)
    )
    assert result.command is None
    assert "cannot be scheduled" in result.skipped["a"]
