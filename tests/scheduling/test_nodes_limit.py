"""``spec.limits.nodes``: each claim counts one node whatever its type, and so does each existing node."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model.pod import Pod
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, SchedulingInput
from tests.scheduling.builders import nodepool, pod
from tests.scheduling.test_packing_limits import CATALOG, CPUS, MEMORIES, on_demand


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[Pod], NodePoolTemplate]:
    count = draw(st.integers(1, 60))
    pods = [
        pod(f"p{i}", cpu=draw(st.sampled_from(CPUS)), memory=draw(st.sampled_from(MEMORIES)))
        for i in range(count)
    ]
    pool = nodepool(requirements=on_demand(draw(st.sampled_from([None, 2]))))
    limits = {"nodes": str(draw(st.integers(0, 6)))}
    if draw(st.booleans()):
        limits["cpu"] = str(draw(st.integers(2, 64)))
    pool.limits = {
        "nodes": int(limits["nodes"]),
        **({"cpu": int(limits["cpu"]) * 1000} if "cpu" in limits else {}),
    }
    pool.usage = {"nodes": draw(st.integers(0, 3))}
    pool.packing = draw(st.sampled_from(["LowestCost", "FewerNodes"]))
    return pods, pool


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_new_claims_never_exceed_what_the_node_limit_leaves(
    workload: tuple[list[Pod], NodePoolTemplate],
) -> None:
    pods, pool = workload
    assert pool.limits is not None
    result = schedule(SchedulingInput(pods, [pool], CATALOG))
    assert len(result.new_claims) <= max(0, pool.limits["nodes"] - pool.usage["nodes"])
    placed = [p.key for c in result.new_claims for p in c.pods]
    assert sorted(placed + [e.pod.key for e in result.errors]) == sorted(p.key for p in pods)


def test_pods_beyond_the_node_limit_are_explained() -> None:
    pods = [pod(f"big{i}", cpu="3", memory="1Gi") for i in range(6)]
    pool = nodepool(requirements=on_demand(), limits={"nodes": "2", "cpu": "1000"})
    # the smallest types hold one such pod each: LowestCost re-packing must still stop at two nodes
    result = schedule(SchedulingInput(pods, [pool], [it for it in CATALOG if it.name.endswith(".xlarge")]))
    assert len(result.new_claims) == 2
    assert len(result.errors) == 4
    assert all("limit nodes=2 reached" in e.reason for e in result.errors)


def test_existing_nodes_use_up_the_node_limit() -> None:
    pool = nodepool(requirements=on_demand(), limits={"nodes": "3"}, usage={"nodes": "3"})
    result = schedule(SchedulingInput([pod("web", cpu="1", memory="1Gi")], [pool], CATALOG))
    assert result.new_claims == []
    (error,) = result.errors
    assert "limit nodes=3 reached" in error.reason
