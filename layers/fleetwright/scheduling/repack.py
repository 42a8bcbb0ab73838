"""LowestCost re-packing: the pods of a NodePool's unconstrained claims, packed again onto cheaper nodes.

First-fit decreasing fills each claim until one resource runs out: a node of the cheapest CPU type
(a1.metal) ends memory-bound at 80-86% CPU because the pods that came first were memory-heavy. The
cheapest packing instead mixes a CPU-rich and a memory-rich type and fills every node in both
resources; :func:`fleetwright.scheduling.packing.pack` computes such a packing (see that module).
:func:`repack` applies it to the claims whose pods are all free to move (no topology constraint, not
counted by another pod's, no host ports, no extended resources) in NodePools with ``LowestCost``
packing (the default), per set of claims sharing NodePool and requirements, and only when the result
is cheaper or places more pods:

- ``minValues``: each type's room is cut to what enough types of other values also hold, so every
  node packed keeps enough values among the types that fit it.
- ``limits``: a new claim keeps only the candidates no larger, in a limited resource, than the
  cheapest that holds its pods, and counts at the largest of them (as every claim does). The set's
  claims are released first; the new ones must fit in what that leaves. The first simulation counts
  claims at their largest candidate while they grow, so it often refuses pods for limits that the
  re-packed claims leave room for: those pods (when free to move, with the same requirements) are
  packed with the set, as many as fit (largest first, by bisection).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from fleetwright.model import resources as res
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress, min_values_hold
from fleetwright.scheduling.costs import LOWEST_COST
from fleetwright.scheduling.packing import BALANCES, Option, cheapest_price, node_total, pack, undominated
from fleetwright.scheduling.pools import PreparedPool, offering_key, remember

# Pods left out by limits are added to a re-packing in steps of 1/BISECTION_STEPS of them (or 1).
BISECTION_STEPS = 32


def launch_option(pool: PreparedPool, i: int, price: float) -> Option:
    """Type ``i`` of the pool bought at ``price``, as an option: its room and its whole bill when full."""
    capacity = pool.capacity[i]
    terms = pool.credit_terms[i]
    return Option(capacity, pool.node_cost(i, price, capacity[0]), i, terms)


def _undominated_options(
    pool: PreparedPool, requirements: Requirements, priced: list[int], prices: Sequence[float | None]
) -> list[Option]:
    """The undominated launch options of the ``priced`` types (the cheapest type holding any pods is
    among them), kept on the pool per offering key and list: re-packings of a run, and of the runs
    sharing the pool's tables, ask for the same few. Never modify the list returned."""
    key = (*offering_key(requirements), tuple(priced))
    cached: list[Option] | None = pool.launch_options.get(key)
    if cached is None:
        cached = remember(
            pool.launch_options, key, undominated([launch_option(pool, i, prices[i] or 0.0) for i in priced])
        )
    return cached


def repack(
    claims: list[ClaimInProgress],
    needs: Mapping[str, vec.Vector],
    movable: Callable[[Pod], bool],
    unplaced: Sequence[Pod] = (),
    joins: Callable[[Pod, ClaimInProgress], bool] | None = None,
) -> list[ClaimInProgress]:
    """The claims with those of LowestCost NodePools re-packed where that is cheaper (see the module).

    Claims are re-packed per NodePool and requirements; the new claims take the place of the first one
    of their set, with fresh sequence numbers after the existing ones. In a NodePool with limits, the
    ``unplaced`` pods that ``joins`` accepts for a set (free to move, same requirements) are packed
    with it as far as the room the re-packing frees within the limits allows.
    """
    buckets: dict[tuple[int, str], list[ClaimInProgress]] = {}
    for claim in claims:
        pool = claim.pool
        if pool.template.packing != LOWEST_COST or claim.settled:
            continue
        if not all(movable(p) and not any(needs[p.key][3:]) for p in claim.pods):
            continue
        buckets.setdefault((id(pool), claim.requirements.describe()), []).append(claim)
    replaced: dict[int, list[ClaimInProgress]] = {}  # id of a set's first claim -> its new claims
    dropped: set[int] = set()
    taken: set[str] = set()  # unplaced pods placed by a re-packing
    seq = max((c.seq for c in claims), default=-1) + 1
    ordered = sorted(buckets.values(), key=lambda b: (-b[0].pool.template.weight, b[0].pool.name))
    for bucket in ordered:
        extra: list[Pod] = []
        if bucket[0].pool.template.limits is not None and joins is not None:
            extra = [
                p
                for p in unplaced
                if p.key not in taken and movable(p) and not any(needs[p.key][3:]) and joins(p, bucket[0])
            ]
        new_claims = _repack_bucket(bucket, needs, seq, extra)
        if new_claims is not None:
            seq += len(new_claims)
            replaced[id(bucket[0])] = new_claims
            dropped.update(id(c) for c in bucket)
            taken.update(p.key for c in new_claims for p in c.pods)
    if not replaced:
        return claims
    out: list[ClaimInProgress] = []
    for claim in claims:
        if id(claim) in replaced:
            out.extend(replaced[id(claim)])
        elif id(claim) not in dropped:
            out.append(claim)
    return out


