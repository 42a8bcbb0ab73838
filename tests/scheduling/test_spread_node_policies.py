"""Topology spread's nodeAffinityPolicy and nodeTaintsPolicy, as kube-scheduler and Karpenter apply them.

nodeAffinityPolicy (default Honor): only nodes (and NodePools) the pod's node selection allows count;
Ignore: all. nodeTaintsPolicy (default Ignore): all count; Honor: only those whose NoSchedule and
NoExecute taints the pod tolerates. Counting covers both the domains the skew's minimum is taken over
and the matching pods counted in them.
"""

from __future__ import annotations

from fleetwright.model.labels import ZONE
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod, TopologySpreadConstraint
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import Taint, Toleration
from fleetwright.scheduling.types import Results
from tests.scheduling.builders import node, nodepool, req
from tests.scheduling.test_topology import APP, run, web

A, B, C = "test-zone-a", "test-zone-b", "test-zone-c"
DEDICATED = Taint("dedicated", "NoSchedule", "batch")


def spreading(
    name: str,
    affinity: str = "Honor",
    taints: str = "Ignore",
    required: Requirements | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> Pod:
    constraint = TopologySpreadConstraint(
        ZONE, 1, "DoNotSchedule", APP, node_affinity_policy=affinity, node_taints_policy=taints
    )
    affinity_terms = (required,) if required is not None else ()
    return web(name, topology_spread=(constraint,), required_affinity=affinity_terms, tolerations=tolerations)


def zonal_node(name: str, zone: str, pods: int = 0, **kw: object) -> Node:
    running = [web(f"{name}-run{i}", node_name=name) for i in range(pods)]
    labels = {ZONE: zone, **kw.pop("labels", {})}  # type: ignore[dict-item]
    return node(name, "4", "16Gi", labels=labels, pods=running, **kw)  # type: ignore[arg-type]


def zones_taken(result: Results, nodes: list[Node]) -> list[str]:
    """The zone of each pod placed, on a new claim or an existing node."""
    zone_of = {n.name: n.labels[ZONE] for n in nodes}
    on_nodes = [zone_of[e.node] for e in result.existing for _ in e.pods]
    return sorted([c.zones[0] for c in result.new_claims for _ in c.pods] + on_nodes)


# Zones a and b each run one matching pod; zone c has only a tainted, empty node. The NodePool
# launches in a and b only.
AB_POOL = nodepool(requirements=req(ZONE, "In", A, B))
NODES = [zonal_node("node-a", A, pods=1), zonal_node("node-b", B, pods=1)]
TAINTED_C = zonal_node("node-c", C, taints=(DEDICATED,))


def test_ignore_counts_a_tainted_nodes_zone_so_the_skew_cannot_be_met() -> None:
    result = run([spreading("w")], [AB_POOL], [*NODES, TAINTED_C])
    assert result.new_claims == [] and result.existing == []
    reason = result.errors[0].reason
    assert "maxSkew 1 cannot be met" in reason and f"{C}=0" in reason


def test_honor_leaves_out_the_zone_of_a_node_whose_taint_the_pod_does_not_tolerate() -> None:
    result = run([spreading("w", taints="Honor")], [AB_POOL], [*NODES, TAINTED_C])
    assert result.errors == []
    assert zones_taken(result, [*NODES, TAINTED_C]) in ([A], [B])


def test_honor_keeps_the_zone_of_a_tainted_node_the_pod_tolerates() -> None:
    tolerant = spreading("w", taints="Honor", tolerations=(Toleration("dedicated", "Exists"),))
    result = run([tolerant], [AB_POOL], [*NODES, TAINTED_C])
    # zone c counts (0 pods): the pod may only go there, onto the tainted node it tolerates
    assert [(e.node, [p.name for p in e.pods]) for e in result.existing] == [("node-c", ["w"])]


def test_a_tainted_nodepools_zone_counts_under_ignore_and_not_under_honor() -> None:
    gpu_c = nodepool("gpu", requirements=req(ZONE, "In", C), taints=(DEDICATED,))
    ignore = run([spreading("w")], [AB_POOL, gpu_c], NODES)
    assert ignore.new_claims == [] and ignore.existing == []
    assert f"{C}=0" in ignore.errors[0].reason
    honor = run([spreading("w", taints="Honor")], [AB_POOL, gpu_c], NODES)
    assert honor.errors == []


def test_pods_on_tainted_nodes_do_not_count_under_honor() -> None:
    # Zone a holds two matching pods, on a tainted node the pending pod does not tolerate.
    nodes = [zonal_node("node-a", A, pods=2, taints=(DEDICATED,))]
    ignore = run([spreading("w")], [nodepool()], nodes)
    assert zones_taken(ignore, nodes) == [B]  # a=2 counts: b and c are the emptiest
    honor = run([spreading("w", taints="Honor")], [nodepool()], nodes)
    assert zones_taken(honor, nodes) == [A]  # nothing counts: every zone is at 0, a comes first


def test_affinity_ignore_counts_a_zone_the_pod_cannot_use() -> None:
    pod_ab = req(ZONE, "In", A, B)
    nodes = [*NODES, zonal_node("node-c", C)]
    honor = run([spreading("w", required=pod_ab)], [nodepool()], nodes)
    assert honor.errors == []  # zone c is outside the pod's affinity: min over a and b is 1
    ignore = run([spreading("w", affinity="Ignore", required=pod_ab)], [nodepool()], nodes)
    assert ignore.new_claims == [] and ignore.existing == []
    assert f"{C}=0" in ignore.errors[0].reason


def test_affinity_honor_counts_only_pods_on_nodes_the_pod_could_use() -> None:
    # Zone a's two matching pods run on a tier=batch node; the pending pod selects tier=web nodes.
    web_pool = nodepool(labels={"tier": "web"})
    nodes = [zonal_node("batch-a", A, pods=2, labels={"tier": "batch"})]
    selecting = req("tier", "In", "web")
    honor = run([spreading("w", required=selecting)], [web_pool], nodes)
    assert zones_taken(honor, nodes) == [A]
    ignore = run([spreading("w", affinity="Ignore", required=selecting)], [web_pool], nodes)
    assert zones_taken(ignore, nodes) == [B]
