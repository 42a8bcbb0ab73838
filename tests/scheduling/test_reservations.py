"""Capacity reservations in the simulation: preferred, counted, pinned, and left when full."""

from __future__ import annotations

from dataclasses import replace

from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    ZONE,
)
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import own_reservations, with_reserved_offerings
from fleetwright.scheduling.types import SchedulingInput
from tests.scheduling.builders import itype, nodepool, pod, req


def _reserved(
    instance_type: InstanceType,
    rid: str,
    zone: str,
    capacity: int,
    kind: str = "default",
) -> InstanceType:
    """``instance_type`` with one more offering: the reservation ``rid`` in ``zone``."""
    price = min(o.price for o in instance_type.offerings if o.capacity_type == "on-demand") / 10_000_000
    offering = Offering(
        zone,
        "reserved",
        price,
        capacity > 0,
        reservation_id=rid,
        reservation_type=kind,
        reservation_capacity=capacity,
    )
    return replace(instance_type, offerings=(*instance_type.offerings, offering))


def _catalog(capacity: int = 2) -> list[InstanceType]:
    return [
        itype("c5.large", "2", "4Gi", price=0.085),
        _reserved(itype("m5.xlarge", "4", "16Gi", price=0.192), "cr-0a1b2c3d", "test-zone-b", capacity),
        itype("m5.2xlarge", "8", "32Gi", price=0.384),
    ]


def _pool(*capacity_types: str) -> Requirements:
    return req(CAPACITY_TYPE, "In", *capacity_types)


def _big_pods(count: int) -> list:  # type: ignore[type-arg]
    # 3 cpu each: one per m5.xlarge (4 cpu), and c5.large (2 cpu) cannot hold one.
    return [pod(f"big-{i}", cpu="3", memory="1Gi") for i in range(count)]


def test_a_pool_allowing_reserved_plans_the_reservation_and_pins_the_claim_to_it() -> None:
    results = schedule(
        SchedulingInput(
            pods=_big_pods(1),
            nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
            instance_types=_catalog(),
        )
    )
    [claim] = results.new_claims
    assert claim.capacity_types == ["reserved"]
    assert [t.name for t in claim.instance_types] == ["m5.xlarge"]
    assert claim.zones == ["test-zone-b"]
    assert claim.labels[CAPACITY_TYPE] == "reserved"
    assert claim.labels[CAPACITY_RESERVATION_ID] == "cr-0a1b2c3d"
    assert claim.labels[ZONE] == "test-zone-b"
    assert claim.price < 0.0001  # already paid for


def test_no_more_reserved_claims_than_the_reservation_takes_the_rest_fall_back_to_on_demand() -> None:
    results = schedule(
        SchedulingInput(
            pods=_big_pods(5),
            nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
            instance_types=_catalog(capacity=2),
        )
    )
    assert not results.errors
    assert results.scheduled == 5
    reserved = [c for c in results.new_claims if c.capacity_types == ["reserved"]]
    assert [len(c.pods) for c in reserved] == [1, 1]
    others = [c for c in results.new_claims if c not in reserved]
    assert all(c.capacity_types == ["on-demand"] for c in others)
    assert all(CAPACITY_RESERVATION_ID not in c.labels for c in others)


def test_a_reserved_only_pool_leaves_pods_beyond_the_reservation_unscheduled_with_the_reason() -> None:
    results = schedule(
        SchedulingInput(
            pods=_big_pods(3),
            nodepools=[nodepool(requirements=_pool("reserved"))],
            instance_types=_catalog(capacity=1),
        )
    )
    assert [c.capacity_types for c in results.new_claims] == [["reserved"]]
    assert len(results.errors) == 2
    assert all("cr-0a1b2c3d" in e.reason and "taken" in e.reason for e in results.errors)


def test_a_full_reservation_is_not_planned_at_all() -> None:
    results = schedule(
        SchedulingInput(
            pods=_big_pods(1),
            nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
            instance_types=_catalog(capacity=0),
        )
    )
    [claim] = results.new_claims
    assert claim.capacity_types == ["on-demand"]


def test_pools_without_reserved_never_use_reservations() -> None:
    results = schedule(
        SchedulingInput(
            pods=_big_pods(1),
            nodepools=[nodepool(requirements=_pool("on-demand"))],
            instance_types=_catalog(),
        )
    )
    [claim] = results.new_claims
    assert claim.capacity_types == ["on-demand"]
    assert CAPACITY_RESERVATION_ID not in claim.labels


