"""Topology spread, pod (anti-)affinity and volume topology, as a user of `fleetwright plan` sees them."""

from __future__ import annotations

from collections import Counter

from fleetwright.model.labels import CAPACITY_TYPE, HOSTNAME, ZONE
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from fleetwright.model.volumes import volume_requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, nodepool, pod, req

APP = LabelSelector((("app", "web"),))


def web(name: str, cpu: str = "500m", namespace: str = "default", **constraints: object) -> Pod:
    p = pod(name, cpu=cpu, memory="256Mi", namespace=namespace)
    p.labels = {"app": "web"}
    for field, value in constraints.items():
        setattr(p, field, value)
    return p


def spread(
    key: str = ZONE, skew: int = 1, mode: str = "DoNotSchedule", **kw: object
) -> tuple[TopologySpreadConstraint]:
    return (TopologySpreadConstraint(key, skew, mode, APP, **kw),)  # type: ignore[arg-type]


def term(key: str, selector: LabelSelector | None = APP, weight: int | None = None) -> tuple[PodAffinityTerm]:
    return (PodAffinityTerm(key, selector, ("default",), None, weight),)


def run(pods, pools=None, nodes=None, **extra) -> Results:  # type: ignore[no-untyped-def]
    return schedule(
        SchedulingInput(
            list(pods),
            list(pools or [nodepool()]),
            list(SMALL_CATALOG),
            list(nodes or []),
            **extra,
        )
    )


def zone_of_pods(result: Results) -> Counter[str]:
    counts: Counter[str] = Counter()
    for claim in result.new_claims:
        assert len(claim.zones) == 1, "a claim holding zonal-constrained pods settles on one zone"
        counts[claim.zones[0]] += len(claim.pods)
    return counts


def test_zonal_spread_puts_equal_numbers_in_each_zone() -> None:
    result = run([web(f"w{i}", topology_spread=spread()) for i in range(6)])
    assert not result.errors
    assert zone_of_pods(result) == {"test-zone-a": 2, "test-zone-b": 2, "test-zone-c": 2}
    assert all(c.labels[ZONE] == c.zones[0] for c in result.new_claims)


def test_zonal_spread_counts_existing_pods() -> None:
    running = [web(f"old{i}", node_name="n1") for i in range(2)]
    existing = node("n1", "1", "1Gi", labels={ZONE: "test-zone-a", HOSTNAME: "n1"}, pods=running)
    result = run([web(f"w{i}", topology_spread=spread()) for i in range(4)], nodes=[existing])
    assert zone_of_pods(result) == {"test-zone-b": 2, "test-zone-c": 2}


def test_zonal_spread_within_a_nodepool_zone_restriction() -> None:
    pool = nodepool(requirements=req(ZONE, "In", "test-zone-a"))
    full = node("n-b", "0", "0", labels={ZONE: "test-zone-b", HOSTNAME: "n-b"})
    result = run([web(f"w{i}", topology_spread=spread()) for i in range(2)], [pool], [full])
    # zone b is a domain (a node is there) but has no room and the NodePool cannot launch there
    placed = zone_of_pods(result)
    assert placed == {"test-zone-a": 1}
    assert len(result.errors) == 1
    assert result.errors[0].reason == (
        "topology spread on zone: maxSkew 1 cannot be met (matching pods: test-zone-a=1, test-zone-b=0); "
        "only test-zone-a allowed by NodePool default"
    )


def test_min_domains_forces_spreading_into_new_domains() -> None:
    pool = nodepool(requirements=req(ZONE, "In", "test-zone-a", "test-zone-b"))
    result = run([web(f"w{i}", topology_spread=spread(skew=1, min_domains=3)) for i in range(3)], [pool])
    # only two zones exist: with minDomains 3 the global minimum stays 0, so each zone takes one pod
    assert zone_of_pods(result) == {"test-zone-a": 1, "test-zone-b": 1}
    assert len(result.errors) == 1


