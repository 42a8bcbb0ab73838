"""LowestCost packing (the default) within NodePool limits and minValues."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model import resources as res
from fleetwright.model.labels import ARCH, CAPACITY_TYPE, INSTANCE_FAMILY
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, itype, nodepool, pod
from tests.scheduling.test_repack import TYPES, cpu_and_memory_pods, optimum

pytestmark = pytest.mark.slow  # see tests/conftest.py: left out of `make quick`

# Six families over three shapes (CPU-, balanced, memory-rich), four sizes each, prices like EC2's.
SHAPES = {"c": (2, 4, 0.085), "m": (2, 8, 0.096), "r": (2, 16, 0.126)}
CATALOG = [
    itype(
        f"{shape}{generation}.{size}",
        str(cpus * factor),
        f"{memory * factor}Gi",
        pods=29 * factor,
        price=round(price * factor * (1.0 if generation == 5 else 0.97), 4),
        capacity_types=("on-demand",),
    )
    for shape, (cpus, memory, price) in SHAPES.items()
    for generation in (5, 6)
    for size, factor in (("large", 1), ("xlarge", 2), ("2xlarge", 4), ("4xlarge", 8))
]
CPUS = ["100m", "250m", "500m", "1", "1500m", "3"]
MEMORIES = ["100Mi", "512Mi", "1Gi", "2Gi", "4Gi", "10Gi"]


def on_demand(min_values: int | None = None) -> Requirements:
    reqs = [Requirement.create(CAPACITY_TYPE, "In", ["on-demand"])]
    if min_values:
        reqs.append(Requirement.create(INSTANCE_FAMILY, "Exists", [], min_values=min_values))
    return Requirements.of(reqs)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[Pod], NodePoolTemplate]:
    count = draw(st.integers(1, 80))
    pods = [
        pod(f"p{i}", cpu=draw(st.sampled_from(CPUS)), memory=draw(st.sampled_from(MEMORIES)))
        for i in range(count)
    ]
    pool = nodepool(requirements=on_demand(draw(st.sampled_from([None, 1, 2, 3, 4, 6]))))
    limits: dict[str, str] = {}
    if draw(st.booleans()):
        limits["cpu"] = str(draw(st.integers(2, 160)))
    if draw(st.booleans()):
        limits["memory"] = f"{draw(st.integers(4, 640))}Gi"
    if limits:
        pool.limits = res.parse_resources(limits)
        if draw(st.booleans()):
            pool.usage = res.parse_resources({"cpu": str(draw(st.integers(0, 16))), "memory": "8Gi"})
    return pods, pool


def plan(pods: list[Pod], pool: NodePoolTemplate) -> Results:
    daemon = pod("ds", cpu="150m", memory="200Mi")
    return schedule(SchedulingInput(pods, [pool], CATALOG, daemonsets=[daemon]))


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(workloads())
def test_limits_counted_at_each_claims_largest_candidate_are_never_exceeded(
    workload: tuple[list[Pod], NodePoolTemplate],
) -> None:
    pods, pool = workload
    result = plan(pods, pool)
    if pool.limits is None:
        return
    counted = res.add(*(res.maximum(it.capacity for it in c.instance_types) for c in result.new_claims))
    for name, limit in pool.limits.items():  # existing nodes may already use more than the limit
        assert counted.get(name, 0) <= max(0, limit - pool.usage.get(name, 0))


@PROPERTY_SETTINGS
@given(workloads())
def test_min_values_hold_on_every_claim(workload: tuple[list[Pod], NodePoolTemplate]) -> None:
    pods, pool = workload
    result = plan(pods, pool)
    wanted = next((r.min_values for r in pool.requirements if r.min_values), 0)
    for claim in result.new_claims:
        assert len({it.labels[INSTANCE_FAMILY] for it in claim.instance_types}) >= (wanted or 1)


@PROPERTY_SETTINGS
@given(workloads())
def test_every_pod_is_placed_once_or_explained_and_every_candidate_holds_its_claim(
    workload: tuple[list[Pod], NodePoolTemplate],
) -> None:
    pods, pool = workload
    result = plan(pods, pool)
    placed = [p.key for c in result.new_claims for p in c.pods]
    assert sorted(placed + [e.pod.key for e in result.errors]) == sorted(p.key for p in pods)
    assert all(e.reason for e in result.errors)
    for claim in result.new_claims:
        assert claim.instance_types
        assert all(res.fits(claim.requests, it.allocatable) for it in claim.instance_types)


def lowest_cost(limit_cpu: int | None = None) -> NodePoolTemplate:
    pool = nodepool(requirements=on_demand())
    if limit_cpu is not None:
        pool.limits = res.parse_resources({"cpu": str(limit_cpu)})
    return pool


def run(pods: list[Pod], pool: NodePoolTemplate) -> Results:
    return schedule(SchedulingInput(pods, [pool], TYPES))


def counted_cpu(result: Results) -> int:
    return sum(max(it.capacity["cpu"] for it in c.instance_types) for c in result.new_claims)


def test_a_limit_that_does_not_bind_leaves_the_cheapest_packing() -> None:
    # 16 CPU-heavy and 16 memory-heavy pods: the optimum pairs them on c.4xlarge and r.2xlarge nodes.
    unlimited = run(cpu_and_memory_pods(16), lowest_cost())
    limited = run(cpu_and_memory_pods(16), lowest_cost(limit_cpu=100))
    assert not limited.errors
    assert round(limited.hourly_cost, 6) == round(unlimited.hourly_cost, 6) == round(optimum(16, 16), 6)
    # each claim counts at its cheapest type (no m.8xlarge among its candidates): 4 c.4xlarge, 3 r.2xlarge
    assert counted_cpu(limited) == 76_000


def test_a_limit_that_binds_a_little_places_what_fits_at_the_cheapest_cost() -> None:
    # 76 CPUs are needed for every pod; with 60 all but a few pods still find room.
    result = run(cpu_and_memory_pods(16), lowest_cost(limit_cpu=60))
    assert counted_cpu(result) <= 60_000
    placed = [p.name for c in result.new_claims for p in c.pods]
    cpu_pods = sum(1 for name in placed if name.startswith("cpu"))
    assert len(placed) >= 28
    assert round(result.hourly_cost, 6) == round(optimum(cpu_pods, len(placed) - cpu_pods), 6)
    assert all("limit cpu=60 reached" in e.reason for e in result.errors)


def test_min_values_keep_enough_families_on_re_packed_claims() -> None:
    pods = [pod(f"p{i}", cpu="1", memory="2Gi") for i in range(40)]
    for wanted in (2, 3, 6):
        result = schedule(SchedulingInput(pods, [nodepool(requirements=on_demand(wanted))], CATALOG))
        assert not result.errors
        for claim in result.new_claims:
            assert len({it.labels[INSTANCE_FAMILY] for it in claim.instance_types}) >= wanted
    # only six families exist: minValues 6 allows nodes no larger than every family's largest holds
    six = schedule(SchedulingInput(pods, [nodepool(requirements=on_demand(6))], CATALOG))
    free = schedule(SchedulingInput(pods, [nodepool(requirements=on_demand())], CATALOG))
    assert six.hourly_cost >= free.hourly_cost


def test_pods_limits_left_out_join_only_claims_they_could_run_on() -> None:
    amd64 = Requirements.of([Requirement.create(ARCH, "In", ["amd64"])])
    pods = [pod(f"a{i}", cpu="100m") for i in range(3)] + [pod("arm", cpu="100m", selector={ARCH: "arm64"})]
    result = schedule(
        SchedulingInput(pods, [nodepool(requirements=amd64, limits={"cpu": "4"})], list(SMALL_CATALOG))
    )
    assert [e.pod.name for e in result.errors] == ["arm"]
    assert all(c.instance_types[0].labels[ARCH] == "amd64" for c in result.new_claims)
    assert "arm" not in {p.name for c in result.new_claims for p in c.pods}
