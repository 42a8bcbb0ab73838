"""Preferred pod (anti-)affinity is given up heaviest term first, as Karpenter's preferences.go does."""

from __future__ import annotations

from fleetwright.model.labels import HOSTNAME
from fleetwright.model.node import Node
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, pod


def labelled(name: str, app: str, node_name: str | None = None) -> Pod:
    p = pod(name, cpu="100m", memory="64Mi", node_name=node_name)
    p.labels = {"app": app}
    return p


def near(app: str, weight: int) -> PodAffinityTerm:
    return PodAffinityTerm(HOSTNAME, LabelSelector((("app", app),)), ("default",), None, weight)


# Two nodes, each running one workload; no NodePool, so the pending pod must pick one of them and
# cannot satisfy two hostname preferences pointing at different nodes.
NODES: list[Node] = [
    node("node-x", "4", "16Gi", pods=[labelled("x-0", "x", "node-x")]),
    node("node-y", "4", "16Gi", pods=[labelled("y-0", "y", "node-y")]),
]


def run(p: Pod) -> Results:
    return schedule(SchedulingInput([p], [], list(SMALL_CATALOG), list(NODES)))


def placed_on(result: Results) -> str:
    assert result.errors == []
    [placement] = result.existing
    return placement.node


def test_preferred_affinity_drops_the_heaviest_term_first() -> None:
    p = labelled("p", "p")
    p.preferred_pod_affinity = (near("x", 90), near("y", 10))
    assert placed_on(run(p)) == "node-y"
    # listed the other way round, the same weights give the same answer
    q = labelled("q", "p")
    q.preferred_pod_affinity = (near("y", 10), near("x", 90))
    assert placed_on(run(q)) == "node-y"


def test_preferred_anti_affinity_drops_the_heaviest_term_first() -> None:
    p = labelled("p", "p")
    p.preferred_pod_anti_affinity = (near("x", 90), near("y", 10))
    # both nodes break a preference: keeping the lighter one (away from y) leaves node-x
    assert placed_on(run(p)) == "node-x"


def test_a_single_preference_that_can_hold_is_kept() -> None:
    p = labelled("p", "p")
    p.preferred_pod_affinity = (near("y", 10),)
    assert placed_on(run(p)) == "node-y"
