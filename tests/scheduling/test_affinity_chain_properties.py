"""Chains of required pod affinity inside one batch always schedule, whatever the input order (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, ZONES, nodepool, pod

CPUS = ["100m", "250m", "500m"]


@st.composite
def chains(draw: st.DrawFn) -> list[Pod]:
    """Tiers t0 <- t1 <- ... : each tier's pods need a pod of the previous tier in the same zone or node.

    The first tier is pinned to one zone: a new node's zone is only decided by its pods (as in
    Karpenter, a target on a node that may still launch in any zone cannot be followed in the same run).
    """
    length = draw(st.integers(2, 6))
    root_zone = draw(st.sampled_from(ZONES))
    pods: list[Pod] = []
    for level in range(length):
        replicas = draw(st.integers(1, 4))
        key = draw(st.sampled_from([ZONE, HOSTNAME]))
        for i in range(replicas):
            p = pod(
                f"t{level}-{i}",
                cpu=draw(st.sampled_from(CPUS)),
                memory="256Mi",
                selector={ZONE: root_zone} if level == 0 else None,
            )
            p.labels = {"tier": f"t{level}"}
            if level:
                selector = LabelSelector((("tier", f"t{level - 1}"),))
                p.pod_affinity = (PodAffinityTerm(key, selector),)
            pods.append(p)
    return pods


def run(pods: list[Pod]) -> Results:
    return schedule(SchedulingInput(pods, [nodepool()], list(SMALL_CATALOG)))


def placement(result: Results) -> list[tuple[str, tuple[str, ...], tuple[str, ...], str]]:
    return [
        (c.name, tuple(c.zones), tuple(p.name for p in c.pods), c.instance_types[0].name)
        for c in result.new_claims
    ]


def domain(result: Results, name: str, key: str) -> str:
    claim = next(c for c in result.new_claims if any(p.name == name for p in c.pods))
    return claim.name if key == HOSTNAME else claim.zones[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.randoms(use_true_random=False))
def test_affinity_chains_schedule_and_do_not_depend_on_input_order(
    pods: list[Pod], rnd: random.Random
) -> None:
    declared = list(pods)
    rnd.shuffle(declared)
    result = run(declared)
    assert not result.errors, [(e.pod.name, e.reason) for e in result.errors]
    for p in pods:
        if p.pod_affinity:
            term = p.pod_affinity[0]
            wanted = dict(term.label_selector.match_labels)["tier"] if term.label_selector else ""
            targets = {domain(result, q.name, term.topology_key) for q in pods if q.labels["tier"] == wanted}
            assert domain(result, p.name, term.topology_key) in targets
    again = list(pods)
    rnd.shuffle(again)
    assert placement(run(again)) == placement(result)
