"""Emptiness: which nodes may be removed for being empty, and how many the budgets let go at once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleetwright.disruption.emptiness import EmptyCandidate, empty_candidates, select_within_budgets
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod

NOW = 1_000_000.0
NOON = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)


def pool(
    name: str = "default",
    *,
    policy: str = "WhenEmpty",
    after: str = "30s",
    budgets: list[dict[str, Any]] | None = None,
) -> NodePool:
    disruption: dict[str, Any] = {"consolidationPolicy": policy, "consolidateAfter": after}
    if budgets is not None:
        disruption["budgets"] = budgets
    return NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [],
                    }
                },
                "disruption": disruption,
            },
        }
    )


def pod(
    name: str,
    *,
    owner: tuple[str, str] | None = ("ReplicaSet", "web-1"),
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
) -> Pod:
    return Pod(
        namespace="default",
        name=name,
        requests={},
        owner=owner,
        annotations=annotations or {},
        phase=phase,
    )


def node(name: str, nodepool: str | None = "default", pods: list[Pod] | None = None) -> Node:
    labels = {"karpenter.sh/nodepool": nodepool} if nodepool else {}
    return Node(name=name, labels=labels, allocatable={}, pods=pods or [])


def names(candidates: list[EmptyCandidate]) -> list[str]:
    return [candidate.node for candidate in candidates]


POOLS = {"default": pool()}
LONG_AGO = {"n1": NOW - 3600}


def test_empty_node_past_consolidate_after_is_a_candidate() -> None:
    found = empty_candidates([node("n1")], POOLS, LONG_AGO, NOW)
    assert found == [EmptyCandidate(node="n1", nodepool="default", empty_for=3600)]


def test_both_consolidation_policies_remove_empty_nodes() -> None:
    pools = {"default": pool(policy="WhenEmptyOrUnderutilized")}
    assert names(empty_candidates([node("n1")], pools, LONG_AGO, NOW)) == ["n1"]


def test_node_outside_known_nodepools_is_left_alone() -> None:
    nodes = [node("n1", nodepool=None), node("n2", nodepool="other")]
    assert empty_candidates(nodes, POOLS, {"n1": 0.0, "n2": 0.0}, NOW) == []


def test_consolidate_after_never_disables_emptiness() -> None:
    pools = {"default": pool(after="Never")}
    assert empty_candidates([node("n1")], pools, LONG_AGO, NOW) == []


def test_node_must_stay_empty_for_consolidate_after() -> None:
    pools = {"default": pool(after="10m")}
    assert empty_candidates([node("n1")], pools, {"n1": NOW - 599}, NOW) == []
    assert names(empty_candidates([node("n1")], pools, {"n1": NOW - 600}, NOW)) == ["n1"]


def test_zero_consolidate_after_removes_at_once() -> None:
    pools = {"default": pool(after="0s")}
    assert names(empty_candidates([node("n1")], pools, {"n1": NOW}, NOW)) == ["n1"]


def test_node_not_known_to_be_empty_is_not_a_candidate() -> None:
    assert empty_candidates([node("n1")], POOLS, {}, NOW) == []


def test_node_running_a_workload_pod_is_not_empty() -> None:
    busy = node("n1", pods=[pod("web")])
    assert empty_candidates([busy], POOLS, LONG_AGO, NOW) == []


def test_unowned_pod_keeps_the_node() -> None:
    busy = node("n1", pods=[pod("bare", owner=None)])
    assert empty_candidates([busy], POOLS, LONG_AGO, NOW) == []


def test_daemonset_and_mirror_pods_do_not_count() -> None:
    pods = [
        pod("kube-proxy", owner=("DaemonSet", "kube-proxy")),
        pod("etcd", owner=("Node", "n1"), annotations={"kubernetes.io/config.mirror": "abc"}),
    ]
    assert names(empty_candidates([node("n1", pods=pods)], POOLS, LONG_AGO, NOW)) == ["n1"]


def test_finished_pods_do_not_count() -> None:
    pods = [pod("job-a", phase="Succeeded"), pod("job-b", phase="Failed")]
    assert names(empty_candidates([node("n1", pods=pods)], POOLS, LONG_AGO, NOW)) == ["n1"]


def test_uninitialized_node_is_not_a_candidate() -> None:
    nodes = [node("n1"), node("n2")]
    found = empty_candidates(nodes, POOLS, {"n1": 0.0, "n2": 0.0}, NOW, initialized=lambda n: n.name != "n1")
    assert names(found) == ["n2"]


def test_node_still_in_flight_is_not_a_candidate() -> None:
    launching = node("n1")
    launching.in_flight = True
    assert empty_candidates([launching], POOLS, LONG_AGO, NOW) == []


def test_terminating_node_is_not_a_candidate() -> None:
    assert empty_candidates([node("n1")], POOLS, LONG_AGO, NOW, terminating=frozenset({"n1"})) == []


def test_do_not_disrupt_node_is_left_alone() -> None:
    annotations = {
        "n1": {"karpenter.sh/do-not-disrupt": "true"},
        "n2": {"karpenter.sh/do-not-disrupt": "false"},
    }
    found = empty_candidates(
        [node("n1"), node("n2")], POOLS, {"n1": 0.0, "n2": 0.0}, NOW, node_annotations=annotations
    )
    assert names(found) == ["n2"]


def test_do_not_disrupt_pod_protects_its_node() -> None:
    guarded = pod("agent", owner=("DaemonSet", "agent"), annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert empty_candidates([node("n1", pods=[guarded])], POOLS, LONG_AGO, NOW) == []


def test_finished_do_not_disrupt_pod_does_not_protect() -> None:
    done = pod("job", annotations={"karpenter.sh/do-not-disrupt": "true"}, phase="Succeeded")
    assert names(empty_candidates([node("n1", pods=[done])], POOLS, LONG_AGO, NOW)) == ["n1"]


def test_each_node_uses_its_own_pools_consolidate_after() -> None:
    pools = {"fast": pool("fast", after="1m"), "slow": pool("slow", after="1h")}
    nodes = [node("a", "fast"), node("b", "slow")]
    found = empty_candidates(nodes, pools, {"a": NOW - 120, "b": NOW - 120}, NOW)
    assert [(c.node, c.nodepool) for c in found] == [("a", "fast")]


def candidate(name: str, empty_for: float, nodepool: str = "default") -> EmptyCandidate:
    return EmptyCandidate(node=name, nodepool=nodepool, empty_for=empty_for)


def test_budget_cuts_candidates_keeping_the_longest_empty() -> None:
    pools = {"default": pool(budgets=[{"nodes": "2"}])}
    candidates = [candidate("a", 60), candidate("b", 600), candidate("c", 300)]
    kept = select_within_budgets(candidates, pools, {"default": 10}, {}, NOON)
    assert names(kept) == ["b", "c"]


def test_default_budget_allows_ten_percent_rounded_up() -> None:
    pools = {"default": pool()}
    candidates = [candidate(f"n{i}", float(i)) for i in range(5)]
    assert names(select_within_budgets(candidates, pools, {"default": 11}, {}, NOON)) == ["n4", "n3"]


def test_nodes_already_disrupting_reduce_the_selection() -> None:
    pools = {"default": pool(budgets=[{"nodes": "2"}])}
    candidates = [candidate("a", 60), candidate("b", 600)]
    assert names(select_within_budgets(candidates, pools, {"default": 10}, {"default": 1}, NOON)) == ["b"]
    assert select_within_budgets(candidates, pools, {"default": 10}, {"default": 2}, NOON) == []


def test_budgets_are_per_nodepool() -> None:
    pools = {"a": pool("a", budgets=[{"nodes": "1"}]), "b": pool("b", budgets=[{"nodes": "0"}])}
    candidates = [candidate("a1", 10, "a"), candidate("a2", 20, "a"), candidate("b1", 30, "b")]
    kept = select_within_budgets(candidates, pools, {"a": 5, "b": 5}, {}, NOON)
    assert names(kept) == ["a2"]


def test_budget_for_other_reasons_does_not_limit_emptiness() -> None:
    pools = {"default": pool(budgets=[{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}])}
    candidates = [candidate("a", 60), candidate("b", 600)]
    assert names(select_within_budgets(candidates, pools, {"default": 2}, {}, NOON)) == ["b", "a"]


def test_scheduled_freeze_blocks_emptiness_during_its_window() -> None:
    pools = {
        "default": pool(budgets=[{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}, {"nodes": "5"}])
    }
    candidates = [candidate("a", 60)]
    assert select_within_budgets(candidates, pools, {"default": 5}, {}, NOON) == []
    assert names(select_within_budgets(candidates, pools, {"default": 5}, {}, NOON.replace(hour=18))) == ["a"]