def _repack_bucket(
    bucket: list[ClaimInProgress], needs: Mapping[str, vec.Vector], seq: int, extra: Sequence[Pod] = ()
) -> list[ClaimInProgress] | None:
    """New claims for the pods of ``bucket`` (same pool and requirements) and as many of ``extra`` as
    the NodePool's limits allow, or None when that neither places more pods nor costs less.

    Each new claim keeps the candidates that hold its pods (under limits, only those no larger than
    the cheapest in a limited resource), with enough of them for ``minValues``; under limits, the new
    claims together count no more than the limits leave once the claims they replace are released.
    """
    first = bucket[0]
    pool = first.pool
    requirements = first.requirements
    prices = pool.prices(requirements)
    priced = sorted({i for c in bucket for i in c.type_indices if prices[i] is not None})
    options = cheapest = _undominated_options(pool, requirements, priced, prices)
    if pool.has_min_values:
        fronts = _value_fronts(pool, requirements, priced)
        shrunk = [
            Option(_min_values_room(pool, fronts, o.index), o.price, o.index, o.credits) for o in options
        ]
        options = undominated([o for o in shrunk if any(o.capacity)])
    if not options:
        return None
    by_class = _pods_by_class(bucket, needs)
    required = {c: len(pods) for c, pods in by_class.items()}
    if not all(any(vec.fits(c, o.capacity) for o in options) for c in by_class):
        return None
    extra_classes = _add_extra(by_class, extra, needs, options)
    classes = sorted(by_class, reverse=True)
    current = sum(cheapest_price(claim.total, cheapest) for claim in bucket)
    limits = pool.template.limits
    released = res.add(*(c.reserved for c in bucket))
    pool.reserved = res.subtract(pool.reserved, released)  # the bucket's claims make way while planning
    try:
        nodes = _plan_most(pool, requirements, priced, prices, classes, required, extra_classes, options)
    finally:
        pool.reserved = res.add(pool.reserved, released)
    if nodes is None:
        return None
    placed = sum(sum(counts) for _, counts, _ in nodes)
    if placed == sum(required.values()) and _planned_cost(nodes, cheapest) >= current - 1e-9:
        return None
    new_claims = _claims_for(nodes, classes, by_class, first, seq)
    if limits is not None:
        reserved = res.add(*(c.reserved for c in new_claims))
        pool.reserved = res.add(res.subtract(pool.reserved, released), reserved)
    return new_claims


_Node = tuple[list[int], list[int], vec.Vector]  # candidates, pods per class, total


def _claims_for(
    nodes: Sequence[_Node],
    classes: Sequence[vec.Vector],
    by_class: Mapping[vec.Vector, list[Pod]],
    first: ClaimInProgress,
    seq: int,
) -> list[ClaimInProgress]:
    """A closed claim per planned node, numbered from ``seq``, with its share of each class's pods;
    under limits each reserves the largest of its candidates."""
    pool, requirements, limits = first.pool, first.requirements, first.pool.template.limits
    taken = dict.fromkeys(classes, 0)
    new_claims: list[ClaimInProgress] = []
    for indices, counts, total in nodes:
        pods = []
        for c, n in zip(classes, counts, strict=True):
            pods.extend(by_class[c][taken[c] : taken[c] + n])
            taken[c] += n
        claim = ClaimInProgress(
            seq + len(new_claims), pool, requirements, indices, total, first.mix, pods=pods, settled=True
        )
        claim.open = False
        if limits is not None:
            claim.reserved = _largest(pool, indices, limits)
        new_claims.append(claim)
    return new_claims