def test_pods_may_ask_for_a_reservation_by_its_labels() -> None:
    wanting = pod("wants-cr", cpu="1", memory="1Gi", selector={CAPACITY_RESERVATION_ID: "cr-0a1b2c3d"})
    avoiding = pod(
        "avoids-cr", cpu="3", memory="1Gi", required=[req(CAPACITY_RESERVATION_TYPE, "DoesNotExist")]
    )
    results = schedule(
        SchedulingInput(
            pods=[wanting, avoiding],
            nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
            instance_types=_catalog(),
        )
    )
    by_pod = {p.name: c for c in results.new_claims for p in c.pods}
    assert by_pod["wants-cr"].capacity_types == ["reserved"]
    assert by_pod["avoids-cr"].capacity_types == ["on-demand"]
    assert by_pod["wants-cr"] is not by_pod["avoids-cr"]


def test_a_pod_asking_for_a_reservation_a_pool_cannot_use_is_unschedulable() -> None:
    wanting = pod("wants-cr", cpu="1", memory="1Gi", selector={CAPACITY_RESERVATION_ID: "cr-0a1b2c3d"})
    results = schedule(
        SchedulingInput(
            pods=[wanting],
            nodepools=[nodepool(requirements=_pool("on-demand"))],
            instance_types=_catalog(),
        )
    )
    assert not results.new_claims
    [error] = results.errors
    assert error.pod.name == "wants-cr"


def test_a_claim_on_a_reservation_does_not_grow_past_it_and_extra_pods_go_on_demand() -> None:
    # Two pods of 3 cpu: one m5.2xlarge (on-demand) could hold both, but the reserved m5.xlarge is free.
    results = schedule(
        SchedulingInput(
            pods=_big_pods(2),
            nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
            instance_types=_catalog(capacity=1),
        )
    )
    by_type = sorted((c.capacity_types[0], c.instance_types[0].name) for c in results.new_claims)
    assert by_type == [("on-demand", "m5.xlarge"), ("reserved", "m5.xlarge")]
    assert not results.errors


def test_a_nodepool_uses_only_the_reservations_its_node_class_selects() -> None:
    ours = replace(nodepool("ours", requirements=_pool("reserved", "on-demand")), node_class="with-cr")
    theirs = replace(nodepool("theirs", requirements=_pool("reserved", "on-demand")), node_class="plain")
    templates = own_reservations([ours, theirs], {"with-cr": {"cr-0a1b2c3d"}, "plain": set()})
    for template, expected in ((templates[0], ["reserved"]), (templates[1], ["on-demand"])):
        results = schedule(
            SchedulingInput(pods=_big_pods(1), nodepools=[template], instance_types=_catalog())
        )
        [claim] = results.new_claims
        assert claim.capacity_types == expected


def test_a_type_listed_by_two_node_classes_keeps_both_classes_reservations() -> None:
    plain = itype("m5.xlarge", "4", "16Gi", price=0.192)
    first = _reserved(plain, "cr-0000000000000000a", "test-zone-a", 1)
    second = _reserved(plain, "cr-0000000000000000b", "test-zone-b", 1)
    merged = with_reserved_offerings(with_reserved_offerings(None, first), second)
    assert sorted(o.reservation_id for o in merged.offerings if o.reservation_id) == [
        "cr-0000000000000000a",
        "cr-0000000000000000b",
    ]
    assert with_reserved_offerings(merged, first) is merged


def test_a_reservation_count_that_changes_between_passes_is_seen_at_once() -> None:
    """The counts are kept per catalog (by its type objects): a listing with a new count is a new one."""

    def reserved_claims(catalog: list[InstanceType]) -> int:
        results = schedule(
            SchedulingInput(
                pods=_big_pods(3),
                nodepools=[nodepool(requirements=_pool("reserved", "on-demand"))],
                instance_types=catalog,
            )
        )
        return sum(c.capacity_types == ["reserved"] for c in results.new_claims)

    one = _catalog(capacity=1)
    assert reserved_claims(one) == 1
    assert reserved_claims(one) == 1  # the same listing again: its own counts, not the last pass's
    assert reserved_claims(_catalog(capacity=3)) == 3
    assert reserved_claims(one) == 1
