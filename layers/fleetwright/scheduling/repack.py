"""LowestCost re-packing: the pods of a NodePool's unconstrained claims, packed again onto cheaper nodes.

First-fit decreasing fills each claim until one resource runs out: a node of the cheapest CPU type
(a1.metal) ends memory-bound at 80-86% CPU because the pods that came first were memory-heavy. The
cheapest packing instead mixes a CPU-rich and a memory-rich type and fills every node in both
resources. :func:`pack` does that greedily, node by node, guided by the *fluid* relaxation (CPU and
memory bought as if divisible):

- Each type sells ``(cpu, memory) / price``; the fluid optimum for a demand ``D`` buys at most two
  types, the two hull vertices around the direction of ``D`` on the upper-right convex hull of those
  points (computed once). Their equations give per-resource shadow prices ``pi`` (dual values: a
  node's room is worth exactly its price for both types, less for every other type).
- The next node is the type whose greedy filling is worth most per dollar (``pi`` · what it holds /
  price). Types are tried by the most they could be worth per dollar (their room, capped by their
  pod slots and by what is left, and while the shadow prices hold by a little more than the type's
  last filling was worth), stopping once that cannot beat the best filling found, so usually only
  one or two types are filled per node. A filling takes pods of the classes with the most
  remaining volume, while keeping the node's CPU and memory shares within ``balance`` of each other,
  so the node ends full in both; then anything that still fits.
- A node built for a type the fluid solution wants ``x`` of is repeated up to ``x / 2`` times (while
  its pods last), so a batch costs a few dozen fillings, not one per node; once the fluid solution
  needs at most ``TAIL_NODES`` nodes, nodes are built one at a time.

Three balance tolerances are tried and the cheapest result is kept (each run takes milliseconds).
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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from fleetwright.model import resources as res
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress, min_values_hold
from fleetwright.scheduling.costs import LOWEST_COST, CreditTerms, credits
from fleetwright.scheduling.pools import PreparedPool, offering_key, remember

# How far apart a node's CPU and memory shares may drift while it is filled; each is tried.
BALANCES = (0.01, 0.02, 0.05)
# A pattern is repeated up to x / REPEAT_DIVISOR times, x being the fluid solution's nodes of its type.
REPEAT_DIVISOR = 2
# When the fluid solution needs at most this many nodes, nodes are built one at a time (no repeats).
TAIL_NODES = 3.0
# Pods left out by limits are added to a re-packing in steps of 1/BISECTION_STEPS of them (or 1).
BISECTION_STEPS = 32
# A type's last filling, worth w per dollar, stands for at most w * STALE_SLACK of its next one
# (while the shadow prices hold): fillings only change as the pods left change, so most types
# are not filled again every node (see _Packer._best_node).
STALE_SLACK = 1.03


@dataclass(frozen=True, slots=True)
class Option:
    """A node type to pack onto: room for pods and $/h (``index``: the NodePool's type, -1 if none).

    ``price`` is the node's whole bill when its pods use all its CPU; a burstable type (``credits``, its
    :data:`~fleetwright.scheduling.costs.CreditTerms`) costs less when they request less (:meth:`cost`).
    """

    capacity: vec.Vector
    price: float
    index: int = -1
    credits: CreditTerms | None = None

    def cost(self, total: vec.Vector) -> float:
        """The bill of this node holding pods that request ``total``."""
        if self.credits is None:
            return self.price
        full = self.capacity[0]
        return self.price - credits(self.credits, full) + credits(self.credits, total[0])


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


@dataclass(frozen=True, slots=True)
class _HullPoint:
    cpu_per_dollar: float
    memory_per_dollar: float
    option: int

    @property
    def angle(self) -> float:
        return math.atan2(self.memory_per_dollar, self.cpu_per_dollar)


Nodes = list[tuple[int, list[int]]]  # (option index, pods per class) per node


def pack(
    classes: Sequence[vec.Vector],
    demand: Sequence[int],
    options: Sequence[Option],
    balances: Sequence[float] = BALANCES,
) -> Nodes:
    """Nodes (option, pods per class) holding ``demand[k]`` pods of each class ``classes[k]``, cheaply.

    Every class must fit some option; ``options`` should not dominate each other (see
    :func:`undominated`). Deterministic; the cheapest of the balance tolerances tried.
    """
    usable = [i for i, o in enumerate(options) if any(vec.fits(c, o.capacity) for c in classes)]
    prices: dict[vec.Vector, float] = {}
    best: tuple[float, Nodes] | None = None
    for balance in balances:
        nodes = _Packer(classes, demand, options, usable, balance).run()
        cost = nodes_cost(nodes, classes, options, prices)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, nodes)
    assert best is not None
    return best[1]


def nodes_cost(
    nodes: Nodes, classes: Sequence[vec.Vector], options: Sequence[Option], prices: dict[vec.Vector, float]
) -> float:
    """$/h of the nodes when each launches the cheapest option holding its pods (as claims do).

    ``prices`` caches the price per node total (nodes repeat).
    """
    cost = 0.0
    for _, counts in nodes:
        total = node_total(counts, classes)
        price = prices.get(total)
        if price is None:
            price = prices[total] = cheapest_price(total, options)
        cost += price
    return cost


def node_total(counts: Sequence[int], classes: Sequence[vec.Vector]) -> vec.Vector:
    """What a node holding ``counts[k]`` pods of each class requests."""
    total = [0] * len(classes[0])
    for need, n in zip(classes, counts, strict=True):
        if n:
            for d, amount in enumerate(need):
                total[d] += amount * n
    return tuple(total)


def cheapest_price(total: vec.Vector, options: Sequence[Option]) -> float:
    """The bill of the cheapest option with room for ``total`` (infinite when none has)."""
    return min(
        (o.price if o.credits is None else o.cost(total) for o in options if vec.fits(total, o.capacity)),
        default=math.inf,
    )


def undominated(options: Sequence[Option]) -> list[Option]:
    """Options no other beats (at least the room in every dim for at most the price), cheapest first.

    The cheapest option holding any set of pods is always among them.
    """
    ordered = sorted(options, key=lambda o: (o.price, tuple(-c for c in o.capacity)))
    kept: list[Option] = []
    # An option with the room of one seen before is beaten by it or by what beat it (many types share
    # their room): only new rooms are compared with the kept ones.
    # A burstable option (priced full) is beaten only by one costing at most its bill when idle.
    seen: set[vec.Vector] = set()
    for option in ordered:
        if option.capacity in seen and option.credits is None:
            continue
        seen.add(option.capacity)
        floor = option.price if option.credits is None else option.cost((0,) * len(option.capacity))
        if not any(vec.fits(option.capacity, k.capacity) and k.price <= floor for k in kept):
            kept.append(option)
    return kept


# A class still to place in a node being filled: index; cpu, memory and pod-slot needs; its other
# needs; its cpu and memory shares of the node, their sum (volume); whether cpu, memory leads.
_Live = tuple[int, int, int, int, vec.Vector, float, float, float, bool, bool]


class _Packer:
    """One greedy packing run (see the module docstring)."""

    def __init__(
        self,
        classes: Sequence[vec.Vector],
        demand: Sequence[int],
        options: Sequence[Option],
        usable: list[int],
        balance: float,
    ) -> None:
        self.classes = classes
        self.remaining = list(demand)
        self.options = options
        self.usable = usable
        self.balance = balance
        self.chain = self._hull()
        # What each option costs at the least (a burstable type's bill with idle pods).
        self.floors = [o.price if o.credits is None else o.cost((0,) * len(o.capacity)) for o in options]
        # Each option's last filling and what it was worth per dollar, under the shadow prices ``seen``.
        self.seen: tuple[float, float] | None = None
        self.worth: dict[int, tuple[float, list[int]]] = {}

    def run(self) -> Nodes:
        nodes: Nodes = []
        while any(self.remaining):
            demand = (self._remaining_total(0), self._remaining_total(1))
            fluid, duals = self._fluid(demand)
            tail = sum(x for _, x in fluid) <= TAIL_NODES
            if tail or duals != self.seen:  # last fillings stand for the next ones only away from the tail
                self.seen, self.worth = duals, {}
            chosen = self._best_node(self.usable, duals)
            assert chosen is not None and any(chosen[1]), "every class fits some option"
            option, counts = chosen
            x = next((x for i, x in fluid if i == option), None)
            if x is None:  # not a fluid type: as many nodes as the fluid solution's budget buys
                x = sum(n * self.options[i].price for i, n in fluid) / self.options[option].price
            copies = 1 if tail else max(1, int(x // REPEAT_DIVISOR))
            for k, n in enumerate(counts):
                if n:
                    copies = min(copies, self.remaining[k] // n)
            for k, n in enumerate(counts):
                self.remaining[k] -= n * copies
                if n and not self.remaining[k]:  # fillings that held a class now gone are void
                    self.worth = {i: w for i, w in self.worth.items() if not w[1][k]}
            nodes.extend((option, counts) for _ in range(copies))
        return nodes

    def _remaining_total(self, dim: int) -> int:
        return sum(c[dim] * n for c, n in zip(self.classes, self.remaining, strict=True))

    def _hull(self) -> list[_HullPoint]:
        """The upper-right convex hull of the options' (cpu, memory) per dollar, by angle descending.

        An option whose pod slots run out before its CPU or memory (for pods of the batch's average
        size) only sells the share it can fill.
        """
        pods = max(1, sum(self.remaining))
        mean = (self._remaining_total(0) / pods, self._remaining_total(1) / pods)
        points = []
        for i in self.usable:
            capacity = self.options[i].capacity
            copies = min((capacity[d] / mean[d] for d in (0, 1) if mean[d] > 0), default=math.inf)
            usable_share = min(1.0, capacity[2] / copies) if copies > 0 else 1.0
            price = self.options[i].price
            points.append(
                _HullPoint(capacity[0] * usable_share / price, capacity[1] * usable_share / price, i)
            )
        points.sort(key=lambda p: (p.cpu_per_dollar, p.memory_per_dollar, p.option))
        upper: list[_HullPoint] = []
        for point in points:
            while len(upper) >= 2 and _turn(upper[-2], upper[-1], point) >= 0:
                upper.pop()
            upper.append(point)
        top = max(range(len(upper)), key=lambda j: (upper[j].memory_per_dollar, upper[j].cpu_per_dollar))
        return upper[top:]

    def _fluid(self, demand: tuple[int, int]) -> tuple[list[tuple[int, float]], tuple[float, float]]:
        """The fluid optimum for ``demand``: nodes per option (one or two) and the shadow prices."""
        chain = self.chain
        angle = math.atan2(demand[1], demand[0])
        if angle >= chain[0].angle:  # memory-heavier than every hull point: memory decides
            return self._single(chain[0], 1, demand)
        if angle <= chain[-1].angle:  # CPU-heavier than every hull point: CPU decides
            return self._single(chain[-1], 0, demand)
        for a, b in pairwise(chain):
            if a.angle >= angle >= b.angle:
                # Dollars spent on a and on b so that they buy exactly the demand.
                det = a.cpu_per_dollar * b.memory_per_dollar - a.memory_per_dollar * b.cpu_per_dollar
                dollars_a = (demand[0] * b.memory_per_dollar - demand[1] * b.cpu_per_dollar) / det
                dollars_b = (a.cpu_per_dollar * demand[1] - a.memory_per_dollar * demand[0]) / det
                # Shadow prices making a dollar of either worth exactly a dollar.
                pi_cpu = (b.memory_per_dollar - a.memory_per_dollar) / det
                pi_memory = (a.cpu_per_dollar - b.cpu_per_dollar) / det
                return [
                    (a.option, max(0.0, dollars_a) / self.options[a.option].price),
                    (b.option, max(0.0, dollars_b) / self.options[b.option].price),
                ], (pi_cpu, pi_memory)
        raise AssertionError("the hull chain covers every angle between its ends")

    def _single(
        self, point: _HullPoint, dim: int, demand: tuple[int, int]
    ) -> tuple[list[tuple[int, float]], tuple[float, float]]:
        """One option bought for resource ``dim`` (0 CPU, 1 memory) alone."""
        per_dollar = point.cpu_per_dollar if dim == 0 else point.memory_per_dollar
        if per_dollar <= 0:
            return [(point.option, 0.0)], (0.0, 0.0)
        nodes = demand[dim] / per_dollar / self.options[point.option].price
        return [(point.option, nodes)], ((1 / per_dollar, 0.0) if dim == 0 else (0.0, 1 / per_dollar))

    def _best_node(self, candidates: list[int], duals: tuple[float, float]) -> tuple[int, list[int]] | None:
        """The candidate whose filling is worth most per dollar, with that filling.

        Candidates are tried by the most they could be worth per dollar (their room, capped by what
        is left to place and by their pod slots times the most valuable pod, and by STALE_SLACK times
        what their last filling under the same shadow prices was worth); the search stops once that
        cannot beat the best filling found. The last fillings are not a true bound, but they move
        little from one node to the next; without them every round filled dozens of types.
        """
        pi_cpu, pi_memory = duals
        values = [pi_cpu * c[0] + pi_memory * c[1] for c in self.classes]
        left = sum(v * n for v, n in zip(values, self.remaining, strict=True))
        most = max((v for v, n in zip(values, self.remaining, strict=True) if n), default=0.0)
        known = self.worth
        worth = []
        for i in candidates:
            capacity = self.options[i].capacity
            upper = min(pi_cpu * capacity[0] + pi_memory * capacity[1], left, capacity[2] * most)
            last = known[i][0] * STALE_SLACK if i in known else math.inf
            worth.append((min(upper / self.floors[i], last), i))
        worth.sort(key=lambda w: (-w[0], w[1]))
        best: tuple[tuple[float, float], int, list[int]] | None = None
        for upper, i in worth:
            if best is not None and upper < best[0][0]:
                break
            counts = self._fill(self.options[i].capacity)
            value = sum(v * n for v, n in zip(values, counts, strict=True))
            option = self.options[i]
            price = option.price if option.credits is None else option.cost(node_total(counts, self.classes))
            key = (value / price, sum(counts) / price)
            known[i] = (key[0], counts)
            if best is None or key > best[0]:
                best = (key, i, counts)
        return (best[1], best[2]) if best is not None else None

    def _live(self, capacity: vec.Vector) -> list[_Live]:
        """The classes with pods left to place that fit an empty node of ``capacity``."""
        scale_cpu = 1 / capacity[0] if capacity[0] > 0 else 0.0
        scale_memory = 1 / capacity[1] if capacity[1] > 0 else 0.0
        live: list[_Live] = []
        for k, need in enumerate(self.classes):
            if self.remaining[k] > 0 and vec.fits(need, capacity):
                cpu_share, memory_share = need[0] * scale_cpu, need[1] * scale_memory
                live.append(
                    (k, need[0], need[1], need[2], need[3:], cpu_share, memory_share,
                     cpu_share + memory_share, cpu_share >= memory_share, memory_share >= cpu_share)
                )  # fmt: skip
        return live

    def _fill(self, capacity: vec.Vector) -> list[int]:
        """Pods per class for one node: most remaining volume first, CPU and memory kept in balance.

        Works on CPU, memory and pod slots as plain integers (the hot loop of a packing); a class
        asking for more dimensions is checked against the rest of the room too.
        """
        remaining = self.remaining
        counts = [0] * len(self.classes)
        room_cpu, room_memory, room_pods = capacity[0], capacity[1], capacity[2]
        rest = capacity[3:]
        live = self._live(capacity)
        balance = self.balance
        used_cpu = used_memory = 0.0
        relaxed = False
        while live:
            drift = used_cpu - used_memory
            cpu_ahead = not relaxed and drift > balance
            memory_ahead = not relaxed and drift < -balance
            chosen = None
            best_weight = -1.0
            stale = False
            for entry in live:
                k, cpu, memory, pods, more, _, _, volume, cpu_heavy, memory_heavy = entry
                left = remaining[k] - counts[k]
                if left <= 0 or cpu > room_cpu or memory > room_memory or pods > room_pods:
                    stale = True  # rooms only shrink and counts only grow: it never fits again
                    continue
                if more and not vec.fits(more, rest):
                    stale = True
                    continue
                if (cpu_ahead and cpu_heavy) or (memory_ahead and memory_heavy):
                    continue
                weight = left * volume
                if weight > best_weight:
                    chosen, best_weight = entry, weight
            if stale:
                live = _still_fitting(live, remaining, counts, (room_cpu, room_memory, room_pods, *rest))
            if chosen is None:
                if relaxed or not live:
                    return counts
                relaxed = True  # nothing keeps the balance: take whatever still fits
                continue
            relaxed = False
            k = chosen[0]
            counts[k] += 1
            room_cpu -= chosen[1]
            room_memory -= chosen[2]
            room_pods -= chosen[3]
            if chosen[4]:
                rest = vec.sub(rest, chosen[4])
            used_cpu += chosen[5]
            used_memory += chosen[6]
        return counts


def _still_fitting(
    live: list[_Live], remaining: Sequence[int], counts: Sequence[int], room: vec.Vector
) -> list[_Live]:
    """The classes of ``live`` with pods left that still fit ``room`` (cpu, memory, pods, then the rest)."""
    room_cpu, room_memory, room_pods, rest = room[0], room[1], room[2], room[3:]
    return [
        e
        for e in live
        if remaining[e[0]] > counts[e[0]]
        and e[1] <= room_cpu
        and e[2] <= room_memory
        and e[3] <= room_pods
        and (not e[4] or vec.fits(e[4], rest))
    ]


def _turn(o: _HullPoint, a: _HullPoint, b: _HullPoint) -> float:
    """Cross product of (a - o) and (b - o): >= 0 when a is not above the segment o-b."""
    return (a.cpu_per_dollar - o.cpu_per_dollar) * (b.memory_per_dollar - o.memory_per_dollar) - (
        a.memory_per_dollar - o.memory_per_dollar
    ) * (b.cpu_per_dollar - o.cpu_per_dollar)


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
