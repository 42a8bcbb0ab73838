"""A claim with more compatible instance types than one launch offers records only those it offers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleetwright.catalog.bill import burst
from fleetwright.cloud.launch import MAX_INSTANCE_TYPES
from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType
from tests.support.provisioning import World, make_config, nodepool


def _on_demand_price(instance_type: InstanceType) -> float:
    offering = instance_type.cheapest(capacity_types=frozenset({wk.ON_DEMAND}))
    assert offering is not None
    return offering.price


def test_a_claim_records_the_cheapest_types_a_launch_offers_and_counts_its_size_by_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100 amd64 types with on-demand offerings and room for the pod: more than one launch offers. No
    # burstable types: those whose CPU credits would cost more leave the list (docs/scheduling.md).
    catalog = [
        t
        for t in world.cloud.instance_types()
        if t.labels.get(wk.ARCH) == "amd64"
        and t.cheapest(capacity_types=frozenset({wk.ON_DEMAND})) is not None
        and t.allocatable.get("cpu", 0) >= 2000
        and not t.labels.get(wk.INSTANCE_GPU_COUNT)
        and burst(t.name) is None
    ]
    ordered = sorted(catalog, key=_on_demand_price)
    chosen = ordered[:70] + ordered[-30:]  # the cheap ones, and large ones the launch will not offer
    written: list[Any] = []  # the records as created, before their launch
    create = world.state.nodeclaims.create
    monkeypatch.setattr(
        world.state.nodeclaims, "create", lambda r, **kw: written.append(copy.deepcopy(r)) or create(r, **kw)
    )
    world.pending(1)
    config = make_config(nodepool(instance_types=[t.name for t in chosen]))
    [launched] = world.provisioner(config).run_once().launched

    [record] = written
    assert record.id == launched.id
    assert world.state.nodeclaims.get(record.id).instance_types == record.instance_types  # type: ignore[union-attr]
    assert len(record.instance_types) == MAX_INSTANCE_TYPES
    by_name = {t.name: t for t in chosen}
    kept = [by_name[n] for n in record.instance_types]
    left = [t for t in chosen if t.name not in set(record.instance_types)]
    assert max(_on_demand_price(t) for t in kept) <= min(_on_demand_price(t) for t in left)
    # While in flight the claim counts against the NodePool's limits at the largest type it may launch.
    for resource in ("cpu", "memory"):
        assert record.capacity[resource] == max(t.capacity[resource] for t in kept)
    assert record.capacity["memory"] < max(t.capacity["memory"] for t in chosen)
    # And the launch offered EC2 nothing else.
    [instance] = world.instances()
    assert instance["InstanceType"] in record.instance_types
