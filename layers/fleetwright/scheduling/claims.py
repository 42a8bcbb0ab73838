"""A NodeClaim being filled during one simulation.

As in Karpenter, a claim keeps growing while one of its candidate types still holds its pods, and the
cheapest type that holds them is launched. One guard is added: a claim grows only into *growth types*,
the candidates whose price per copy of the pods' mix is at most ``OUTLIER_FACTOR`` times the median
over the NodePool's types. Greedy filling would otherwise drift, once a claim outgrows the largest
ordinary types, into rare and badly priced ones (``u7in-24tb``, accelerated ``*.48xlarge``) where one
node costs many times what two ordinary nodes would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model import resources as res
from fleetwright.model.labels import RESERVED
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.compat import instance_type_compatible, labels_defined
from fleetwright.scheduling.costs import EFFICIENCY_SLACK, LOWEST_COST
from fleetwright.scheduling.pools import PreparedPool, Summary


@dataclass(slots=True, eq=False)
class ClaimInProgress:
    """A new node under construction: its NodePool, narrowed requirements, candidate types and pods.

    ``type_indices`` are the NodePool's types compatible with ``requirements`` and within limits;
    ``skyline``/``max_capacity`` summarise their room so a fit check costs a few comparisons;
    ``cheapest`` is the cheapest candidate holding ``total``.
    """

    seq: int
    pool: PreparedPool
    requirements: Requirements
    type_indices: list[int]
    total: vec.Vector
    mix: vec.Vector  # the shape of the pods this claim is for: the summed needs of their group
    pods: list[Pod] = field(default_factory=list)
    host_ports: list[HostPort] = field(default_factory=list)
    reserved: res.ResourceList = field(default_factory=dict)
    skyline: list[vec.Vector] = field(default_factory=list)
    max_capacity: vec.Vector = ()
    growth: list[int] = field(default_factory=list)  # the candidates the claim may grow into
    open: bool = True  # still listed among the simulation's open claims
    settled: bool = False  # re-packed after the simulation (fleetwright.scheduling.repack): never grows
    # Holds pods that must share its node (required hostname pod affinity): it grows into every growth
    # type, as under FewerNodes, so the pods following its first one still fit whatever the packing.
    shared: bool = False
    # Counted against capacity reservations when opened: it takes no pod that would leave them behind.
    reserving: bool = False

    def __post_init__(self) -> None:
        if not self.settled:
            self._summarise()

    @property
    def hostname(self) -> str:
        """The claim's own hostname domain (a placeholder until the node registers)."""
        return f"nodeclaim-{self.seq}"

    def _summarise(self) -> None:
        self.growth, self.skyline, self.max_capacity = _summary(
            self.pool, self.requirements, self.type_indices, self.total, self.mix, self.shared
        )

    def share(self) -> None:
        """The claim now holds a pod others must join: it may grow into every growth type."""
        if not self.shared:
            self.shared = True
            self._summarise()

    def reserve_limits(self) -> None:
        """Count this claim against its NodePool's limits at its largest candidate (as Karpenter does)."""
        if self.pool.template.limits is None:
            return
        largest = dict(self.pool.largest_capacity(self.type_indices))
        self.pool.reserved = res.add(res.subtract(self.pool.reserved, self.reserved), largest)
        self.reserved = largest

    def can_fit(self, need: vec.Vector) -> bool:
        """True when some growth type has room for ``need`` on top of what the claim holds."""
        total = self.total
        maxc = self.max_capacity
        for i, amount in enumerate(need):
            if total[i] + amount > maxc[i]:
                return False
        return vec.fits_any(vec.add(total, need), self.skyline)

    def try_add(self, pod: Pod, need: vec.Vector, option: Requirements) -> bool:
        """Add the pod when its requirements, host ports and resources all fit; report success."""
        for port in pod.host_ports:
            if any(port.conflicts(other) for other in self.host_ports):
                return False
        requirements = self.requirements
        narrowed: list[int] | None = None
        if len(option):
            if not option.compatible(requirements) or not labels_defined(option, self.pool.requirements):
                return False
            combined = requirements.intersect(option)
            if combined.by_key != requirements.by_key:
                types = self.pool.types
                narrowed = [i for i in self.type_indices if instance_type_compatible(types[i], combined)]
                requirements = combined
        if narrowed is None:
            if not self.can_fit(need):
                return False
            new_total = vec.add(self.total, need)
            indices = self.type_indices
        else:
            new_total = vec.add(self.total, need)
            indices = narrowed
            if not growth_types(self.pool, requirements, indices, new_total, self.mix, self.shared):
                return False
        if self.pool.has_min_values and not min_values_hold(self.pool, requirements, indices, new_total):
            return False
        if self.reserving and not keeps_reservation(self.pool, requirements, indices, new_total):
            return False
        self.total = new_total
        self.pods.append(pod)
        self.host_ports.extend(pod.host_ports)
        if narrowed is not None:
            self.requirements = requirements
            self.type_indices = narrowed
            self._summarise()
            self.reserve_limits()
        return True


