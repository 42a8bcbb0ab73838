"""Each scheduling rule of the foundation issue, as a user of `fleetwright plan` would see it."""

from __future__ import annotations

from fleetwright.model.labels import ARCH, CAPACITY_TYPE, INSTANCE_FAMILY, INSTANCE_TYPE, OS, ZONE
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import Taint, Toleration
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, itype, node, nodepool, pod, req


def run(pods, pools=None, types=None, nodes=None, daemonsets=None) -> Results:  # type: ignore[no-untyped-def]
    return schedule(
        SchedulingInput(
            pods=list(pods),
            nodepools=list(pools if pools is not None else [nodepool()]),
            instance_types=list(types if types is not None else SMALL_CATALOG),
            nodes=list(nodes or []),
            daemonsets=list(daemonsets or []),
        )
    )


def types_of(result: Results) -> list[str]:
    return [c.instance_types[0].name for c in result.new_claims]


AMD64_ON_DEMAND = Requirements.of(
    [Requirement.create(ARCH, "In", ["amd64"]), Requirement.create(CAPACITY_TYPE, "In", ["on-demand"])]
)


def test_packs_small_pods_onto_one_node_of_the_cheapest_type_that_holds_them() -> None:
    pods = [pod(f"inflate-{i}", cpu="100m", memory="1Gi") for i in range(5)]
    result = run(pods, [nodepool(requirements=AMD64_ON_DEMAND)])
    assert types_of(result) == ["m5.large"]
    claim = result.new_claims[0]
    assert len(claim.pods) == 5
    assert claim.price == 0.096
    # every compatible type that holds 5Gi stays a candidate, cheapest first
    names = [t.name for t in claim.instance_types]
    assert names[:3] == ["m5.large", "r5.large", "m5.xlarge"]
    assert "c5.large" not in names
    assert claim.capacity_types == ["on-demand"]
    assert claim.zones == ["test-zone-a", "test-zone-b", "test-zone-c"]


def test_spot_is_chosen_when_allowed_because_it_is_cheaper() -> None:
    result = run([pod("a", cpu="1")], [nodepool(requirements=req(ARCH, "In", "amd64"))])
    claim = result.new_claims[0]
    assert claim.instance_types[0].name == "c5.large"
    assert claim.price == round(0.085 * 0.4, 10)
    assert claim.capacity_types == ["spot", "on-demand"]


def test_pods_too_big_for_one_type_move_to_a_larger_type_or_a_second_node() -> None:
    pods = [pod(f"p{i}", cpu="3") for i in range(3)]
    result = run(pods, [nodepool(requirements=AMD64_ON_DEMAND)])
    # all three fit together on a 16-CPU node; no claim holds more than its largest candidate allows
    assert sum(len(c.pods) for c in result.new_claims) == 3
    for claim in result.new_claims:
        assert claim.requests["cpu"] <= claim.instance_types[0].allocatable["cpu"]


def test_node_selector_picks_the_architecture() -> None:
    result = run([pod("a", cpu="1", selector={ARCH: "arm64"})])
    assert types_of(result) == ["m6g.large"]
    assert result.new_claims[0].labels[ARCH] == "arm64"


def test_required_node_affinity_terms_are_ored() -> None:
    terms = [req(INSTANCE_TYPE, "In", "r5.large"), req(INSTANCE_TYPE, "In", "m5.xlarge")]
    result = run([pod("a", cpu="1", required=terms)])
    assert types_of(result) == ["r5.large"]
    assert [t.name for t in result.new_claims[0].instance_types] == ["r5.large"]


def test_preferred_affinity_is_honoured_when_possible() -> None:
    preferred = [(50, req(ZONE, "In", "test-zone-b"))]
    result = run([pod("a", cpu="1", preferred=preferred)])
    assert result.new_claims[0].zones == ["test-zone-b"]
    assert result.new_claims[0].labels[ZONE] == "test-zone-b"


def test_preferred_affinity_is_relaxed_when_it_cannot_be_met() -> None:
    preferred = [(100, req(ARCH, "In", "s390x")), (10, req(ZONE, "In", "test-zone-c"))]
    result = run([pod("a", cpu="1", preferred=preferred)])
    assert not result.errors
    # the impossible heavy term is dropped; the next heaviest is still honoured
    assert result.new_claims[0].zones == ["test-zone-c"]


def test_all_preferences_are_dropped_when_none_can_be_met() -> None:
    preferred = [(100, req(ARCH, "In", "s390x")), (10, req(OS, "In", "plan9"))]
    result = run([pod("a", cpu="1", preferred=preferred)])
    assert not result.errors
    assert len(result.new_claims[0].zones) == 3


def test_nodepool_taint_blocks_pods_without_a_toleration() -> None:
    gpu_pool = nodepool("gpu", taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),))
    result = run([pod("a", cpu="1")], [gpu_pool])
    assert not result.new_claims
    assert result.errors[0].reason == "NodePool gpu: taint nvidia.com/gpu=true:NoSchedule is not tolerated"
    tolerant = pod("b", cpu="1", tolerations=(Toleration("nvidia.com/gpu", "Exists"),))
    assert len(run([tolerant], [gpu_pool]).new_claims) == 1


