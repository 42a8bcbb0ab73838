"""A NodeClaim being filled during one simulation."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model import resources as res
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.compat import instance_type_compatible, requirements_compatible
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

    def __post_init__(self) -> None:
        self._summarise()

    def _summarise(self) -> None:
        caps = [self.pool.capacity[i] for i in self.type_indices]
        self.skyline = vec.skyline(caps)
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
        requirements = self.requirements
        indices = self.type_indices
        narrowed = False
        if len(option):
            if not requirements_compatible(option, requirements):
                return False
            combined = requirements.intersect(option)
            if combined.by_key != requirements.by_key:
                types = self.pool.types
                indices = [i for i in indices if instance_type_compatible(types[i], combined)]
                requirements = combined
                narrowed = True
        if narrowed:
            new_total = vec.add(self.total, need)
            if not any(vec.fits(new_total, self.pool.capacity[i]) for i in indices):
                return False
        elif self.can_fit(need):
            new_total = vec.add(self.total, need)
        else:
            return False
        if self.pool.has_min_values and not min_values_hold(self.pool, requirements, indices, new_total):
            return False
        self.requirements = requirements
        self.total = new_total
        if narrowed:
            self.type_indices = indices
            self._summarise()
            self.reserve_limits()
        self.pods.append(pod)
        self.host_ports.extend(pod.host_ports)
        return True

    def fitting_indices(self) -> list[int]:
        """Candidate types that hold everything placed so far."""
        return [i for i in self.type_indices if vec.fits(self.total, self.pool.capacity[i])]


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
