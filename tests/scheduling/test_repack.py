"""LowestCost re-packing: cheaper nodes than first fit, and always a valid packing."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model.labels import CAPACITY_TYPE, HOSTNAME
from fleetwright.model.pod import LabelSelector, PodAffinityTerm
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.packing import Option, node_total, pack, undominated
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import itype, nodepool, pod, req

pytestmark = pytest.mark.slow  # see tests/conftest.py: left out of `make quick`

# A CPU-rich and a memory-rich type at the same price, and a large one that is dear per resource.
TYPES = [
    itype("c.4xlarge", "16", "16Gi", price=0.16, capacity_types=("on-demand",)),
    itype("r.2xlarge", "4", "32Gi", price=0.16, capacity_types=("on-demand",)),
    itype("m.8xlarge", "32", "128Gi", price=1.0, capacity_types=("on-demand",)),
]
CPU_POD = (3, 1)  # cores, GiB
MEMORY_POD = (1, 7)


def lowest_cost_pool() -> NodePoolTemplate:
    pool = nodepool(requirements=req(CAPACITY_TYPE, "In", "on-demand"))
    pool.packing = "LowestCost"
    return pool


def cpu_and_memory_pods(count: int) -> list:  # type: ignore[type-arg]
    return [pod(f"cpu-{i}", cpu=str(CPU_POD[0]), memory=f"{CPU_POD[1]}Gi") for i in range(count)] + [
        pod(f"mem-{i}", cpu=str(MEMORY_POD[0]), memory=f"{MEMORY_POD[1]}Gi") for i in range(count)
    ]


@cache
def optimum(cpu_pods: int, memory_pods: int) -> float:
    """The cheapest packing of the two pod shapes onto TYPES, by exhaustive search over node contents."""
    if cpu_pods == 0 and memory_pods == 0:
        return 0.0
    best = float("inf")
    for it in TYPES:
        cores = it.allocatable["cpu"] // 1000
        gib = it.allocatable["memory"] // 2**30
        price = it.offerings[0].price
        for a in range(cpu_pods + 1):
            for b in range(memory_pods + 1):
                fits = (
                    a * CPU_POD[0] + b * MEMORY_POD[0] <= cores and a * CPU_POD[1] + b * MEMORY_POD[1] <= gib
                )
                if (a or b) and fits:
                    best = min(best, price + optimum(cpu_pods - a, memory_pods - b))
    return best


def run(pods: list, pool: NodePoolTemplate) -> Results:  # type: ignore[type-arg]
    return schedule(SchedulingInput(pods, [pool], TYPES))


def test_lowest_cost_mixes_cpu_heavy_and_memory_heavy_pods_to_the_optimum() -> None:
    # First fit, largest first, fills c.4xlarge nodes until their memory runs out and strands CPU
    # ($1.28 here); the re-packing pairs the shapes on both types as the optimum does.
    result = run(cpu_and_memory_pods(16), lowest_cost_pool())
    assert not result.errors
    assert round(result.hourly_cost, 6) == round(optimum(16, 16), 6)
    assert {c.instance_types[0].name for c in result.new_claims} == {"c.4xlarge", "r.2xlarge"}
    assert sorted(p.name for c in result.new_claims for p in c.pods) == sorted(
        p.name for p in cpu_and_memory_pods(16)
    )


def test_a_large_batch_of_two_shapes_is_packed_at_the_optimum() -> None:
    # Optimal: c.4xlarge holding 5 CPU pods and 1 memory pod, r.2xlarge holding 4 memory pods
    # (pricing each CPU pod 3/20 of a node and each memory pod 1/4 proves no packing needs fewer
    # than 2N/5 nodes). Patterns are repeated across hundreds of nodes while the shapes run out
    # at different times; each must still be filled the cheapest way.
    count = 700
    result = run(cpu_and_memory_pods(count), lowest_cost_pool())
    assert not result.errors
    assert len(result.new_claims) == 2 * count // 5
    assert round(result.hourly_cost, 6) == round(0.16 * 2 * count / 5, 6)
    assert sum(len(c.pods) for c in result.new_claims) == 2 * count


def test_fewer_nodes_keeps_first_fit_with_fewer_larger_nodes() -> None:
    lowest = run(cpu_and_memory_pods(16), lowest_cost_pool())
    fewer_pool = lowest_cost_pool()
    fewer_pool.packing = "FewerNodes"
    fewer = run(cpu_and_memory_pods(16), fewer_pool)
    assert len(fewer.new_claims) < len(lowest.new_claims)
    assert fewer.hourly_cost > lowest.hourly_cost


def test_pods_with_hostname_anti_affinity_stay_one_per_node() -> None:
    selector = LabelSelector((("app", "db"),))
    guarded = cpu_and_memory_pods(4)
    for p in guarded[:4]:
        p.labels = {"app": "db"}
        p.pod_anti_affinity = (PodAffinityTerm(HOSTNAME, selector, ("default",)),)
    result = run(guarded + cpu_and_memory_pods(12)[4:12], lowest_cost_pool())
    assert not result.errors
    per_node = [sum(p.labels.get("app") == "db" for p in c.pods) for c in result.new_claims]
    assert max(per_node) == 1 and sum(per_node) == 4


@st.composite
def packing_problems(draw: st.DrawFn) -> tuple[list[vec.Vector], list[int], list[Option]]:
    options = [
        Option(
            (draw(st.integers(1000, 64000)), draw(st.integers(1, 256)) * 2**30, draw(st.integers(4, 110))),
            draw(st.floats(0.01, 5.0)),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]
    classes = []
    for _ in range(draw(st.integers(1, 8))):
        host = draw(st.sampled_from(options)).capacity
        need = (draw(st.integers(0, host[0])), draw(st.integers(0, host[1] // 2**20)) * 2**20, 1)
        if need not in classes:
            classes.append(need)
    most = draw(st.sampled_from((60, 3000)))  # large demands repeat patterns over many nodes
    demand = [draw(st.integers(1, most)) for _ in classes]
    return classes, demand, undominated(options)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packing_problems())
def test_pack_places_every_pod_once_on_nodes_that_hold_them(
    problem: tuple[list[vec.Vector], list[int], list[Option]],
) -> None:
    classes, demand, options = problem
    nodes = pack(classes, demand, options)
    placed = [0] * len(classes)
    for option, counts in nodes:
        assert any(counts), "no empty node"
        assert vec.fits(node_total(counts, classes), options[option].capacity)
        placed = [p + n for p, n in zip(placed, counts, strict=True)]
    assert placed == demand
    assert pack(classes, demand, options) == nodes, "deterministic"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 4), st.sampled_from([0.5, 1.0, 1.5, 2.0])), max_size=30
    )
)
def test_undominated_keeps_what_comparing_every_option_keeps(rows: list[tuple[int, int, float]]) -> None:
    """Options sharing their room (many instance types do) are compared once; the result is the same as
    comparing each option with every option kept before it."""
    options = [Option((cpu * 1000, mem * 1024, 10), price, i) for i, (cpu, mem, price) in enumerate(rows)]
    ordered = sorted(options, key=lambda o: (o.price, tuple(-c for c in o.capacity)))
    expected: list[Option] = []
    for option in ordered:
        if not any(vec.fits(option.capacity, k.capacity) for k in expected):
            expected.append(option)
    assert undominated(options) == expected