def test_hostname_spread_puts_one_pod_per_node() -> None:
    result = run([web(f"w{i}", topology_spread=spread(HOSTNAME)) for i in range(4)])
    assert len(result.new_claims) == 4
    assert all(len(c.pods) == 1 for c in result.new_claims)


def test_hostname_spread_max_skew_two_allows_pairs() -> None:
    result = run([web(f"w{i}", topology_spread=spread(HOSTNAME, skew=2)) for i in range(4)])
    assert sorted(len(c.pods) for c in result.new_claims) == [2, 2]


def test_capacity_type_spread_narrows_claims_to_one_capacity_type() -> None:
    result = run([web(f"w{i}", topology_spread=spread(CAPACITY_TYPE)) for i in range(4)])
    types = Counter(c.capacity_types[0] for c in result.new_claims for _ in c.pods)
    assert all(len(c.capacity_types) == 1 for c in result.new_claims)
    assert types == {"spot": 2, "on-demand": 2}


def test_schedule_anyway_spreads_when_possible_and_relaxes_otherwise() -> None:
    result = run([web(f"w{i}", topology_spread=spread(mode="ScheduleAnyway")) for i in range(3)])
    assert zone_of_pods(result) == {"test-zone-a": 1, "test-zone-b": 1, "test-zone-c": 1}
    pool = nodepool(requirements=req(ZONE, "In", "test-zone-a"))
    relaxed = run([web(f"w{i}", topology_spread=spread(mode="ScheduleAnyway")) for i in range(3)], [pool])
    assert not relaxed.errors


def test_zonal_self_affinity_keeps_a_workload_in_one_zone() -> None:
    result = run([web(f"w{i}", cpu="1500m", pod_affinity=term(ZONE)) for i in range(5)])
    assert not result.errors
    assert len(zone_of_pods(result)) == 1


def test_hostname_anti_affinity_puts_one_replica_per_node_and_respects_existing_pods() -> None:
    running = web("old", node_name="n1")
    existing = node("n1", "8", "32Gi", labels={HOSTNAME: "n1"}, pods=[running])
    result = run([web(f"w{i}", pod_anti_affinity=term(HOSTNAME)) for i in range(3)], nodes=[existing])
    assert not result.existing
    assert len(result.new_claims) == 3
    assert all(len(c.pods) == 1 for c in result.new_claims)


def test_existing_pods_anti_affinity_repels_new_pods() -> None:
    guard = pod("guard", cpu="100m", node_name="n1")
    guard.labels = {"app": "guard"}
    guard.pod_anti_affinity = term(HOSTNAME)  # keeps app=web away from its node
    existing = node("n1", "8", "32Gi", labels={HOSTNAME: "n1"}, pods=[guard])
    result = run([web("w")], nodes=[existing])
    assert not result.existing
    assert len(result.new_claims) == 1


def test_pod_affinity_to_another_workload_lands_beside_it_or_explains() -> None:
    db = pod("db", cpu="100m", node_name="n1")
    db.labels = {"app": "db"}
    existing = node("n1", "2", "4Gi", labels={HOSTNAME: "n1", ZONE: "test-zone-b"}, pods=[db])
    near_db = term(HOSTNAME, LabelSelector((("app", "db"),)))
    result = run([web("w", pod_affinity=near_db)], nodes=[existing])
    assert [p.name for p in result.existing[0].pods] == ["w"]
    too_big = run([web("big", cpu="4", pod_affinity=near_db)], nodes=[existing])
    assert not too_big.new_claims
    assert "pod affinity on hostname" in too_big.errors[0].reason
    nobody = run([web("lonely", pod_affinity=near_db)])
    assert nobody.errors[0].reason == "pod affinity on hostname: no pod matches the selector"


