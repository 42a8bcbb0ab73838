"""The prepared-pool cache (scheduling/pools.py) never serves a stale launch choice: a NodePool edit, an
offering EC2 refused, a new price or a DaemonSet change shows in the very next simulation."""

from __future__ import annotations

import dataclasses

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import INSTANCE_TYPE
from fleetwright.model.pod import Pod
from fleetwright.model.taints import Taint
from fleetwright.scheduling.pools import MIX_CACHE_SIZE, POOL_CACHE, POOL_CACHE_SIZE, prepare_pool
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import itype, nodepool, pod, req

CHEAP = itype("c5.large", "2", "4Gi", price=0.08, capacity_types=("on-demand",))
DEARER = itype("m5.large", "2", "8Gi", price=0.10, capacity_types=("on-demand",))


def run(
    catalog: list[InstanceType],
    pool: NodePoolTemplate | None = None,
    daemonsets: list[Pod] | None = None,
    pods: list[Pod] | None = None,
) -> Results:
    return schedule(
        SchedulingInput(
            pods=pods if pods is not None else [pod("web", cpu="1", memory="1Gi")],
            nodepools=[pool or nodepool()],
            instance_types=catalog,
            daemonsets=daemonsets or [],
        )
    )


def launched(result: Results) -> list[str]:
    return [c.instance_types[0].name for c in result.new_claims]


def test_a_second_identical_pass_reuses_the_prepared_pool_and_decides_the_same() -> None:
    catalog = [CHEAP, DEARER]
    first = run(catalog)
    hits = POOL_CACHE.hits
    second = run(list(catalog))
    assert POOL_CACHE.hits == hits + 1
    assert launched(first) == launched(second) == ["c5.large"]
    assert first.new_claims[0].price == second.new_claims[0].price == 0.08


def test_an_edited_nodepool_requirement_is_seen_at_once() -> None:
    catalog = [CHEAP, DEARER]
    assert launched(run(catalog)) == ["c5.large"]
    edited = nodepool(requirements=req(INSTANCE_TYPE, "In", "m5.large"))
    assert launched(run(catalog, edited)) == ["m5.large"]


def test_a_new_nodepool_taint_is_seen_at_once() -> None:
    catalog = [CHEAP, DEARER]
    assert launched(run(catalog)) == ["c5.large"]
    tainted = nodepool(taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    result = run(catalog, tainted)
    assert result.new_claims == []
    assert "not tolerated" in result.errors[0].reason


def test_an_offering_marked_unavailable_is_not_launched_from_the_cache() -> None:
    catalog = [CHEAP, DEARER]
    assert launched(run(catalog)) == ["c5.large"]
    refused = dataclasses.replace(
        CHEAP, offerings=tuple(dataclasses.replace(o, available=False) for o in CHEAP.offerings)
    )
    assert launched(run([refused, DEARER])) == ["m5.large"]
    # and back once the refusal expires (the listing hands out the original type again)
    assert launched(run(catalog)) == ["c5.large"]


def test_a_refused_zone_leaves_the_claim_in_the_other_zones() -> None:
    catalog = [CHEAP]
    assert run(catalog).new_claims[0].zones == ["test-zone-a", "test-zone-b", "test-zone-c"]
    refused = dataclasses.replace(
        CHEAP,
        offerings=tuple(dataclasses.replace(o, available=o.zone != "test-zone-a") for o in CHEAP.offerings),
    )
    assert run([refused]).new_claims[0].zones == ["test-zone-b", "test-zone-c"]


def test_a_new_price_changes_the_choice_and_the_claims_price() -> None:
    catalog = [CHEAP, DEARER]
    assert launched(run(catalog)) == ["c5.large"]
    repriced = dataclasses.replace(
        CHEAP, offerings=tuple(dataclasses.replace(o, price=0.5) for o in CHEAP.offerings)
    )
    result = run([repriced, DEARER])
    assert launched(result) == ["m5.large"]
    assert result.new_claims[0].price == 0.10


def test_a_new_daemonset_takes_its_room_on_the_next_pass() -> None:
    catalog = [CHEAP, DEARER]
    pods = [pod("web", cpu="1", memory="3Gi")]
    assert launched(run(catalog, pods=pods)) == ["c5.large"]
    agent = dataclasses.replace(pod("agent", cpu="100m", memory="2Gi"), owner=("DaemonSet", "agent"))
    result = run(catalog, daemonsets=[agent], pods=pods)
    # 3Gi of pod and 2Gi of agent no longer fit the 4Gi type
    assert launched(result) == ["m5.large"]
    assert result.new_claims[0].daemon_requests["memory"] == 2 * 1024**3


def test_limits_and_usage_are_the_passes_own_even_when_the_tables_are_shared() -> None:
    catalog = [CHEAP, DEARER]
    assert launched(run(catalog, nodepool(limits={"cpu": "4"}))) == ["c5.large"]
    result = run(catalog, nodepool(limits={"cpu": "4"}, usage={"cpu": "4"}))
    assert result.new_claims == []
    assert "limit" in result.errors[0].reason


def test_a_warm_process_keeps_a_bounded_number_of_tables_per_pool() -> None:
    catalog = [CHEAP, DEARER]
    for i in range(MIX_CACHE_SIZE * 3):  # a new pod mix every pass
        assert launched(run(catalog, pods=[pod("web", cpu=f"{100 + i}m", memory="1Gi")])) == ["c5.large"]
    pool = prepare_pool(nodepool(), sorted(catalog, key=lambda t: t.name), [], ("cpu", "memory", "pods"))
    assert 0 < len(pool.by_unit_cost) <= MIX_CACHE_SIZE
    assert len(POOL_CACHE.entries) <= POOL_CACHE_SIZE
