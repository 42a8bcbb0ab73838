"""NodePools prepared for one simulation: their requirements, usable instance types and overheads.

Preparing a pool (which catalog types its requirements allow, each one's room once its DaemonSets are
served, its offering and price tables) is the same work for every simulation a provisioning pass or a
consolidation round builds while the NodePool, its node class, the catalog and the DaemonSets stay as they
are. :func:`prepare_pool` therefore keeps the last few results (:data:`POOL_CACHE_SIZE`) in a process-wide
cache, keyed on everything it reads:

- the NodePool's own fields that shape its nodes (name, requirements, labels, taints, the node class's AMI
  family, kubelet settings and bill view), compared by value (their ``repr``);
- the catalog's instance types by identity: the cache entry holds them, so an id in the key is always
  the same live object. Instance types and offerings are frozen, and whoever lists them builds a new
  object when anything about one changes: an offering refused by EC2 (marked ``available=False`` from the
  unavailable-offerings cache), a price refresh, a reservation's remaining count, a node class's kubelet
  settings. A changed type is a different key, never a stale entry;
- the DaemonSets' requests, node selection, tolerations and host ports, by value;
- the simulation's resource dimensions.

What a simulation changes (limits reserved by its claims, the NodePool's usage and limits, its packing)
stays on its own :class:`PreparedPool`: only the derived tables are shared, and those are pure functions of
the key. Their per-query caches are bounded too (:data:`TABLE_CACHE_SIZE`, :data:`MIX_CACHE_SIZE` for the
tables per pod mix; oldest dropped first), so a process that lives across many invocations (a warm Lambda)
does not grow without end. A cluster with more NodePools than the cache holds still gets right answers:
its pools are prepared again, as every simulation did before.

The module is longer than the package's other modules (about 600 lines) on purpose: the cache key
(:func:`_pool_key`) must name everything :func:`_prepare` reads and everything the tables
:class:`PreparedPool` memoizes depend on, and checking that takes the three side by side.
"""

from __future__ import annotations

import contextlib
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fleetwright.catalog.bill import burst
from fleetwright.catalog.os_family import for_ami_family, is_windows, os_labels
from fleetwright.model import resources as res
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    NODEPOOL,
    ZONE,
    ZONE_ID,
)
from fleetwright.model.legacy_labels import normalize_labels, normalize_pod, normalize_requirements
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.quantity import CPU
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import tolerates_all
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.compat import (
    allowed_offerings,
    instance_type_compatible,
    requirement_conflicts,
    requirements_compatible,
)
from fleetwright.scheduling.costs import OUTLIER_FACTOR, CreditTerms, credits, unit_cost
from fleetwright.scheduling.types import NODES, NodePoolTemplate

# The labels an offering decides: requirements alike on these share one offering table.
OFFERING_KEYS = (
    ZONE,
    ZONE_ID,
    CAPACITY_TYPE,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
)


@dataclass(slots=True, eq=False)
class OptionMatch:
    """What a NodePool offers a pod with one set of node requirements.

    ``type_indices`` index :attr:`PreparedPool.types`; empty with a ``reason`` when nothing matches.
    """

    requirements: Requirements
    type_indices: list[int]
    reason: str = ""


@dataclass(slots=True, eq=False)
class OfferingTable:
    """Per instance type of a pool: cheapest allowed price, allowed zones and capacity types."""

    prices: list[float | None]
    zones: list[frozenset[str]]
    capacity_types: list[frozenset[str]]
    all_zones: set[str]
    all_capacity_types: set[str]
    zone_ids: list[frozenset[str]] = field(default_factory=list)  # per type, ids of the allowed zones


Summary = tuple[list[int], list[vec.Vector], vec.Vector]  # a claim's growth types, their skyline, its max


@dataclass(slots=True, eq=False)
class Fitting:
    """The priced types that hold a claim's pods, cheapest first, and their zones and capacity types."""

    indices: list[int]
    types: list[InstanceType]
    zones: frozenset[str]
    capacity_types: frozenset[str]
    # Positions in ``indices`` of the burstable types and of the first other one (-1: none), found once.
    burstable: list[int] | None = None
    steady: int = -1
    # Per CPU requested: the list without burstable types dearer by bill (see finalize._cheapest_by_bill).
    by_bill: dict[int, Fitting] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class PricedTypes:
    """A candidate list's priced types, cheapest first, and which of them hold a given total.

    ``entries`` holds (price, name, type index, capacity group); ``capacities`` the distinct
    capacities, indexed by group; ``levels`` per dimension the distinct capacity values, sorted.
    Which types hold a total depends only on where each of its amounts falls among ``levels``, so
    ``fitting`` caches the answer per tuple of positions.
    """

    entries: list[tuple[float, str, int, int]]
    capacities: list[vec.Vector]
    levels: list[list[int]]
    fitting: dict[tuple[int, ...], Fitting] = field(default_factory=dict)

    def position(self, total: vec.Vector) -> tuple[int, ...]:
        """Per dimension, how many distinct capacity values are below ``total``'s amount."""
        return tuple(bisect_left(levels, amount) for levels, amount in zip(self.levels, total, strict=True))


