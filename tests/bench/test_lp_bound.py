"""The LP lower bound of bench/lp_bound.py on instances small enough to solve by hand."""

from __future__ import annotations

import math
import random

import pytest
from lp_bound import (
    EXACT,
    FARLEY,
    NodeOption,
    PackingProblem,
    lp_bound,
    packing_problem,
    simple_bound,
    without_dominated,
)

from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, itype, pod

GI = 2**30
ON_DEMAND = ("on-demand",)


def problem(classes: list[tuple[int, int]], demand: list[int], options: list[NodeOption]) -> PackingProblem:
    """A problem over (cpu milli, memory GiB) classes, each pod taking one slot."""
    return PackingProblem(
        ("cpu", "memory", "pods"), [(cpu, mem * GI, 1) for cpu, mem in classes], demand, options
    )


def option(name: str, cpu: int, mem: int, price: float, pods: int = 110) -> NodeOption:
    return NodeOption(name, (cpu, mem * GI, pods), price)


def test_identical_pods_on_one_type_cost_their_fractional_share() -> None:
    # 4 pods of 1 CPU fit a 4-CPU node: 10 pods need 2.5 nodes' worth in the LP.
    bound = lp_bound(problem([(1000, 1)], [10], [option("m", 4000, 16, 1.0)]))
    assert bound.kind == EXACT
    assert bound.value == pytest.approx(2.5, rel=1e-6)
    assert bound.nodes == pytest.approx(2.5, rel=1e-6)
    assert bound.rounded() == (3, pytest.approx(3.0))


def test_pod_slots_limit_the_fractional_share() -> None:
    # Three pod slots per node: 7 tiny pods need 7/3 nodes.
    bound = lp_bound(problem([(10, 0)], [7], [option("tiny", 4000, 16, 0.3, pods=3)]))
    assert bound.value == pytest.approx(0.7, rel=1e-6)


def test_mixing_complementary_pods_on_a_bigger_type_beats_separate_small_nodes() -> None:
    # A CPU-heavy and a memory-heavy pod fill a 4 CPU / 4 GiB node exactly ($1); alone, each needs
    # its own small node ($0.7 + $0.45). Column generation must find the mixed pattern: 5 pairs, $5.
    options = [
        option("both", 4000, 4, 1.0),
        option("cpu", 3000, 1, 0.7),
        option("mem", 1000, 3, 0.45),
    ]
    bound = lp_bound(problem([(3000, 1), (1000, 3)], [5, 5], options))
    assert bound.kind == EXACT
    assert bound.value == pytest.approx(5.0, rel=1e-6)
    assert {options[p.option].name for p in bound.patterns} == {"both"}


def test_cheaper_small_nodes_win_when_mixing_does_not_pay() -> None:
    options = [
        option("both", 4000, 4, 1.3),
        option("cpu", 3000, 1, 0.7),
        option("mem", 1000, 3, 0.45),
    ]
    bound = lp_bound(problem([(3000, 1), (1000, 3)], [5, 5], options))
    assert bound.value == pytest.approx(5 * (0.7 + 0.45), rel=1e-6)


def test_a_stopped_run_reports_a_farley_bound_below_the_lp_optimum() -> None:
    options = [option("both", 4000, 4, 1.0), option("cpu", 3000, 1, 0.7), option("mem", 1000, 3, 0.45)]
    instance = problem([(3000, 1), (1000, 3)], [5, 5], options)
    exact = lp_bound(instance)
    stopped = lp_bound(instance, max_iterations=1)
    assert stopped.kind == FARLEY
    assert 0 < stopped.value <= exact.value + 1e-9
    assert (
        stopped.master_value >= exact.value - 1e-9
    )  # the unfinished master only has the homogeneous columns


def test_dominated_types_are_dropped_and_ties_keep_one() -> None:
    kept = without_dominated(
        [
            option("big-cheap", 4000, 16, 0.2),
            option("small-dear", 2000, 8, 0.3),
            option("small-cheap", 2000, 8, 0.1),
            option("twin", 4000, 16, 0.2),
        ]
    )
    assert sorted(o.name for o in kept) == ["big-cheap", "small-cheap"]


def test_daemonset_overhead_shrinks_every_node() -> None:
    types = [itype("m.xlarge", "4", "16Gi", price=1.0, capacity_types=ON_DEMAND)]
    pods = [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(12)]
    agent = pod("agent", cpu="2", memory="1Gi")
    assert lp_bound(packing_problem(pods, types)).value == pytest.approx(3.0, rel=1e-6)
    # Half of each node's CPU goes to the DaemonSet: twice as many nodes.
    assert lp_bound(packing_problem(pods, types, [agent])).value == pytest.approx(6.0, rel=1e-6)


def test_pods_that_fit_no_type_are_counted_and_left_out() -> None:
    types = [itype("m.xlarge", "4", "16Gi", price=1.0, capacity_types=ON_DEMAND)]
    instance = packing_problem([pod("ok", cpu="1"), pod("huge", cpu="64")], types)
    assert (instance.pods, instance.unfit) == (1, 1)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_bound_never_exceeds_a_feasible_packing(seed: int) -> None:
    rng = random.Random(seed)
    types = [t for t in SMALL_CATALOG if "nvidia.com/gpu" not in t.capacity]
    pods = [
        pod(f"p{i}", cpu=rng.choice(["250m", "500m", "1500m"]), memory=rng.choice(["256Mi", "1Gi", "3Gi"]))
        for i in range(rng.randint(5, 60))
    ]
    daemons = [pod("agent", cpu="100m", memory="200Mi")]
    template = NodePoolTemplate(name="default")
    result = schedule(SchedulingInput(pods, [template], types, [], daemons))
    assert not result.errors
    instance = packing_problem(pods, types, daemons, [template])
    bound = lp_bound(instance)
    assert bound.kind == EXACT
    assert simple_bound(instance) <= bound.value + 1e-9
    assert bound.value <= result.hourly_cost + 1e-9
    # Rounding the LP up gives a feasible packing: every class covered, every pattern fits its node.
    nodes, cost = bound.rounded()
    assert cost >= bound.value - 1e-9
    covered = [0] * len(instance.classes)
    for pattern in bound.patterns:
        room = bound.options[pattern.option].capacity
        used = [
            sum(n * c[d] for n, c in zip(pattern.counts, instance.classes, strict=True)) for d in range(3)
        ]
        assert all(u <= r for u, r in zip(used, room, strict=True))
        for k, count in enumerate(pattern.counts):
            covered[k] += count * math.ceil(pattern.x - 1e-9)
    assert all(c >= d for c, d in zip(covered, instance.demand, strict=True))
    assert nodes >= 1


def test_extended_resources_are_a_dimension() -> None:
    gpu = itype("g.xlarge", "8", "32Gi", price=1.0, capacity_types=ON_DEMAND, extra={"nvidia.com/gpu": "1"})
    plain = itype("m.2xlarge", "8", "32Gi", price=0.4, capacity_types=ON_DEMAND)
    pods = [pod(f"g{i}", cpu="1", extra={"nvidia.com/gpu": "1"}) for i in range(3)]
    instance = packing_problem(pods, [gpu, plain])
    assert "nvidia.com/gpu" in instance.dims
    # One GPU per node: three GPU nodes, however little CPU the pods use.
    assert lp_bound(instance).value == pytest.approx(3.0, rel=1e-6)