def test_zonal_affinity_to_another_workload_picks_its_zone() -> None:
    db = pod("db", cpu="100m", node_name="n1")
    db.labels = {"app": "db"}
    existing = node("n1", "1", "1Gi", labels={HOSTNAME: "n1", ZONE: "test-zone-c"}, pods=[db])
    near_db = term(ZONE, LabelSelector((("app", "db"),)))
    result = run([web("w", cpu="2", pod_affinity=near_db)], nodes=[existing])
    assert result.new_claims[0].zones == ["test-zone-c"]


def test_namespace_selector_decides_which_pods_count() -> None:
    db = pod("db", cpu="100m", namespace="data", node_name="n1")
    db.labels = {"app": "web"}
    existing = node("n1", "8", "8Gi", labels={HOSTNAME: "n1"}, pods=[db])
    by_label = (PodAffinityTerm(HOSTNAME, APP, (), LabelSelector((("team", "data"),))),)
    result = run(
        [web("w", pod_anti_affinity=by_label)], nodes=[existing], namespace_labels={"data": {"team": "data"}}
    )
    assert not result.existing  # the data namespace is selected: the pod keeps away from n1
    other = run([web("w", pod_anti_affinity=by_label)], nodes=[existing], namespace_labels={"data": {}})
    assert [p.name for p in other.existing[0].pods] == ["w"]


def test_preferred_anti_affinity_is_honoured_then_relaxed() -> None:
    prefer_apart = term(HOSTNAME, weight=100)
    result = run([web(f"w{i}", preferred_pod_anti_affinity=prefer_apart) for i in range(2)])
    assert len(result.new_claims) == 2
    capped = nodepool(
        requirements=req("node.kubernetes.io/instance-type", "In", "m5.xlarge"), limits={"cpu": "4"}
    )
    relaxed = run([web(f"w{i}", preferred_pod_anti_affinity=prefer_apart) for i in range(2)], [capped])
    assert not relaxed.errors
    assert len(relaxed.new_claims) == 1


def volume_pod(name: str, claim: str) -> Pod:
    p = web(name)
    p.volume_claims = (claim,)
    return p


PV_B = {
    "metadata": {"name": "pv-b"},
    "spec": {
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.ebs.csi.aws.com/zone",
                                "operator": "In",
                                "values": ["test-zone-b"],
                            }
                        ]
                    }
                ]
            }
        }
    },
}
WFFC_C = {
    "metadata": {"name": "gp3-c"},
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-c"]}]}],
}
PVCS = [
    {"metadata": {"name": "bound", "namespace": "default"}, "spec": {"volumeName": "pv-b"}},
    {"metadata": {"name": "unbound", "namespace": "default"}, "spec": {"storageClassName": "gp3-c"}},
]


def test_volume_topology_pins_the_zone() -> None:
    volumes = volume_requirements(PVCS, [PV_B], [WFFC_C])
    result = run([volume_pod("a", "bound"), volume_pod("b", "unbound")], volumes=volumes)
    zones = {c.pods[0].name: c.zones for c in result.new_claims}
    assert zones == {"a": ["test-zone-b"], "b": ["test-zone-c"]}


def test_unknown_volume_claim_makes_the_pod_unschedulable() -> None:
    result = run([volume_pod("a", "missing")])
    assert result.errors[0].reason == 'persistentvolumeclaim "missing" not found'


def test_volume_zone_and_spread_together() -> None:
    volumes = volume_requirements(PVCS, [PV_B], [WFFC_C])
    pinned = [volume_pod("a", "bound")]
    pinned[0].topology_spread = spread()
    others = [web(f"w{i}", topology_spread=spread()) for i in range(2)]
    result = run(pinned + others, volumes=volumes)
    assert zone_of_pods(result) == {"test-zone-a": 1, "test-zone-b": 1, "test-zone-c": 1}


def test_topology_does_not_slow_plain_pods_onto_separate_nodes() -> None:
    # an unrelated workload's anti-affinity must not keep plain pods apart
    plain = [pod(f"p{i}", cpu="100m") for i in range(5)]
    result = run([*plain, web("w", pod_anti_affinity=term(HOSTNAME))], [NodePoolTemplate("default")])
    assert len(result.new_claims) == 1