@dataclass(slots=True, eq=False)
class PreparedPool:
    """A NodePool with everything the simulation reuses across pods."""

    template: NodePoolTemplate
    requirements: Requirements
    types: list[InstanceType]
    capacity: list[vec.Vector]  # per type: allocatable minus DaemonSet overhead, over the run's dims
    # per type: capacity plus one ``nodes`` (what NodePool limits count: a node is one whatever its type)
    raw_capacity: list[res.ResourceList]
    daemon_overhead: list[res.ResourceList]  # per type
    dropped_for_daemons: int = 0
    # per type: (host port, DaemonSet) of the DaemonSets that run there; empty when none binds a port
    daemon_ports: list[tuple[tuple[HostPort, str], ...]] = field(default_factory=list)
    matches: dict[str, OptionMatch] = field(default_factory=dict)
    offering_tables: dict[tuple[str, ...], OfferingTable] = field(default_factory=dict)
    ordinary: dict[tuple[object, ...], frozenset[int]] = field(default_factory=dict)
    by_unit_cost: dict[tuple[object, ...], list[tuple[float, int]]] = field(default_factory=dict)
    reserved: res.ResourceList = field(default_factory=dict)  # limits counted for claims of this run
    # within_limits per candidate list (by identity: match results are cached) and remaining limits
    limited: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[list[int], list[int], str]] = field(
        default_factory=dict
    )
    # Per-list caches (keyed by id, holding the list so the id stays its own): thousands of claims
    # share a handful of candidate lists, so per-type scans are done once per list, not per claim.
    largest: dict[int, tuple[list[int], res.ResourceList]] = field(default_factory=dict)
    priced: dict[tuple[int, int], tuple[Requirements, list[int], PricedTypes]] = field(default_factory=dict)
    summaries: dict[
        tuple[int, int, vec.Vector, vec.Vector, bool], tuple[Requirements, list[int], Summary]
    ] = field(default_factory=dict)
    # Per (offering key, priced candidates): the re-packing's undominated launch options (repack.py).
    launch_options: dict[tuple[object, ...], Any] = field(default_factory=dict)
    # The node bill beyond the instance: per node (volumes, address) and, per type, burstable credits.
    extra: float = 0.0
    credit_terms: list[CreditTerms | None] = field(default_factory=list)

    @property
    def has_min_values(self) -> bool:
        """True when some requirement of the NodePool sets ``minValues``."""
        return any(r.min_values for r in self.requirements)

    @property
    def name(self) -> str:
        """The NodePool's name."""
        return self.template.name

    def match(self, option_key: str, option: Requirements) -> OptionMatch:
        """The requirements and instance types this pool offers for a pod option (cached)."""
        cached = self.matches.get(option_key)
        if cached is not None:
            return cached
        return remember(self.matches, option_key, self._match(option))

    def _match(self, option: Requirements) -> OptionMatch:
        if not requirements_compatible(option, self.requirements):
            problems = "; ".join(requirement_conflicts(option, self.requirements))
            return OptionMatch(self.requirements, [], f"incompatible requirements: {problems}")
        combined = self.requirements.intersect(option)
        indices = [i for i, it in enumerate(self.types) if instance_type_compatible(it, combined)]
        if not indices:
            wanted = option.describe() or "none"
            return OptionMatch(
                combined,
                [],
                f"no instance type satisfies the pod's requirements ({wanted}) within the NodePool's",
            )
        return OptionMatch(combined, indices)

    def ordinary_types(self, requirements: Requirements, mix: vec.Vector) -> frozenset[int]:
        """Types whose price per copy of ``mix`` is at most OUTLIER_FACTOR times the median (cached)."""
        key = (*_offering_key(requirements), mix)
        ordinary = self.ordinary.get(key)
        if ordinary is None:
            prices = self.offerings(requirements).prices
            costs = [
                (self.unit_cost(i, price, mix), i) for i, price in enumerate(prices) if price is not None
            ]
            finite = sorted(cost for cost, _ in costs if cost != float("inf"))
            limit = finite[len(finite) // 2] * OUTLIER_FACTOR if finite else float("inf")
            ordinary = frozenset(i for cost, i in costs if cost <= limit)
            remember(self.ordinary, key, ordinary, MIX_CACHE_SIZE)
        return ordinary

    def unit_costs(self, requirements: Requirements, mix: vec.Vector) -> list[tuple[float, int]]:
        """(price per copy of ``mix``, type index) of every priced type, cheapest first (cached)."""
        key = (*_offering_key(requirements), mix)
        costs = self.by_unit_cost.get(key)
        if costs is None:
            prices = self.offerings(requirements).prices
            costs = sorted(
                (self.unit_cost(i, price, mix), i) for i, price in enumerate(prices) if price is not None
            )
            remember(self.by_unit_cost, key, costs, MIX_CACHE_SIZE)
        return costs

    def unit_cost(self, i: int, price: float, mix: vec.Vector) -> float:
        """Bill per copy of ``mix`` on type ``i`` bought at ``price``, filled with copies of it."""
        return unit_cost(price, self.capacity[i], mix, self.extra, self.credit_terms[i])

    def node_cost(self, i: int, price: float, cpu: float) -> float:
        """The hourly bill of a node of type ``i`` bought at ``price`` whose pods request ``cpu``."""
        return price + self.extra + credits(self.credit_terms[i], cpu)

    def offerings(self, requirements: Requirements) -> OfferingTable:
        """Per type, what the requirements' zones and capacity types allow (cached per pair)."""
        key = _offering_key(requirements)
        table = self.offering_tables.get(key)
        if table is None:
            table = OfferingTable([], [], [], set(), set())
            for it in self.types:
                offered = allowed_offerings(it, requirements)
                table.prices.append(min(o[2] for o in offered) if offered else None)
                zones = frozenset(o[0] for o in offered)
                capacity_types = frozenset(o[1] for o in offered)
                table.zones.append(zones)
                table.zone_ids.append(
                    frozenset(o.zone_id for o in it.offerings if o.zone in zones and o.zone_id)
                )
                table.capacity_types.append(capacity_types)
                table.all_zones.update(zones)
                table.all_capacity_types.update(capacity_types)
            remember(self.offering_tables, key, table)
        return table

    def prices(self, requirements: Requirements) -> list[float | None]:
        """Per type, the cheapest offering the requirements allow (None when none is allowed)."""
        return self.offerings(requirements).prices

    def remaining_limits(self) -> res.ResourceList | None:
        """What the NodePool's limits still allow, or None without limits."""
        limits = self.template.limits
        if limits is None:
            return None
        usage = self.template.usage
        # Only the resources the NodePool limits count; usage of others (memory, pods, ...) is free.
        return {
            name: limit - usage.get(name, 0) - self.reserved.get(name, 0) for name, limit in limits.items()
        }

    def largest_capacity(self, indices: list[int]) -> res.ResourceList:
        """Per resource the NodePool limits, the largest capacity among ``indices`` (cached per list)."""
        cached = self.largest.get(id(indices))
        if cached is not None and cached[0] is indices:
            return cached[1]
        names = (self.template.limits or {}).keys()
        raw = self.raw_capacity
        largest = {n: max((raw[i].get(n, 0) for i in indices), default=0) for n in names}
        self.largest[id(indices)] = (indices, largest)
        return largest

    def within_limits(self, indices: list[int]) -> list[int]:
        """The instance types whose capacity still fits within the NodePool's limits.

        ``indices`` itself when even its largest type fits (the common case, checked without a scan).
        """
        remaining = self.remaining_limits()
        if remaining is None:
            return indices
        largest = self.largest_capacity(indices)
        if all(largest.get(name, 0) <= left for name, left in remaining.items()):
            return indices
        key = (id(indices), tuple(sorted(remaining.items())))
        cached = self.limited.get(key)
        if cached is not None and cached[0] is indices:
            return cached[1]
        within = [
            i
            for i in indices
            if all(self.raw_capacity[i].get(name, 0) <= left for name, left in remaining.items())
        ]
        self.limited[key] = (indices, within, "" if within else self._limit_reason(indices, remaining))
        return within

    def priced_types(self, requirements: Requirements, indices: list[int]) -> PricedTypes:
        """The types of ``indices`` the requirements' offerings price, cheapest (then by name) first.

        Cached per (requirements, list) object pair: a run's claims share a few of each.
        """
        key = (id(requirements), id(indices))
        cached = self.priced.get(key)
        if cached is not None and cached[0] is requirements and cached[1] is indices:
            return cached[2]
        prices = self.offerings(requirements).prices
        groups: dict[vec.Vector, int] = {}
        entries: list[tuple[float, str, int, int]] = []
        for i in indices:
            price = prices[i]
            if price is not None:
                group = groups.setdefault(self.capacity[i], len(groups))
                entries.append((price, self.types[i].name, i, group))
        entries.sort()
        capacities = list(groups)
        width = len(capacities[0]) if capacities else 0
        levels = [sorted({capacity[d] for capacity in capacities}) for d in range(width)]
        priced = PricedTypes(entries, capacities, levels)
        remember(self.priced, key, (requirements, indices, priced))
        return priced

    def limit_reason(self, indices: list[int]) -> str:
        """Why no type of ``indices`` fits within the limits (``limit cpu=100 reached``)."""
        remaining = self.remaining_limits() or {}
        cached = self.limited.get((id(indices), tuple(sorted(remaining.items()))))
        if cached is not None and cached[0] is indices and cached[2]:
            return cached[2]
        return self._limit_reason(indices, remaining)

    def _limit_reason(self, indices: list[int], remaining: res.ResourceList) -> str:
        limits = self.template.limits or {}
        blocked = sorted(
            name
            for name, left in remaining.items()
            if all(self.raw_capacity[i].get(name, 0) > left for i in indices)
        )
        shown = {name: limits[name] for name in blocked if name in limits}
        return f"limit {res.render(shown)} reached" if shown else "limits reached"


def offering_key(requirements: Requirements) -> tuple[str, ...]:
    """What of ``requirements`` an offering table depends on: requirements alike on it share one."""
    return _offering_key(requirements)


def _offering_key(requirements: Requirements) -> tuple[str, ...]:
    return tuple(
        (req.describe() if req is not None else "")
        for req in (requirements.get(key) for key in OFFERING_KEYS)
    )


def pool_requirements(template: NodePoolTemplate) -> Requirements:
    """The NodePool's requirements, its template labels and its own name, as one set."""
    own = normalize_requirements(template.requirements)
    result = own.intersect(Requirements.from_labels(normalize_labels(template.labels))).intersect(
        Requirements({NODEPOOL: Requirement.single(NODEPOOL, template.name)})
    )
    if is_windows(template.ami_family):
        # A Windows node class makes Windows nodes: its claims carry the OS and build labels.
        result = result.intersect(Requirements.from_labels(os_labels(template.ami_family)))
    return result


def daemonset_runs_on(ds: Pod, template: NodePoolTemplate, requirements: Requirements) -> bool:
    """True when a DaemonSet's pod would run on this NodePool's nodes (taints and requirements)."""
    if tolerates_all(ds.tolerations, template.taints) is not None:
        return False
    return any(requirements_compatible(option, requirements) for option in ds.node_requirement_options())


POOL_CACHE_SIZE = 32  # prepared pools kept: a few NodePools times the catalogs of the last few passes
TABLE_CACHE_SIZE = 128  # entries per shared per-query cache of a prepared pool
# Entries per cache keyed on a pod mix (unit costs, ordinary types): one list or set over every type each,
# and mixes change from pass to pass, so few are worth keeping (at most 32 pools x 2 x 16 of them).
MIX_CACHE_SIZE = 16

_K = TypeVar("_K")
_V = TypeVar("_V")


def remember(cache: dict[_K, _V], key: _K, value: _V, size: int = TABLE_CACHE_SIZE) -> _V:
    """``cache[key] = value``, the oldest entry dropped first when the cache holds ``size`` entries."""
    if len(cache) >= size:
        # another thread may have trimmed it meanwhile
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del cache[next(iter(cache))]
    cache[key] = value
    return value


@dataclass(slots=True, eq=False)
class PoolTables:
    """What :func:`prepare_pool` derives from its inputs, shared by the pools prepared from equal ones.

    ``instance_types`` is the catalog the key names by identity: holding it keeps those ids its own.
    """

    instance_types: list[InstanceType]
    pool: PreparedPool  # the first pool prepared: its derived fields and caches are shared


class _PoolCache:
    """The last :data:`POOL_CACHE_SIZE` prepared pools' tables, by :func:`_pool_key`."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[object, ...], PoolTables] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[object, ...]) -> PoolTables | None:
        with self.lock:
            found = self.entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self.entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: tuple[object, ...], tables: PoolTables) -> None:
        with self.lock:
            self.entries[key] = tables
            self.entries.move_to_end(key)
            while len(self.entries) > POOL_CACHE_SIZE:
                self.entries.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


POOL_CACHE = _PoolCache()


def _pool_key(
    template: NodePoolTemplate,
    instance_types: Sequence[InstanceType],
    daemonsets: Sequence[Pod],
    dims: tuple[str, ...],
) -> tuple[object, ...]:
    """Everything :func:`_prepare` reads, by value except the (frozen) instance types, by identity."""
    return (
        template.name,
        repr(template.requirements),
        repr(sorted(template.labels.items())),
        repr(template.taints),
        template.ami_family,
        repr(template.kubelet),
        repr(template.bill),
        tuple(map(id, instance_types)),
        tuple(
            repr(
                (
                    ds.namespace,
                    ds.name,
                    sorted(ds.requests.items()),
                    ds.node_selector,
                    ds.required_affinity,
                    ds.tolerations,
                    ds.host_ports,
                )
            )
            for ds in daemonsets
        ),
        dims,
    )


def prepare_pool(
    template: NodePoolTemplate,
    instance_types: list[InstanceType],
    daemonsets: list[Pod],
    dims: tuple[str, ...],
) -> PreparedPool:
    """Select the NodePool's instance types and compute each one's room for pods.

    The derived tables come from the process-wide cache when the inputs are the same (see the module's
    docstring); the pool returned is always a new one, with this ``template`` and no claim reserved.
    """
    key = _pool_key(template, instance_types, daemonsets, dims)
    tables = POOL_CACHE.get(key)
    if tables is None:
        tables = PoolTables(list(instance_types), _prepare(template, instance_types, daemonsets, dims))
        POOL_CACHE.put(key, tables)
    shared = tables.pool
    return PreparedPool(
        template,
        shared.requirements,
        shared.types,
        shared.capacity,
        shared.raw_capacity,
        shared.daemon_overhead,
        shared.dropped_for_daemons,
        shared.daemon_ports,
        matches=shared.matches,
        offering_tables=shared.offering_tables,
        ordinary=shared.ordinary,
        by_unit_cost=shared.by_unit_cost,
        priced=shared.priced,
        launch_options=shared.launch_options,
        extra=shared.extra,
        credit_terms=shared.credit_terms,
    )


def _prepare(
    template: NodePoolTemplate,
    instance_types: list[InstanceType],
    daemonsets: list[Pod],
    dims: tuple[str, ...],
) -> PreparedPool:
    """:func:`prepare_pool`'s work, uncached."""
    requirements = pool_requirements(template)
    if is_windows(template.ami_family):
        instance_types = for_ami_family(instance_types, template.ami_family)
    candidates = [it for it in instance_types if instance_type_compatible(it, requirements)]
    daemons = [ds for ds in map(normalize_pod, daemonsets) if daemonset_runs_on(ds, template, requirements)]
    types: list[InstanceType] = []
    capacity: list[vec.Vector] = []
    raw: list[res.ResourceList] = []
    overheads: list[res.ResourceList] = []
    dropped = 0
    for it in candidates:
        allocatable = instance_type_allocatable(it, template.kubelet)
        overhead = res.add(
            *(
                ds.requests
                for ds in daemons
                if any(
                    instance_type_compatible(it, requirements.intersect(o))
                    for o in ds.node_requirement_options()
                )
            )
        )
        room = vec.sub(vec.vector(allocatable, dims), vec.vector(overhead, dims))
        if min(room) < 0 or not res.fits(overhead, allocatable):
            dropped += 1
            continue
        types.append(it)
        capacity.append(room)
        raw.append({**it.capacity, NODES: 1})
        overheads.append(overhead)
    daemon_ports = _daemon_ports(types, requirements, [ds for ds in daemons if ds.host_ports])
    pool = PreparedPool(template, requirements, types, capacity, raw, overheads, dropped, daemon_ports)
    pool.extra = template.bill.fixed_per_hour()
    pool.credit_terms = [_credit_terms(it, overhead) for it, overhead in zip(types, overheads, strict=True)]
    return pool


def _credit_terms(it: InstanceType, overhead: res.ResourceList) -> CreditTerms | None:
    """A burstable type's credits as the scheduler counts them: the pods' CPU its baseline covers once
    its DaemonSets' requests are taken off, and the price per millicore-hour above that."""
    kind = burst(it.name)
    if kind is None:
        return None
    return (kind.baseline - overhead.get(CPU, 0), kind.rate / 1000)


def _daemon_ports(
    types: list[InstanceType], requirements: Requirements, daemons: list[Pod]
) -> list[tuple[tuple[HostPort, str], ...]]:
    """Per type, the host ports its DaemonSets bind (a pending pod cannot bind them there too)."""
    if not daemons:
        return []
    return [
        tuple(
            (port, ds.key)
            for ds in daemons
            if any(
                instance_type_compatible(it, requirements.intersect(o)) for o in ds.node_requirement_options()
            )
            for port in ds.host_ports
        )
        for it in types
    ]
