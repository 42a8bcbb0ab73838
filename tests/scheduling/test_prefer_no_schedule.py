"""PreferNoSchedule taints are a preference: used only when nothing else can run the pod (as in Karpenter)."""

from __future__ import annotations

from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.taints import Taint, Toleration
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, nodepool, pod, req

AVOID = Taint("spare", "PreferNoSchedule", "true")


def run(pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node] | None = None) -> Results:
    return schedule(SchedulingInput(pods, pools, list(SMALL_CATALOG), nodes=nodes or []))


def pools_of(result: Results) -> list[str]:
    return [c.nodepool for c in result.new_claims]


def test_a_nodepool_with_a_prefer_no_schedule_taint_is_not_used_while_another_matches() -> None:
    # "a-spare" comes first by name, which orders NodePools of equal weight
    for spare_first in (True, False):
        spare = nodepool("a-spare", taints=(AVOID,))
        default = nodepool("default")
        result = run([pod("a", cpu="1")], [spare, default] if spare_first else [default, spare])
        assert pools_of(result) == ["default"]


def test_the_taint_outweighs_nodepool_weight() -> None:
    # Karpenter tries every NodePool without tolerating PreferNoSchedule before any with it
    result = run([pod("a", cpu="1")], [nodepool("spare", taints=(AVOID,), weight=100), nodepool("default")])
    assert pools_of(result) == ["default"]


def test_the_tainted_nodepool_is_used_when_it_is_the_only_one() -> None:
    result = run([pod(f"p{i}", cpu="1") for i in range(3)], [nodepool("spare", taints=(AVOID,))])
    assert not result.errors
    assert set(pools_of(result)) == {"spare"}
    assert all(claim.taints == [AVOID] for claim in result.new_claims)


def test_the_tainted_nodepool_takes_what_the_others_cannot() -> None:
    capped = nodepool("default", limits={"cpu": "4"})
    spare = nodepool("spare", taints=(AVOID,))
    result = run([pod(f"p{i}", cpu="3") for i in range(2)], [capped, spare])
    assert not result.errors
    assert sorted(pools_of(result)) == ["default", "spare"]


def test_preferences_are_relaxed_before_the_taint_is_tolerated() -> None:
    # only the tainted NodePool offers the preferred zone: the preference gives way first
    zones_ab = nodepool("default", requirements=req(ZONE, "In", "test-zone-a", "test-zone-b"))
    spare = nodepool("spare", taints=(AVOID,))
    wants_c = pod("a", cpu="1", preferred=[(100, req(ZONE, "In", "test-zone-c"))])
    result = run([wants_c], [zones_ab, spare])
    assert pools_of(result) == ["default"]
    assert "test-zone-c" not in result.new_claims[0].zones


def test_a_pod_tolerating_the_taint_follows_nodepool_weight() -> None:
    tolerant = pod("a", cpu="1", tolerations=(Toleration("spare", "Exists"),))
    result = run([tolerant], [nodepool("spare", taints=(AVOID,), weight=100), nodepool("default")])
    assert pools_of(result) == ["spare"]


def test_a_pod_that_fits_nowhere_reports_every_nodepool() -> None:
    result = run([pod("huge", cpu="64")], [nodepool("spare", taints=(AVOID,)), nodepool("default")])
    assert [e.reason for e in result.errors] == [
        "incompatible with every NodePool: "
        "NodePool default: no instance type has cpu=64 within the NodePool's requirements; "
        "NodePool spare: no instance type has cpu=64 within the NodePool's requirements"
    ]


def test_an_existing_node_with_the_taint_is_used_after_untainted_ones() -> None:
    # nodes are tried by name: the tainted one would come first
    tainted = node("a-spare", "4", "16Gi", labels={HOSTNAME: "a-spare"}, taints=(AVOID,))
    plain = node("b-plain", "2", "8Gi", labels={HOSTNAME: "b-plain"})
    result = run([pod(f"p{i}", cpu="1") for i in range(3)], [], nodes=[tainted, plain])
    placed = {e.node: sorted(p.name for p in e.pods) for e in result.existing}
    assert placed == {"b-plain": ["p0", "p1"], "a-spare": ["p2"]}
