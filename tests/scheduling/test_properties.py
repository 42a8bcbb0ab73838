"""Invariants of the scheduler over random inputs (hypothesis)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model import resources as res
from fleetwright.model.labels import ARCH, CAPACITY_TYPE, ZONE
from fleetwright.model.node import Node
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import Taint, Toleration, tolerates_all
from fleetwright.scheduling.compat import allowed_offerings
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, ZONES, node, nodepool, pod

pytestmark = pytest.mark.slow  # see tests/conftest.py: left out of `make quick`

CPUS = ["100m", "250m", "500m", "1", "1500m", "3"]
MEMS = ["100Mi", "512Mi", "1Gi", "2Gi", "4Gi", "10Gi"]
TAINT = Taint("dedicated", "NoSchedule", "batch")


@st.composite
def pods_strategy(draw: st.DrawFn) -> list[Pod]:
    count = draw(st.integers(1, 40))
    pods = []
    for i in range(count):
        selector: dict[str, str] = {}
        if draw(st.booleans()):
            selector[ZONE] = draw(st.sampled_from(ZONES))
        if draw(st.integers(0, 4)) == 0:
            selector[ARCH] = draw(st.sampled_from(["amd64", "arm64"]))
        tolerations = (Toleration("dedicated", "Exists"),) if draw(st.booleans()) else ()
        host_ports = (8080,) if draw(st.integers(0, 6)) == 0 else ()
        pods.append(
            pod(
                f"p{i}",
                cpu=draw(st.sampled_from(CPUS)),
                memory=draw(st.sampled_from(MEMS)),
                selector=selector,
                tolerations=tolerations,
                host_ports=host_ports,
            )
        )
    return pods


@st.composite
def pools_strategy(draw: st.DrawFn) -> list[NodePoolTemplate]:
    pools = [nodepool("general", weight=draw(st.integers(0, 100)))]
    if draw(st.booleans()):
        pools.append(
            nodepool(
                "batch",
                weight=draw(st.integers(0, 100)),
                taints=(TAINT,),
                requirements=Requirements.of([Requirement.create(CAPACITY_TYPE, "In", ["spot"])]),
                limits={"cpu": str(draw(st.integers(2, 40)))},
            )
        )
    if draw(st.booleans()):
        pools[0].limits = res.parse_resources({"cpu": str(draw(st.integers(4, 64)))})
    if draw(st.booleans()):
        pools[0].requirements = Requirements.of([Requirement.create(ARCH, "In", ["amd64"])])
    for pool in pools:
        pool.packing = draw(st.sampled_from(["FewerNodes", "LowestCost"]))
    return pools


@st.composite
def nodes_strategy(draw: st.DrawFn) -> list[Node]:
    return [
        node(
            f"n{i}",
            draw(st.sampled_from(["2", "4"])),
            draw(st.sampled_from(["4Gi", "16Gi"])),
            labels={ZONE: draw(st.sampled_from(ZONES)), ARCH: "amd64"},
            unschedulable=draw(st.integers(0, 5)) == 0,
        )
        for i in range(draw(st.integers(0, 3)))
    ]


def _run(pods: Sequence[Pod], pools: Sequence[NodePoolTemplate], nodes: Sequence[Node]) -> Results:
    daemon = pod("ds", cpu="100m", memory="128Mi")
    return schedule(SchedulingInput(list(pods), list(pools), list(SMALL_CATALOG), list(nodes), [daemon]))


def _satisfies(p: Pod, labels: dict[str, str]) -> bool:
    return any(option.matches(labels) for option in p.node_requirement_options())


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(pods_strategy(), pools_strategy(), nodes_strategy())
def test_no_node_is_over_committed(pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node]) -> None:
    result = _run(pods, pools, nodes)
    for claim in result.new_claims:
        assert claim.instance_types, "a claim always has a candidate"
        for it in claim.instance_types:  # every candidate can hold everything, not only the cheapest
            assert res.fits(claim.requests, it.allocatable)
    by_name = {n.name: n for n in nodes}
    for placement in result.existing:
        n = by_name[placement.node]
        used = res.add(*(p.requests for p in placement.pods), *(p.requests for p in n.pods))
        assert res.fits(used, n.allocatable)
        assert not n.unschedulable


@PROPERTY_SETTINGS
@given(pods_strategy(), pools_strategy(), nodes_strategy())
def test_every_placed_pod_satisfies_its_constraints(
    pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node]
) -> None:
    result = _run(pods, pools, nodes)
    pools_by_name = {p.name: p for p in pools}
    for claim in result.new_claims:
        ports: list[HostPort] = []
        for p in claim.pods:
            assert tolerates_all(p.tolerations, pools_by_name[claim.nodepool].taints) is None
            assert all(not hp.conflicts(other) for hp in p.host_ports for other in ports)
            ports.extend(p.host_ports)
        # whichever candidate and offering the launch picks, the node's labels satisfy every pod
        for it in claim.instance_types:
            for zone, capacity_type, _ in allowed_offerings(it, claim.requirements):
                assert zone in claim.zones
                assert capacity_type in claim.capacity_types
                labels = {**it.labels, **claim.labels, ZONE: zone, CAPACITY_TYPE: capacity_type}
                for p in claim.pods:
                    assert _satisfies(p, labels), (p.key, it.name, zone)
    by_name = {n.name: n for n in nodes}
    for placement in result.existing:
        for p in placement.pods:
            assert _satisfies(p, by_name[placement.node].labels)
            assert tolerates_all(p.tolerations, by_name[placement.node].taints) is None


@PROPERTY_SETTINGS
@given(pods_strategy(), pools_strategy(), nodes_strategy())
def test_limits_are_never_exceeded(pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node]) -> None:
    result = _run(pods, pools, nodes)
    for pool in pools:
        if pool.limits is None:
            continue
        claims = [c for c in result.new_claims if c.nodepool == pool.name]
        # any candidate may be launched, so count each claim at its largest candidate
        counted = res.add(pool.usage, *(res.maximum(it.capacity for it in c.instance_types) for c in claims))
        for name, limit in pool.limits.items():
            assert counted.get(name, 0) <= limit


@PROPERTY_SETTINGS
@given(pods_strategy(), pools_strategy(), nodes_strategy(), st.integers(0, 2**32 - 1))
def test_result_does_not_depend_on_input_order(
    pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node], seed: int
) -> None:
    def canonical(result: Results) -> object:
        return (
            sorted(
                (c.nodepool, tuple(t.name for t in c.instance_types), tuple(p.key for p in c.pods), c.price)
                for c in result.new_claims
            ),
            sorted((e.node, tuple(p.key for p in e.pods)) for e in result.existing),
            sorted((e.pod.key, e.reason) for e in result.errors),
        )

    rng = random.Random(seed)
    shuffled_pods, shuffled_pools, shuffled_nodes = list(pods), list(pools), list(nodes)
    rng.shuffle(shuffled_pods)
    rng.shuffle(shuffled_pools)
    rng.shuffle(shuffled_nodes)
    assert canonical(_run(pods, pools, nodes)) == canonical(
        _run(shuffled_pods, shuffled_pools, shuffled_nodes)
    )


@PROPERTY_SETTINGS
@given(pods_strategy(), pools_strategy(), nodes_strategy())
def test_every_pod_is_placed_once_or_explained(
    pods: list[Pod], pools: list[NodePoolTemplate], nodes: list[Node]
) -> None:
    result = _run(pods, pools, nodes)
    placed = [p.key for c in result.new_claims for p in c.pods] + [
        p.key for e in result.existing for p in e.pods
    ]
    failed = [e.pod.key for e in result.errors]
    assert sorted(placed + failed) == sorted(p.key for p in pods)
    assert all(e.reason for e in result.errors)
