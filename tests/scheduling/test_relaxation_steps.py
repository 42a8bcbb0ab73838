"""A pod's preferences are given up one named step at a time, in the order of Karpenter's preferences.go:
preferred pod affinity, preferred pod anti-affinity, preferred node affinity, ScheduleAnyway spreads,
and only then are PreferNoSchedule taints tolerated."""

from __future__ import annotations

from fleetwright.model.labels import HOSTNAME
from fleetwright.model.node import Node
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import Taint
from fleetwright.scheduling.preferences import (
    PREFERRED_NODE_AFFINITY,
    PREFERRED_POD_AFFINITY,
    PREFERRED_POD_ANTI_AFFINITY,
    SCHEDULE_ANYWAY,
    STRICTEST,
    TOLERATE_PREFER_NO_SCHEDULE,
    Preferences,
    attempts,
    ladder,
    tolerating_attempts,
)
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.topology import Topology
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, pod, req

AVOID = Taint("spare", "PreferNoSchedule", "true")


def labelled(
    name: str, app: str, node_name: str | None = None, preferred: list[tuple[int, Requirements]] | None = None
) -> Pod:
    p = pod(name, cpu="100m", memory="64Mi", node_name=node_name, preferred=preferred)
    p.labels = {"app": app}
    return p


def term(app: str, weight: int) -> PodAffinityTerm:
    return PodAffinityTerm(HOSTNAME, LabelSelector((("app", app),)), ("default",), None, weight)


def spread_anyway(app: str) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(HOSTNAME, 1, "ScheduleAnyway", LabelSelector((("app", app),)))


def on_x_label() -> Requirements:
    return req("side", "In", "x")


def nodes(taint_y: bool = False) -> list[Node]:
    """node-x runs one pod of app x, node-y one of app y; no NodePool, so one of them must take the pod."""
    return [
        node("node-x", "4", "16Gi", labels={"side": "x"}, pods=[labelled("x-0", "x", "node-x")]),
        node(
            "node-y",
            "4",
            "16Gi",
            labels={"side": "y"},
            pods=[labelled("y-0", "y", "node-y")],
            taints=(AVOID,) if taint_y else (),
        ),
    ]


def placed_on(p: Pod, taint_y: bool = False) -> str:
    result: Results = schedule(SchedulingInput([p], [], list(SMALL_CATALOG), nodes(taint_y)))
    assert result.errors == []
    [placement] = result.existing
    return placement.node


def everything_preferred() -> Pod:
    p = labelled("p", "p", preferred=[(10, req("side", "In", "y")), (90, on_x_label())])
    p.preferred_pod_affinity = (term("x", 10), term("y", 90))
    p.preferred_pod_anti_affinity = (term("x", 20), term("y", 80))
    p.topology_spread = (spread_anyway("x"), spread_anyway("y"))
    return p


def test_the_ladder_names_each_step_in_karpenters_order() -> None:
    p = everything_preferred()
    constraints = Topology({}).constraints_for(p)
    names = [name for name, _ in ladder(Preferences.of(p, constraints))]
    assert names == [
        STRICTEST,
        PREFERRED_POD_AFFINITY,
        PREFERRED_POD_AFFINITY,
        PREFERRED_POD_ANTI_AFFINITY,
        PREFERRED_POD_ANTI_AFFINITY,
        PREFERRED_NODE_AFFINITY,
        PREFERRED_NODE_AFFINITY,
        SCHEDULE_ANYWAY,
        SCHEDULE_ANYWAY,
    ]


def test_each_step_gives_up_the_heaviest_preference_of_its_kind() -> None:
    p = everything_preferred()
    constraints = Topology({}).constraints_for(p)
    rungs = [rung for _, rung in ladder(Preferences.of(p, constraints))]
    assert [c.weight for c in rungs[0].affinity] == [90, 10]
    assert [c.weight for c in rungs[1].affinity] == [10]
    assert [c.weight for c in rungs[3].anti] == [20]
    assert rungs[4].node_requirements() == on_x_label()  # weight 90, required while it lasts
    assert rungs[5].node_requirements() == req("side", "In", "y")
    assert rungs[6].node_requirements() == Requirements()
    assert len(rungs[7].anyway) == 1
    final = rungs[-1]
    assert (final.affinity, final.anti, final.node_terms, final.anyway) == ((), (), (), ())


def test_attempts_follow_the_ladder_and_tolerating_comes_last() -> None:
    p = everything_preferred()
    constraints = Topology({}).constraints_for(p)
    steps = [a.step for a in attempts(p, constraints, Requirements())]
    assert steps == [name for name, _ in ladder(Preferences.of(p, constraints))]
    tolerating = tolerating_attempts(p, constraints, Requirements(), {AVOID})
    assert tolerating is not None
    tolerations, last = tolerating
    assert [a.step for a in last] == [TOLERATE_PREFER_NO_SCHEDULE]
    assert any(t.tolerates(AVOID) for t in tolerations)
    # nothing to tolerate when no NodePool or node carries such a taint
    assert tolerating_attempts(p, constraints, Requirements(), set()) is None


def test_pod_affinity_is_given_up_before_pod_anti_affinity() -> None:
    p = labelled("p", "p")
    p.preferred_pod_affinity = (term("x", 50),)  # near x: node-x
    p.preferred_pod_anti_affinity = (term("x", 50),)  # away from x: node-y
    assert placed_on(p) == "node-y"


def test_pod_anti_affinity_is_given_up_before_node_affinity() -> None:
    p = labelled("p", "p", preferred=[(50, on_x_label())])  # node-x
    p.preferred_pod_anti_affinity = (term("x", 50),)  # node-y
    assert placed_on(p) == "node-x"


def test_node_affinity_is_given_up_before_a_schedule_anyway_spread() -> None:
    p = labelled("p", "x", preferred=[(50, on_x_label())])  # node-x
    p.topology_spread = (spread_anyway("x"),)  # node-x already holds one of app x: node-y
    assert placed_on(p) == "node-y"


def test_a_schedule_anyway_spread_is_given_up_before_prefer_no_schedule_is_tolerated() -> None:
    p = labelled("p", "x")
    p.topology_spread = (spread_anyway("x"),)  # node-y, but node-y carries a PreferNoSchedule taint
    assert placed_on(p, taint_y=True) == "node-x"