def test_startup_taints_do_not_block_pods() -> None:
    pool = nodepool()
    pool.startup_taints = (Taint("node.cilium.io/agent-not-ready", "NoExecute", "true"),)
    result = run([pod("a", cpu="1")], [pool])
    assert len(result.new_claims) == 1
    assert result.new_claims[0].taints == []


def test_highest_weight_nodepool_is_used_first() -> None:
    low = nodepool("general", weight=10)
    high = nodepool("reserved", weight=50, requirements=req(INSTANCE_TYPE, "In", "m5.xlarge"))
    result = run([pod("a", cpu="1")], [low, high])
    assert result.new_claims[0].nodepool == "reserved"
    assert types_of(result) == ["m5.xlarge"]


def test_lower_weight_nodepool_is_used_when_the_heavier_one_cannot_run_the_pod() -> None:
    low = nodepool("general", weight=10)
    high = nodepool("small", weight=50, requirements=req(INSTANCE_TYPE, "In", "c5.large"))
    result = run([pod("a", cpu="1", memory="6Gi")], [low, high])
    assert result.new_claims[0].nodepool == "general"


def test_nodepool_limits_are_never_exceeded_and_the_reason_names_the_limit() -> None:
    pool = nodepool("capped", requirements=req(INSTANCE_TYPE, "In", "m5.xlarge"), limits={"cpu": "10"})
    pods = [pod(f"p{i}", cpu="3") for i in range(4)]
    result = run(pods, [pool])
    # m5.xlarge has 4 CPUs: two claims use 8 of the 10 allowed; a third would exceed the limit
    assert len(result.new_claims) == 2
    assert len(result.errors) == 2
    assert result.errors[0].reason == "NodePool capped: limit cpu=10 reached"


def test_limits_count_existing_usage() -> None:
    pool = nodepool("capped", limits={"cpu": "8"}, usage={"cpu": "8"})
    result = run([pod("a", cpu="1")], [pool])
    assert not result.new_claims
    assert "limit cpu=8 reached" in result.errors[0].reason


def test_usage_of_resources_without_a_limit_does_not_block() -> None:
    pool = nodepool("capped", limits={"cpu": "100"}, usage={"cpu": "2", "memory": "8Gi", "pods": "29"})
    result = run([pod("a", cpu="1")], [pool])
    assert not result.errors
    assert len(result.new_claims) == 1


def test_daemonset_overhead_is_reserved_on_each_new_node() -> None:
    daemon = pod("ds", cpu="1", memory="1Gi")
    pool = nodepool(requirements=AMD64_ON_DEMAND)
    result = run([pod("a", cpu="1500m")], [pool], daemonsets=[daemon])
    # 1.5 CPU + 1 CPU of DaemonSet do not fit a 2-CPU type
    assert types_of(result) == ["m5.xlarge"]
    assert result.new_claims[0].daemon_requests["cpu"] == 1000


def test_daemonsets_that_would_not_run_on_the_nodepool_cost_nothing() -> None:
    tainted = nodepool(requirements=AMD64_ON_DEMAND, taints=(Taint("dedicated", "NoSchedule", "x"),))
    tol = (Toleration("dedicated", "Equal", "x", "NoSchedule"),)
    arm_only = pod("ds-arm", cpu="1", selector={ARCH: "arm64"}, tolerations=tol)
    intolerant = pod("ds-plain", cpu="1")
    result = run([pod("a", cpu="1500m", tolerations=tol)], [tainted], daemonsets=[arm_only, intolerant])
    assert types_of(result) == ["c5.large"]
    assert result.new_claims[0].daemon_requests.get("cpu", 0) == 0


def test_existing_nodes_are_used_before_new_capacity() -> None:
    existing = node("ip-10-0-0-1", "4", "16Gi", labels={ARCH: "amd64"})
    result = run([pod("a", cpu="1"), pod("b", cpu="1")], nodes=[existing])
    assert not result.new_claims
    assert [p.name for p in result.existing[0].pods] == ["a", "b"]


def test_existing_node_room_accounts_for_bound_pods() -> None:
    bound = pod("running", cpu="3", node_name="n1")
    existing = node("n1", "4", "16Gi", pods=[bound])
    result = run([pod("a", cpu="2"), pod("b", cpu="500m")], nodes=[existing])
    assert [p.name for p in result.existing[0].pods] == ["b"]
    assert [p.name for c in result.new_claims for p in c.pods] == ["a"]


def test_cordoned_tainted_or_mismatched_nodes_are_not_used() -> None:
    cordoned = node("n1", "4", "16Gi", unschedulable=True)
    tainted = node("n2", "4", "16Gi", taints=(Taint("dedicated", "NoSchedule", "db"),))
    arm = node("n3", "4", "16Gi", labels={ARCH: "arm64"})
    result = run([pod("a", cpu="1", selector={ARCH: "amd64"})], nodes=[cordoned, tainted, arm])
    assert not result.existing
    assert len(result.new_claims) == 1