def _pods_by_class(
    bucket: Sequence[ClaimInProgress], needs: Mapping[str, vec.Vector]
) -> dict[vec.Vector, list[Pod]]:
    """The bucket's pods grouped by what they request, each group in pod-key order."""
    by_class: dict[vec.Vector, list[Pod]] = {}
    for claim in bucket:
        for p in claim.pods:
            by_class.setdefault(needs[p.key], []).append(p)
    for members in by_class.values():
        members.sort(key=lambda p: p.key)
    return by_class


def _add_extra(
    by_class: dict[vec.Vector, list[Pod]],
    extra: Sequence[Pod],
    needs: Mapping[str, vec.Vector],
    options: Sequence[Option],
) -> list[vec.Vector]:
    """Adds the extra pods some option holds to their classes; the class of each, in their order."""
    extra_classes: list[vec.Vector] = []
    for p in extra:
        need = needs[p.key]
        if need in by_class or any(vec.fits(need, o.capacity) for o in options):
            by_class.setdefault(need, []).append(p)
            extra_classes.append(need)
    return extra_classes


def _planned_cost(nodes: Sequence[_Node], options: Sequence[Option]) -> float:
    """$/h of planned nodes, each the cheapest option holding its total (nodes repeat: priced once)."""
    node_prices: dict[vec.Vector, float] = {}
    cost = 0.0
    for _, _, total in nodes:
        price = node_prices.get(total)
        if price is None:
            price = node_prices[total] = cheapest_price(total, options)
        cost += price
    return cost


