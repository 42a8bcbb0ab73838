"""A claim's final form: the instance types that hold all its pods, cheapest by whole bill first.

The simulation keeps every compatible type a claim's pods fit on; this module turns a claim into the
:class:`~fleetwright.scheduling.types.NewNodeClaim` that is launched: its types priced and ordered, its
zone and labels, its share of capacity reservations. Static NodePools' claims (:mod:`.static`) are
finalized the same way.
"""

from __future__ import annotations

from fleetwright.catalog.bill import node_bill
from fleetwright.model import resources as res
from fleetwright.model.labels import ZONE, ZONE_ID
from fleetwright.model.quantity import CPU
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress
from fleetwright.scheduling.costs import credits
from fleetwright.scheduling.pools import Fitting, PreparedPool, remember
from fleetwright.scheduling.reservations import (
    ReservationLedger,
    pinned,
    reserved_offerings,
    without_reserved,
)
from fleetwright.scheduling.types import NewNodeClaim


def finalize(
    claim: ClaimInProgress, name: str, ledger: ReservationLedger | None = None
) -> NewNodeClaim | str:
    """The claim's instance types that hold all its pods, cheapest first, with zones and labels.

    With a ``ledger``, a claim that could use capacity reservations takes its share of them and is
    pinned to them, or falls back to its other capacity types when they are full; a string says why the
    claim cannot be launched at all.
    """
    pool = claim.pool
    requirements = claim.requirements
    fitting = _fitting(pool, requirements, claim.type_indices, claim.total)
    if ledger is not None and not ledger.empty:  # the claim's types are among the ledger's catalog
        offered = reserved_offerings(fitting.types, requirements)
        if offered:
            ids = sorted({o.reservation_id for _, o in offered})
            taken = ledger.take(ids)
            requirements = pinned(requirements, taken) if taken else without_reserved(requirements)
            fitting = _fitting(pool, requirements, claim.type_indices, claim.total)
            if not fitting.indices:
                return (
                    f"NodePool {pool.name}: capacity reservations {', '.join(ids)} are taken by nodes "
                    "planned before it, and the NodePool allows no other capacity type"
                )
    pod_requests = res.add(*(p.requests for p in claim.pods))
    fitting = _cheapest_by_bill(pool, requirements, fitting, pod_requests.get(CPU, 0))
    zones = fitting.zones
    if len(zones) == 1:
        zone = next(iter(zones))
        zone_labels = {ZONE: zone}
        zone_id = next((o.zone_id for t in fitting.types for o in t.offerings if o.zone == zone), "")
        if zone_id:
            zone_labels[ZONE_ID] = zone_id
        requirements = requirements.intersect(Requirements.from_labels(zone_labels))
    labels = {**pool.template.labels, **requirements.single_values()}
    cheapest = fitting.indices[0] if fitting.indices else None
    daemon = pool.daemon_overhead[cheapest] if cheapest is not None else {}
    price = pool.offerings(requirements).prices[cheapest] if cheapest is not None else None
    requests = res.add(pod_requests, daemon)
    return NewNodeClaim(
        name=name,
        nodepool=pool.name,
        instance_types=list(fitting.types),
        zones=sorted(zones),
        capacity_types=sorted(fitting.capacity_types, key=_capacity_type_order),
        labels=dict(sorted(labels.items())),
        taints=list(pool.template.taints),
        pods=sorted(claim.pods, key=lambda p: p.key),
        requests=requests,
        daemon_requests=dict(daemon),
        price=price if price is not None else 0.0,
        requirements=requirements,
        bill=node_bill(
            pool.types[cheapest].name if cheapest is not None else "",
            price or 0.0,
            pool.template.bill,
            requests.get(CPU, 0),
        ),
    )


def _cheapest_by_bill(pool: PreparedPool, requirements: Requirements, fitting: Fitting, cpu: int) -> Fitting:
    """``fitting`` without the burstable candidates whose CPU credits make them cost more than another.

    Candidates are listed by price and EC2 launches the cheapest it can (spot: one of the cheapest), so a
    burstable type whose baseline does not cover the pods' CPU (``cpu``) stays only when it is the
    cheapest by whole bill; every candidate priced below that one is dropped. Lists without burstable
    types, and NodePools with ``minValues`` (which the dropped types may count for), are unchanged.
    Only the burstable types and the first other candidate (the cheapest of the others by bill too) are
    priced; the answer is kept per list and CPU.
    """
    if fitting.burstable is None:
        terms = pool.credit_terms
        fitting.burstable = [k for k, i in enumerate(fitting.indices) if terms[i] is not None]
        fitting.steady = next((k for k, i in enumerate(fitting.indices) if terms[i] is None), -1)
    if not fitting.burstable or pool.has_min_values:
        return fitting
    found = fitting.by_bill.get(cpu)
    if found is None:
        found = remember(fitting.by_bill, cpu, _without_dearer(pool, requirements, fitting, cpu))
    return found


def _without_dearer(pool: PreparedPool, requirements: Requirements, fitting: Fitting, cpu: int) -> Fitting:
    """:func:`_cheapest_by_bill`'s list, computed."""
    offerings = pool.offerings(requirements)
    prices, terms, indices = offerings.prices, pool.credit_terms, fitting.indices
    burstable = fitting.burstable or []
    priced = burstable + ([fitting.steady] if fitting.steady >= 0 else [])
    bills = {k: pool.node_cost(indices[k], prices[indices[k]] or 0.0, cpu) for k in priced}
    best = min(bills, key=lambda k: (bills[k], k))
    dropped = {k for k in burstable if k > best and credits(terms[indices[k]], cpu)}
    dropped.update(range(best))
    if not dropped:
        return fitting
    kept = [i for k, i in enumerate(indices) if k not in dropped]
    zones = frozenset().union(*(offerings.zones[i] for i in kept))
    capacity_types = frozenset().union(*(offerings.capacity_types[i] for i in kept))
    return Fitting(kept, [pool.types[i] for i in kept], zones, capacity_types)


def _fitting(
    pool: PreparedPool, requirements: Requirements, indices: list[int], total: vec.Vector
) -> Fitting:
    """The priced types of ``indices`` that hold ``total`` (cheapest first), their zones and capacity types.

    Claims whose totals fall alike among the types' capacities share the answer; fit is checked once
    per distinct capacity.
    """
    table = pool.priced_types(requirements, indices)
    position = table.position(total) if table.entries else ()
    found = table.fitting.get(position)
    if found is None:
        offerings = pool.offerings(requirements)
        fits = [vec.fits(total, capacity) for capacity in table.capacities]
        chosen = [i for _, _, i, group in table.entries if fits[group]]
        zones: set[str] = set()
        capacity_types: set[str] = set()
        for i in chosen:
            if len(zones) < len(offerings.all_zones):
                zones.update(offerings.zones[i])
            if len(capacity_types) < len(offerings.all_capacity_types):
                capacity_types.update(offerings.capacity_types[i])
        found = Fitting(chosen, [pool.types[i] for i in chosen], frozenset(zones), frozenset(capacity_types))
        remember(table.fitting, position, found)
    return found


def _capacity_type_order(capacity_type: str) -> tuple[int, str]:
    order = {"spot": 0, "on-demand": 1, "reserved": 2}
    return (order.get(capacity_type, 9), capacity_type)
