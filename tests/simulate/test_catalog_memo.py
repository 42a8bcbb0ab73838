"""The provisioner's catalogs() keeps its answer only while the cloud lists the same types: an offering
EC2 refused is seen by the next pass, and gone again once the refusal expires."""

from __future__ import annotations

from fleetwright.local.simulate.runner import STATE_TABLE, state_client
from fleetwright.local.simulate.world import WorldSpec, build_world
from tests.support.simulate import nodepool


def _available(catalog: list, name: str) -> set[tuple[str, str]]:  # type: ignore[type-arg]
    [found] = [t for t in catalog if t.name == name]
    return {(o.zone, o.capacity_type) for o in found.offerings if o.available}


def test_a_refused_offering_shows_in_the_next_catalog_and_leaves_when_it_expires(spec_for) -> None:  # type: ignore[no-untyped-def]
    spec: WorldSpec = spec_for(nodepool(("m5.large", "c5.large")))
    with state_client() as client:
        world = build_world(spec, STATE_TABLE, client)
        catalog, accepted = world.provisioner.catalogs()
        before = _available(catalog, "m5.large")
        assert ("us-east-1a", "on-demand") in before
        assert "m5.large" in accepted["default"]
        again, _ = world.provisioner.catalogs()
        assert _available(again, "m5.large") == before

        world.cloud.unavailable.mark(
            "m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity", 60
        )
        refused, _ = world.provisioner.catalogs()
        assert _available(refused, "m5.large") == before - {("us-east-1a", "on-demand")}
        assert _available(refused, "c5.large") == _available(catalog, "c5.large")

        world.clock.sleep(61)
        assert _available(world.provisioner.catalogs()[0], "m5.large") == before