def _plan_most(
    pool: PreparedPool,
    requirements: Requirements,
    priced: Sequence[int],
    prices: Sequence[float | None],
    classes: Sequence[vec.Vector],
    required: Mapping[vec.Vector, int],
    extra: Sequence[vec.Vector],
    options: Sequence[Option],
) -> list[_Node] | None:
    """Nodes for the required pods and as many of the ``extra`` ones (a prefix, by bisection) as the
    limits allow; None when even the required pods cannot be planned.

    The bisection packs with one balance tolerance; the prefix found is packed again with all of them
    and that packing is kept when it still fits the limits.
    """

    def attempt(count: int, balances: Sequence[float] = BALANCES) -> list[_Node] | None:
        demand = dict(required)
        for c in extra[:count]:
            demand[c] = demand.get(c, 0) + 1
        counts = [demand.get(c, 0) for c in classes]
        return _plan(pool, requirements, priced, prices, classes, counts, options, balances)

    best = attempt(len(extra))
    if best is not None or not extra:
        return best
    probe = (BALANCES[1],)
    low, high = 0, len(extra)  # low is assumed to plan, high does not
    while high - low > max(1, len(extra) // BISECTION_STEPS):
        middle = (low + high) // 2
        found = attempt(middle, probe)
        if found is None:
            high = middle
        else:
            low, best = middle, found
    if best is None:
        return attempt(0)
    return attempt(low) or best


def _plan(
    pool: PreparedPool,
    requirements: Requirements,
    priced: Sequence[int],
    prices: Sequence[float | None],
    classes: Sequence[vec.Vector],
    demand: Sequence[int],
    options: Sequence[Option],
    balances: Sequence[float] = BALANCES,
) -> list[_Node] | None:
    """Nodes for ``demand[k]`` pods of each class, or None when a node cannot keep ``minValues`` or
    the nodes would count more than the NodePool's limits leave."""
    nodes: list[_Node] = []
    # Nodes repeat: alike totals share one candidate list, which also lets finalizing the claims
    # look their instance types up once per list.
    lists: dict[vec.Vector, list[int] | None] = {}
    for _, counts in pack(classes, demand, options, balances):
        total = node_total(counts, classes)
        if total in lists:
            indices = lists[total]
        else:
            indices = lists[total] = _candidates(pool, requirements, priced, total, prices)
        if indices is None:
            return None
        nodes.append((indices, counts, total))
    limits = pool.template.limits
    if limits is not None:
        remaining = pool.remaining_limits() or {}
        used = res.add(*(_largest(pool, indices, limits) for indices, _, _ in nodes))
        if any(used.get(n, 0) > left for n, left in remaining.items()):
            return None
    return nodes


def _largest(pool: PreparedPool, indices: Sequence[int], limits: Mapping[str, int]) -> res.ResourceList:
    """What a claim with these candidates counts against the limits: its largest candidate's capacity."""
    return res.maximum({n: pool.raw_capacity[i].get(n, 0) for n in limits} for i in indices)


def _candidates(
    pool: PreparedPool,
    requirements: Requirements,
    indices: Sequence[int],
    total: vec.Vector,
    prices: Sequence[float | None],
) -> list[int] | None:
    """A re-packed claim's candidate types: those of ``indices`` holding ``total``.

    Under limits (which count a claim at its largest candidate), only the types no larger in a limited
    resource than the cheapest that holds ``total``; then, cheapest first, as many more as ``minValues``
    needs. None when ``minValues`` cannot hold.
    """
    fitting = sorted(
        (price, i) for i in indices if (price := prices[i]) is not None and vec.fits(total, pool.capacity[i])
    )
    if not fitting:
        return None
    limits = pool.template.limits
    if limits is None:
        chosen = [i for _, i in fitting]
    else:
        anchor = pool.raw_capacity[fitting[0][1]]
        chosen = [
            i for _, i in fitting if all(pool.raw_capacity[i].get(n, 0) <= anchor.get(n, 0) for n in limits)
        ]
    if pool.has_min_values:
        others = iter([i for _, i in fitting if i not in set(chosen)])
        while not min_values_hold(pool, requirements, chosen, total):
            more = next(others, None)
            if more is None:
                return None
            chosen.append(more)
    return sorted(chosen)


Fronts = list[tuple[str, int, dict[str, list[vec.Vector]]]]  # (key, minValues, value -> largest rooms)


def _value_fronts(pool: PreparedPool, requirements: Requirements, indices: Sequence[int]) -> Fronts:
    """Per ``minValues`` requirement, each label value's largest rooms (none holds another)."""
    fronts: Fronts = []
    for req in requirements:
        if not req.min_values:
            continue
        by_value: dict[str, list[vec.Vector]] = {}
        for i in indices:
            value = pool.types[i].labels.get(req.key)
            if value is not None:
                by_value.setdefault(value, []).append(pool.capacity[i])
        largest = {
            value: [c for c in rooms if not any(c != o and vec.fits(c, o) for o in rooms)]
            for value, rooms in by_value.items()
        }
        fronts.append((req.key, req.min_values, largest))
    return fronts


def _min_values_room(pool: PreparedPool, fronts: Fronts, i: int) -> vec.Vector:
    """The part of type ``i``'s room that enough other label values also hold for ``minValues``.

    For each requirement with ``minValues: N``, the room is cut down to what ``N - 1`` types of other
    values (those sharing most of it) also hold, so any node filled within it keeps N values among
    the types that fit. All zero when too few other values exist.
    """
    room = pool.capacity[i]
    for key, min_values, largest in fronts:
        own = pool.types[i].labels.get(key)
        shared: list[tuple[float, vec.Vector]] = []  # per other value, the most of the room it holds
        for value, rooms in largest.items():
            if value == own:
                continue
            overlaps = [tuple(min(a, b) for a, b in zip(room, c, strict=True)) for c in rooms]
            shared.append(max((_share(o, room), o) for o in overlaps))
        wanted = min_values - (1 if own is not None else 0)
        if len(shared) < wanted:
            return tuple(0 for _ in room)
        for _, box in sorted(shared, reverse=True)[: max(0, wanted)]:
            room = tuple(min(a, b) for a, b in zip(room, box, strict=True))
    return room


def _share(part: vec.Vector, whole: vec.Vector) -> float:
    """The smallest share of ``whole`` that ``part`` covers over the dims ``whole`` has."""
    return min((p / w for p, w in zip(part, whole, strict=True) if w > 0), default=0.0)
