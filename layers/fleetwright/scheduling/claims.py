"""A NodeClaim being filled during one simulation.

A claim grows while one of its *growth* types still holds its pods. Growth types are the candidates
that, filled with copies of the pods' mix, cost at most ``EFFICIENCY_SLACK`` more per copy than the best
candidate (counting ``NODE_FIXED_COST_PER_HOUR`` per node). Without this rule greedy filling drifts
into rare, oversized types (``u-*``, ``*.metal``) whose price per pod is far worse than two ordinary
nodes. Every compatible type that holds the final pods stays a launch candidate, cheapest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model import resources as res
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.compat import instance_type_compatible, requirements_compatible
from fleetwright.scheduling.costs import EFFICIENCY_SLACK
from fleetwright.scheduling.pools import PreparedPool


@dataclass(slots=True, eq=False)
class ClaimInProgress:
    """A new node under construction: its NodePool, narrowed requirements, candidate types and pods.

    ``type_indices`` are the NodePool's types compatible with ``requirements`` and within limits;
    ``skyline``/``max_capacity`` summarise their room so a fit check costs a few comparisons.
    """

    seq: int
    pool: PreparedPool
    requirements: Requirements
    type_indices: list[int]
    total: vec.Vector
    skyline: list[vec.Vector] = field(default_factory=list)
    max_capacity: vec.Vector = ()
    pods: list[Pod] = field(default_factory=list)
    host_ports: list[HostPort] = field(default_factory=list)
    reserved: res.ResourceList = field(default_factory=dict)
    mix: vec.Vector = ()  # the direction of the pods this claim is for (sum of their group's needs)
    growth: list[int] = field(default_factory=list)  # the efficient candidates the claim may grow into

    def __post_init__(self) -> None:
        self._summarise()

    def _summarise(self) -> None:
        self.growth = efficient_types(self.pool, self.requirements, self.type_indices, self.total, self.mix)
        self.skyline = vec.skyline(self.pool.capacity[i] for i in self.growth)
        self.max_capacity = vec.elementwise_max(self.skyline, len(self.total))

    def reserve_limits(self) -> None:
        """Count this claim against its NodePool's limits at its largest candidate (as Karpenter does)."""
        if self.pool.template.limits is None:
            return
        names = self.pool.template.limits.keys()
        largest = {
            n: max((self.pool.raw_capacity[i].get(n, 0) for i in self.type_indices), default=0) for n in names
        }
        self.pool.reserved = res.add(res.subtract(self.pool.reserved, self.reserved), largest)
        self.reserved = largest

    def can_fit(self, need: vec.Vector) -> bool:
        """True when some candidate type has room for ``need`` on top of what the claim holds."""
        total = self.total
        maxc = self.max_capacity
        for i, amount in enumerate(need):
            if total[i] + amount > maxc[i]:
                return False
        new_total = vec.add(total, need)
        return vec.fits_any(new_total, self.skyline)

    def try_add(self, pod: Pod, need: vec.Vector, option: Requirements) -> bool:
        """Add the pod when its requirements, host ports and resources all fit; report success."""
        for port in pod.host_ports:
            if any(port.conflicts(other) for other in self.host_ports):
                return False
        if len(option):
            if not requirements_compatible(option, self.requirements):
                return False
            combined = self.requirements.intersect(option)
            if combined.by_key != self.requirements.by_key:
                return self._add_narrowed(pod, need, combined)
        if not self.can_fit(need):
            return False
        new_total = vec.add(self.total, need)
        if self.pool.has_min_values and not min_values_hold(
            self.pool, self.requirements, self.type_indices, new_total
        ):
            return False
        self._commit(pod, new_total)
        return True

    def _add_narrowed(self, pod: Pod, need: vec.Vector, requirements: Requirements) -> bool:
        """Add a pod whose requirements narrow the claim (fewer zones, types, ...)."""
        types = self.pool.types
        indices = [i for i in self.type_indices if instance_type_compatible(types[i], requirements)]
        new_total = vec.add(self.total, need)
        growth = efficient_types(self.pool, requirements, indices, new_total, self.mix)
        if not growth:
            return False
        if self.pool.has_min_values and not min_values_hold(self.pool, requirements, indices, new_total):
            return False
        self.requirements = requirements
        self.type_indices = indices
        self._commit(pod, new_total)
        self._summarise()
        self.reserve_limits()
        return True

    def _commit(self, pod: Pod, new_total: vec.Vector) -> None:
        self.total = new_total
        self.pods.append(pod)
        self.host_ports.extend(pod.host_ports)

    def fitting_indices(self) -> list[int]:
        """Candidate types that hold everything placed so far."""
        return [i for i in self.type_indices if vec.fits(self.total, self.pool.capacity[i])]


def efficient_types(
    pool: PreparedPool, requirements: Requirements, indices: list[int], total: vec.Vector, mix: vec.Vector
) -> list[int]:
    """The candidates that hold ``total`` and cost at most EFFICIENCY_SLACK more per copy of ``mix``."""
    allowed = set(indices)
    capacity = pool.capacity
    best: float | None = None
    chosen: list[int] = []
    for cost, i in pool.cost_ranking(requirements, mix):
        if best is not None and cost > best * (1 + EFFICIENCY_SLACK):
            break
        if i in allowed and vec.fits(total, capacity[i]):
            if best is None:
                best = cost
            chosen.append(i)
    return chosen


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
