"""The pieces of NodePool status: exact quantities, per-pool sums and condition transitions."""

from __future__ import annotations

from fleetwright.provisioning.nodepool_status import conditions, nodepool_resources, quantity


def test_quantities_are_exact() -> None:
    assert quantity("cpu", 4000) == "4"
    assert quantity("cpu", 3500) == "3500m"
    assert quantity("memory", 16 * 2**30) == "16Gi"
    assert quantity("memory", 7910 * 2**20) == "7910Mi"
    assert quantity("memory", 1000) == "1000"
    assert quantity("pods", 58) == "58"


def test_resources_sum_the_nodes_of_each_pool() -> None:
    def node(pool: str | None, cpu: str, memory: str) -> dict[str, object]:
        labels = {"karpenter.sh/nodepool": pool} if pool else {}
        return {"metadata": {"labels": labels}, "status": {"capacity": {"cpu": cpu, "memory": memory}}}

    totals = nodepool_resources(
        [node("a", "2", "8Gi"), node("a", "500m", "512Mi"), node("b", "4", "16Gi"), node(None, "8", "1Gi")]
    )

    assert totals == {
        "a": {"cpu": "2500m", "memory": "8704Mi", "nodes": "2"},
        "b": {"cpu": "4", "memory": "16Gi", "nodes": "1"},
    }


def test_conditions_keep_their_transition_time_while_their_status_stays() -> None:
    first = conditions(
        {"ValidationSucceeded": ("True", "ValidationSucceeded", "")}, [], 1, "2026-01-01T00:00:00Z"
    )
    same = conditions(
        {"ValidationSucceeded": ("True", "ValidationSucceeded", "")}, first, 2, "2026-01-02T00:00:00Z"
    )
    failed = conditions(
        {"ValidationSucceeded": ("False", "ValidationFailed", "spec.x: bad")}, same, 3, "2026-01-03T00:00:00Z"
    )

    def without_generation(items: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in c.items() if k != "observedGeneration"} for c in items]

    assert without_generation(same) == without_generation(first)  # nothing moved but the generation
    assert {c["observedGeneration"] for c in same} == {2}
    ready = {c["type"]: c for c in failed}["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "UnhealthyDependents",
        "ValidationSucceeded=False",
    )
    assert {c["type"]: c["lastTransitionTime"] for c in failed} == {
        "Ready": "2026-01-03T00:00:00Z",
        "ValidationSucceeded": "2026-01-03T00:00:00Z",
    }
    assert {c["type"]: c["lastTransitionTime"] for c in same} == {
        "Ready": "2026-01-01T00:00:00Z",
        "ValidationSucceeded": "2026-01-01T00:00:00Z",
    }
