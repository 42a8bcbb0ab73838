"""``consolidationPolicy: Balanced``: a consolidation goes only when it saves enough of its NodePool's cost
for the share of the NodePool's disruption it causes (score ≥ 0.5)."""

from __future__ import annotations

from fleetwright.disruption.balanced import disruption_cost, eviction_cost
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import SINGLE_NODE, DisruptionSettings, Plan
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from tests.disruption.plan_builders import busy, node, planner_input, pod, pool

KEEP = {DO_NOT_DISRUPT_ANNOTATION: "true"}
SETTINGS = DisruptionSettings(min_node_age_seconds=0)


def _plan(policy: str, candidate_type: str, candidate_pods: int) -> Plan:
    """Three roomy m5.2xlarge nodes that stay (do-not-disrupt), and one candidate whose pods fit on them."""
    nodes = [node(f"big-{i}", "m5.2xlarge", pods=busy(f"b{i}", 1), annotations=KEEP) for i in range(3)]
    nodes.append(node("cand", candidate_type, pods=busy("c", candidate_pods, cpu="100m", memory="64Mi")))
    return plan(planner_input(nodes, [pool(policy=policy)], settings=SETTINGS))


def test_a_cheap_node_with_many_pods_is_not_worth_its_disruption_under_balanced() -> None:
    # Deleting the c5.large saves 7.0% of the pool's whole bill ($0.085 + $0.0022 of root volume, of
    # 3 × ($0.384 + $0.0022) + that) for 9/15 = 60% of its disruption: score 0.070 / 0.6 = 0.12.
    result = _plan("Balanced", "c5.large", 8)
    assert result.command is None
    why = result.unconsolidatable["cand"]
    assert why.startswith(
        "consolidationPolicy Balanced: NodePool default scores 0.12 (saves 7.0% of its cost"
    )
    assert "needs 0.50" in why
    # The same node goes under WhenEmptyOrUnderutilized.
    other = _plan("WhenEmptyOrUnderutilized", "c5.large", 8)
    assert other.command is not None and other.command.node_names == ["cand"]


def test_a_move_saving_its_share_of_cost_for_its_share_of_disruption_goes() -> None:
    # Four equal nodes, each with one pod: deleting one saves 25% of the cost for 25% of the disruption.
    result = _plan("Balanced", "m5.2xlarge", 1)
    command = result.command
    assert command is not None and command.method == SINGLE_NODE and command.node_names == ["cand"]
    assert "NodePool default scores 1.00" in command.explanation


def test_eviction_cost_follows_deletion_cost_and_priority() -> None:
    plain = pod("p")
    assert eviction_cost(plain) == 1.0
    dear = pod("d", annotations={"controller.kubernetes.io/pod-deletion-cost": str(2**27)})
    assert eviction_cost(dear) == 2.0
    urgent = pod("u")
    urgent.priority = 2_000_000_000
    assert eviction_cost(urgent) == 10.0  # clamped
    cheap = pod("c")
    cheap.priority = -2_000_000_000
    assert eviction_cost(cheap) == -10.0
    daemon = pod("agent", daemonset=True)
    state = node("n", pods=[plain, dear, cheap, daemon])
    assert disruption_cost(state) == 1.0 + 1.0 + 2.0 + 0.0  # negative costs count 0, DaemonSet pods none