def test_extended_resources_pick_a_type_that_has_them() -> None:
    result = run([pod("train", cpu="4", extra={"nvidia.com/gpu": "1"})])
    assert types_of(result) == ["p3.2xlarge"]


def test_extended_resource_nobody_offers_is_explained() -> None:
    pool = nodepool(requirements=req(INSTANCE_FAMILY, "In", "m5"))
    result = run([pod("train", cpu="1", extra={"nvidia.com/gpu": "1"})], [pool])
    assert result.errors[0].reason == (
        "NodePool default: no instance type has nvidia.com/gpu=1 within the NodePool's requirements"
    )


def test_host_port_conflicts_spread_pods_over_nodes() -> None:
    pods = [pod(f"ingress-{i}", cpu="100m", host_ports=(443,)) for i in range(3)]
    result = run(pods)
    assert len(result.new_claims) == 3
    assert all(len(c.pods) == 1 for c in result.new_claims)


def test_os_mismatch_is_explained() -> None:
    result = run([pod("win", cpu="1", selector={OS: "windows"})])
    assert not result.new_claims
    assert "no instance type satisfies the pod's requirements (kubernetes.io/os In [windows])" in (
        result.errors[0].reason
    )


def test_too_big_pod_names_the_resource() -> None:
    result = run([pod("huge", cpu="96")])
    assert result.errors[0].reason == (
        "NodePool default: no instance type has cpu=96 within the NodePool's requirements"
    )


def test_custom_label_the_nodepool_does_not_set_is_explained() -> None:
    result = run([pod("a", cpu="1", selector={"team": "payments"})])
    assert 'label "team" is not set by the NodePool' in result.errors[0].reason
    labelled = nodepool(labels={"team": "payments"})
    ok = run([pod("a", cpu="1", selector={"team": "payments"})], [labelled])
    assert ok.new_claims[0].labels["team"] == "payments"


def test_nodepool_requirement_exists_lets_a_pod_choose_the_value() -> None:
    pool = nodepool(requirements=req("team", "Exists"))
    result = run([pod("a", cpu="1", selector={"team": "search"}), pod("b", cpu="1")], [pool])
    labels = sorted(c.labels.get("team", "-") for c in result.new_claims)
    assert "search" in labels


def test_pods_with_conflicting_selectors_get_separate_claims() -> None:
    a = pod("a", cpu="1", selector={ZONE: "test-zone-a"})
    b = pod("b", cpu="1", selector={ZONE: "test-zone-b"})
    result = run([a, b])
    assert sorted(c.zones[0] for c in result.new_claims) == ["test-zone-a", "test-zone-b"]


def test_reason_lists_every_nodepool() -> None:
    a = nodepool("a", requirements=req(ARCH, "In", "arm64"))
    b = nodepool("b", taints=(Taint("x", "NoSchedule"),))
    result = run([pod("p", cpu="1", selector={ARCH: "amd64"})], [a, b])
    reason = result.errors[0].reason
    assert reason.startswith("incompatible with every NodePool: ")
    assert "NodePool a: incompatible requirements: kubernetes.io/arch In [amd64] conflicts with" in reason
    assert "NodePool b: taint x:NoSchedule is not tolerated" in reason


def test_no_nodepool_at_all() -> None:
    result = run([pod("p", cpu="1")], pools=[])
    assert result.errors[0].reason == "no NodePool exists"


def test_min_values_keeps_enough_instance_families() -> None:
    types = [
        itype(f"{fam}.large", "2", "8Gi", price=p) for fam, p in (("m5", 0.1), ("c5", 0.09), ("r5", 0.12))
    ]
    pool = nodepool(
        requirements=Requirements.of([Requirement.create(INSTANCE_FAMILY, "Exists", min_values=3)])
    )
    ok = run([pod("a", cpu="1")], [pool], types)
    assert len({t.labels[INSTANCE_FAMILY] for t in ok.new_claims[0].instance_types}) == 3
    # a pod only two families can hold cannot meet minValues 3
    big = [*types[:2], itype("r5.large", "2", "2Gi", price=0.12)]
    failed = run([pod("b", cpu="1", memory="4Gi")], [pool], big)
    assert "minValues 3 but only 2 value(s) fit" in failed.errors[0].reason


def test_packing_strategy_trades_node_count_for_cost() -> None:
    types = [itype("s.large", "2", "8Gi", price=0.10), itype("m.2xlarge", "8", "32Gi", price=0.50)]
    pods = [pod(f"p{i}", cpu="1") for i in range(6)]
    on_demand = req(CAPACITY_TYPE, "In", "on-demand")
    fewer_pool = nodepool(requirements=on_demand)
    fewer_pool.packing = "FewerNodes"
    fewer = run(pods, [fewer_pool], types)
    assert types_of(fewer) == ["m.2xlarge"]
    lowest = run(pods, [nodepool(requirements=on_demand)], types)  # LowestCost, the default
    assert types_of(lowest) == ["s.large"] * 3
    assert lowest.hourly_cost < fewer.hourly_cost