def keeps_reservation(
    pool: PreparedPool, requirements: Requirements, indices: list[int], total: vec.Vector
) -> bool:
    """True when some candidate holding ``total`` can still be bought as reserved capacity."""
    table = pool.offerings(requirements)
    if RESERVED not in table.all_capacity_types:
        return False
    capacity = pool.capacity
    return any(RESERVED in table.capacity_types[i] and vec.fits(total, capacity[i]) for i in indices)


def _summary(
    pool: PreparedPool,
    requirements: Requirements,
    indices: list[int],
    total: vec.Vector,
    mix: vec.Vector,
    shared: bool,
) -> Summary:
    """Growth types and skyline for a claim, shared by claims opened alike (same requirements and
    candidate list objects, total and mix): at scale most new claims hold one pod of a few shapes."""
    cache = pool.summaries
    key = (id(requirements), id(indices), total, mix, shared)
    cached = cache.get(key)
    if cached is not None and cached[0] is requirements and cached[1] is indices:
        return cached[2]
    growth = growth_types(pool, requirements, indices, total, mix, shared)
    skyline = vec.skyline(pool.capacity[i] for i in growth)
    summary = (growth, skyline, vec.elementwise_max(skyline, len(total)))
    cache[key] = (requirements, indices, summary)
    return summary


def growth_types(
    pool: PreparedPool,
    requirements: Requirements,
    indices: list[int],
    total: vec.Vector,
    mix: vec.Vector,
    shared: bool = False,
) -> list[int]:
    """The candidates that hold ``total`` and are not price outliers for ``mix``.

    When only outliers hold ``total`` (a pod that needs an unusual type), those are used. Under
    LowestCost only the efficient ones, unless the claim's pods must share one node (``shared``).
    """
    if pool.template.packing == LOWEST_COST and not shared:
        return efficient_types(pool, requirements, indices, total, mix)
    capacity = pool.capacity
    holding = [i for i in indices if vec.fits(total, capacity[i])]
    ordinary = pool.ordinary_types(requirements, mix)
    chosen = [i for i in holding if i in ordinary]
    return chosen or holding


def efficient_types(
    pool: PreparedPool, requirements: Requirements, indices: list[int], total: vec.Vector, mix: vec.Vector
) -> list[int]:
    """LowestCost packing: the candidates holding ``total`` within EFFICIENCY_SLACK of the best price
    per copy of ``mix`` among them (all that hold it when none is priced)."""
    capacity = pool.capacity
    allowed = set(indices)
    chosen: list[int] = []
    best = 0.0
    for cost, i in pool.unit_costs(requirements, mix):
        if i not in allowed or not vec.fits(total, capacity[i]):
            continue
        if not chosen:
            best = cost
        elif cost > best * (1 + EFFICIENCY_SLACK):
            break
        chosen.append(i)
    if not chosen:
        return [i for i in indices if vec.fits(total, capacity[i])]
    return sorted(chosen)


def min_values_hold(
    pool: PreparedPool, requirements: Requirements, indices: list[int], total: vec.Vector
) -> bool:
    """Karpenter's ``minValues``: enough distinct label values remain among the types that fit."""
    wanted = [r for r in requirements if r.min_values]
    if not wanted:
        return True
    fitting = [pool.types[i] for i in indices if vec.fits(total, pool.capacity[i])]
    for req in wanted:
        values = {it.labels.get(req.key) for it in fitting} - {None}
        if len(values) < (req.min_values or 0):
            return False
    return True
