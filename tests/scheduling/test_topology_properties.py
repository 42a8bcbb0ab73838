"""Topology invariants over random workloads (hypothesis): spreads, anti-affinity and affinity hold."""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.node import Node
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, ZONES, node, nodepool, pod

PACKINGS = ("FewerNodes", "LowestCost")
KINDS = ("zone-spread", "host-spread", "zone-anti", "host-anti", "zone-affinity", "host-affinity", "plain")


@st.composite
def workloads(draw: st.DrawFn) -> list[Pod]:
    pods: list[Pod] = []
    for w in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(KINDS))
        skew = draw(st.integers(1, 2))
        app = f"{kind}-{w}"
        selector = LabelSelector((("app", app),))
        for i in range(draw(st.integers(1, 12))):
            p = pod(f"{app}-{i}", cpu=draw(st.sampled_from(["100m", "500m", "1", "1500m"])), memory="512Mi")
            p.labels = {"app": app, "kind": kind}
            p.annotations = {"max-skew": str(skew)}
            if kind == "zone-spread":
                p.topology_spread = (TopologySpreadConstraint(ZONE, skew, "DoNotSchedule", selector),)
            elif kind == "host-spread":
                p.topology_spread = (TopologySpreadConstraint(HOSTNAME, skew, "DoNotSchedule", selector),)
            elif kind.endswith("anti"):
                key = ZONE if kind.startswith("zone") else HOSTNAME
                p.pod_anti_affinity = (PodAffinityTerm(key, selector, ("default",)),)
            elif kind.endswith("affinity"):
                key = ZONE if kind.startswith("zone") else HOSTNAME
                p.pod_affinity = (PodAffinityTerm(key, selector, ("default",)),)
            pods.append(p)
    return pods


@st.composite
def empty_nodes(draw: st.DrawFn) -> list[Node]:
    return [
        node(f"n{i}", "4", "16Gi", labels={ZONE: draw(st.sampled_from(ZONES)), HOSTNAME: f"n{i}"})
        for i in range(draw(st.integers(0, 3)))
    ]


def placements(result: Results, nodes: list[Node]) -> list[tuple[Pod, str, str]]:
    """(pod, zone, host) for every placed pod; zonal pods always sit on claims settled on one zone."""
    zones = {n.name: n.labels[ZONE] for n in nodes}
    out = []
    for placement in result.existing:
        out.extend((p, zones[placement.node], placement.node) for p in placement.pods)
    for claim in result.new_claims:
        zone = claim.zones[0] if len(claim.zones) == 1 else "?"
        out.extend((p, zone, claim.name) for p in claim.pods)
    return out


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(workloads(), empty_nodes(), st.sampled_from(PACKINGS))
def test_topology_constraints_hold_in_every_result(pods: list[Pod], nodes: list[Node], packing: str) -> None:
    pool = nodepool()
    pool.packing = packing  # LowestCost re-packs the plain pods afterwards: constrained ones must stay put
    result = schedule(SchedulingInput(list(pods), [pool], list(SMALL_CATALOG), list(nodes)))
    placed = placements(result, nodes)
    by_app: dict[str, list[tuple[Pod, str, str]]] = defaultdict(list)
    for item in placed:
        by_app[item[0].labels["app"]].append(item)
    for app, items in by_app.items():
        kind = items[0][0].labels["kind"]
        skew = int(items[0][0].annotations["max-skew"])
        zones = Counter(zone for _, zone, _ in items)
        hosts = Counter(host for _, _, host in items)
        if kind.startswith("zone"):
            assert "?" not in zones, f"{app}: a zonal pod sits on a claim spanning zones"
        if kind == "zone-spread":
            counts = [zones.get(z, 0) for z in ZONES]
            assert max(counts) - min(counts) <= skew, (app, zones)
        elif kind == "host-spread":
            assert max(hosts.values()) <= skew, (app, hosts)
        elif kind == "zone-anti":
            assert max(zones.values()) == 1, (app, zones)
        elif kind == "host-anti":
            assert max(hosts.values()) == 1, (app, hosts)
        elif kind == "zone-affinity":
            assert len(zones) == 1, (app, zones)
        elif kind == "host-affinity":
            assert len(hosts) == 1, (app, hosts)


@SETTINGS
@given(workloads(), empty_nodes())
def test_only_domain_limited_workloads_leave_pods_unscheduled(pods: list[Pod], nodes: list[Node]) -> None:
    result = schedule(SchedulingInput(list(pods), [nodepool()], list(SMALL_CATALOG), list(nodes)))
    for error in result.errors:
        kind = error.pod.labels["kind"]
        # three zones hold at most three replicas kept apart per zone, and replicas bound to one node
        # stop when that node is full; every other workload always fits somewhere
        assert kind in ("zone-anti", "host-affinity"), error.reason
        if kind == "zone-anti":
            assert "pod anti-affinity on zone" in error.reason
        else:
            assert "pod affinity on hostname" in error.reason
