"""Greedy packing guided by the fluid relaxation: pods of a few request classes onto cheap node types.

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

This module is the algorithm alone (request classes and options in, nodes out); :mod:`.repack` applies it
to a simulation's claims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.costs import CreditTerms, credits

# How far apart a node's CPU and memory shares may drift while it is filled; each is tried.
BALANCES = (0.01, 0.02, 0.05)
# A pattern is repeated up to x / REPEAT_DIVISOR times, x being the fluid solution's nodes of its type.
REPEAT_DIVISOR = 2
# When the fluid solution needs at most this many nodes, nodes are built one at a time (no repeats).
TAIL_NODES = 3.0
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
