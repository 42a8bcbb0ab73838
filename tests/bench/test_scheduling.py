"""Karpenter's benchmark mix (bench/scheduling.py) planned as ``fleetwright plan -o json`` plans it.

What must hold at thousands of nodes: one node per hostname-anti-affinity pod and no more, every pod
placed, zonal constraints honoured, NodePool limits never exceeded.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict

import pytest
from scheduling import KARPENTER_NODEPOOL, instance_types, karpenter_plan, karpenter_pods

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import ZONE
from fleetwright.model.quantity import CPU, MEMORY
from fleetwright.plan import Plan, write_plan_json
from fleetwright.scheduling.types import NewNodeClaim

NGINX = ("app", "nginx")


@pytest.fixture(scope="module")
def types() -> list[InstanceType]:
    return instance_types()


def largest(claim: NewNodeClaim, resource: str) -> int:
    """What the claim can count against limits at most: its largest candidate type."""
    return max(it.capacity.get(resource, 0) for it in claim.instance_types)


def anti_affinity_pods(claim: NewNodeClaim) -> int:
    return sum(1 for p in claim.pods if p.labels.get(NGINX[0]) == NGINX[1])


def test_karpenter_mix_plans_one_node_per_anti_affinity_pod(types: list[InstanceType]) -> None:
    _, plan = karpenter_plan(karpenter_pods(2000), types)
    results = plan.results
    assert not results.errors
    assert results.scheduled == 2000
    # 400 pods repel each other on hostname: 400 nodes, each with exactly one, and the rest fit beside them.
    assert len(results.new_claims) == 400
    assert all(anti_affinity_pods(claim) == 1 for claim in results.new_claims)
    zones_of_affinity: dict[str, set[str]] = defaultdict(set)
    for claim in results.new_claims:
        for p in claim.pods:
            if p.pod_affinity:
                zones_of_affinity[p.labels["my-affininity"]].update(claim.zones)
            if p.pod_affinity or any(c.topology_key == ZONE for c in p.topology_spread):
                assert len(claim.zones) == 1, claim.name  # the node is launched in the zone chosen
    # Zonal self-affinity: each group of pods shares one zone.
    assert len(zones_of_affinity) == 7
    assert all(len(zones) == 1 for zones in zones_of_affinity.values())


def test_karpenter_mix_never_exceeds_binding_limits(types: list[InstanceType]) -> None:
    limits = KARPENTER_NODEPOOL.replace('cpu: "10000000"', 'cpu: "5000"').replace(
        "memory: 1000000Ti", "memory: 40Ti"
    )
    _, plan = karpenter_plan(karpenter_pods(2000), types, limits)
    results = plan.results
    assert results.new_claims and results.errors
    assert results.scheduled + len(results.errors) == 2000
    # Whichever candidate type each node is launched as, the NodePool stays within its limits.
    assert sum(largest(claim, CPU) for claim in results.new_claims) <= 5000 * 1000
    assert sum(largest(claim, MEMORY) for claim in results.new_claims) <= 40 * 2**40
    assert any("limit memory=40Ti reached" in error.reason for error in results.errors)
    assert all(anti_affinity_pods(claim) <= 1 for claim in results.new_claims)


@pytest.mark.slow
def test_karpenter_mix_of_20000_pods_needs_4000_nodes(types: list[InstanceType]) -> None:
    _, plan = karpenter_plan(karpenter_pods(20000), types)
    out = io.StringIO()
    write_plan_json(plan, out)
    document = json.loads(out.getvalue())
    assert document["summary"]["scheduled"] == 20000
    assert not document["unschedulable"]
    # One node per anti-affinity pod; the default packing may add a few nodes for the plain pods
    # when that is cheaper.
    claims = plan.results.new_claims
    assert sum(anti_affinity_pods(claim) == 1 for claim in claims) == 4000
    assert all(anti_affinity_pods(claim) <= 1 for claim in claims)
    assert document["summary"]["newNodeClaims"] == len(claims) < 4100
    assert document["summary"]["hourlyCost"] == pytest.approx(sum(c["price"] for c in document["nodeClaims"]))
    assert_within_limits(plan)


def assert_within_limits(plan: Plan) -> None:
    (pool,) = plan.input.nodepools
    assert pool.limits is not None
    for resource, limit in pool.limits.items():
        assert sum(largest(claim, resource) for claim in plan.results.new_claims) <= limit
