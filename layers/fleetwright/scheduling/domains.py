"""Topology domain choice: which zones (or other domains) a pod's constraints let it use, best first.

Topology spread and pod (anti-)affinity are checked against per-domain counts
(:mod:`fleetwright.scheduling.topology`). For each topology key a pod's constraints narrow the domains
it may use, from the universe its NodePools' offerings and the matching nodes reach; a claim taking the
pod settles on one of them. Until it does, its pods are counted as undecided on that key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetwright.model.labels import CAPACITY_TYPE, HOSTNAME, ZONE, ZONE_ID
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import first_untolerated, tolerates_all
from fleetwright.scheduling.claims import ClaimInProgress
from fleetwright.scheduling.existing import NodeInProgress, hard_taints
from fleetwright.scheduling.groups import PodGroup
from fleetwright.scheduling.pools import PreparedPool
from fleetwright.scheduling.preferences import Attempt
from fleetwright.scheduling.reasons import explain, topology_reason
from fleetwright.scheduling.topology import SPREAD, Constraint, Topology, domain_constraints


class Domains:
    """The domains each pod may use in one simulation, with the caches that make asking cheap."""

    def __init__(
        self,
        pools: Sequence[PreparedPool],
        nodes: Sequence[NodeInProgress],
        node_domains: Sequence[Mapping[str, str]],
        topology: Topology,
    ) -> None:
        self.pools = pools
        self.nodes = nodes
        self.node_domains = node_domains
        self.topology = topology
        self.universes: dict[tuple[str, str, int], list[str]] = {}
        self.spread_domains: dict[tuple[str, str, int], list[str]] = {}
        # per topology group: its pods on claims that have not settled on a domain of its key
        self.undecided: dict[int, int] = {}

    def allowed(
        self, constraints: tuple[Constraint, ...], attempt: Attempt, group: PodGroup
    ) -> dict[str, list[str]] | str:
        """Per topology key, the domains the pod's constraints allow, best first; or why none is."""
        allowed: dict[str, list[str]] = {}
        for key, on_key in domain_constraints(constraints).items():
            universe = self.universe(key, attempt, group)
            values: list[str] | None = None
            for constraint in on_key:
                eligible = self.eligible(key, constraint, attempt, group)
                mine = constraint.allowed_values(universe, eligible)
                if not mine:
                    return self.topology_reason(constraint, universe, eligible or ())
                values = mine if values is None else [v for v in values if v in set(mine)]
            if not values:
                shown = ", ".join(sorted(universe)) or "none"
                return f"topology constraints on {key} leave no domain (candidates: {shown})"
            allowed[key] = values
        return allowed

    def universe(self, key: str, attempt: Attempt, group: PodGroup) -> list[str]:
        """The domains of ``key`` the pod could reach: its NodePools' offerings and matching nodes."""
        cache_key = (key, attempt.option_key, group.tolerations_key)
        found = self.universes.get(cache_key)
        if found is None:
            values = set(self.pool_domains(key, attempt, group)[0])
            for domains in self.node_domains:
                value = domains.get(key)
                if value is not None and attempt.option.matches(domains):
                    values.add(value)
            found = sorted(values)
            self.universes[cache_key] = found
        return found

    def pool_domains(self, key: str, attempt: Attempt, group: PodGroup) -> tuple[list[str], list[str]]:
        """The domains of ``key`` new claims could be launched in, and the NodePools offering them."""
        values: set[str] = set()
        names: list[str] = []
        for pool in self.pools:
            if first_untolerated(group.tolerations, pool.template.taints) is not None:
                continue
            match = pool.match(attempt.option_key, attempt.option)
            if match.type_indices:
                values.update(pool_values(pool, key, match.requirements, match.type_indices))
                names.append(pool.name)
        return sorted(values), names

    def eligible(
        self, key: str, constraint: Constraint, attempt: Attempt, group: PodGroup
    ) -> list[str] | None:
        """The domains a spread's skew is measured over (None for other constraints).

        kube-scheduler's node inclusion policies: with ``nodeAffinityPolicy: Honor`` only the domains of
        nodes and NodePools the pod's node selection allows, with ``Ignore`` all; with
        ``nodeTaintsPolicy: Honor`` only those whose NoSchedule/NoExecute taints it tolerates, with
        ``Ignore`` all.
        """
        if constraint.kind != SPREAD:
            return None
        honor_affinity, honor_taints = constraint.honor_node_affinity, constraint.honor_taints
        option_key = attempt.option_key if honor_affinity else ""
        cache_key = (key, option_key, group.tolerations_key if honor_taints else -1)
        found = self.spread_domains.get(cache_key)
        if found is not None:
            return found
        option = attempt.option if honor_affinity else Requirements()
        values: set[str] = set()
        for pool in self.pools:
            if honor_taints and tolerates_all(group.tolerations, pool.template.taints) is not None:
                continue
            match = pool.match(option_key, option)
            if match.type_indices:
                values.update(pool_values(pool, key, match.requirements, match.type_indices))
        for node, domains in zip(self.nodes, self.node_domains, strict=True):
            value = domains.get(key)
            if value is None or (honor_affinity and not option.matches(domains)):
                continue
            if honor_taints and tolerates_all(group.tolerations, hard_taints(node)) is not None:
                continue
            values.add(value)
        found = sorted(values)
        self.spread_domains[cache_key] = found
        return found

    def topology_reason(
        self, constraint: Constraint, universe: list[str], eligible: Sequence[str] = ()
    ) -> str:
        """Why ``constraint`` allows no domain of ``universe``."""
        return topology_reason(constraint, universe, self.undecided, eligible)

    def capacity_reason(
        self,
        attempt: Attempt,
        group: PodGroup,
        constraints: tuple[Constraint, ...],
        allowed: Mapping[str, list[str]],
        reasons: list[str],
    ) -> str:
        """Why a pod whose topology narrowed its domains found no room in them."""
        for key, values in allowed.items():
            universe = self.universe(key, attempt, group)
            if len(values) == len(universe):
                continue
            eligible = {id(c): self.eligible(key, c, attempt, group) for c in constraints}
            excluding = [
                c
                for c in constraints
                if c.key == key and len(c.allowed_values(universe, eligible[id(c)])) < len(universe)
            ]
            pool_domains, pools = self.pool_domains(key, attempt, group)
            where = ", ".join(pool_domains) or "none"
            by = f"NodePool {', '.join(pools)}" if pools else "any NodePool"
            head = (
                excluding[0].explain(universe, eligible[id(excluding[0])] or ())
                if excluding
                else f"topology on {key}"
            )
            return f"{head}; only {where} allowed by {by}"
        return explain(reasons)

    def count_undecided(self, pod: Pod, keys: Sequence[str], change: int) -> None:
        """Count the pod in (or out of) its groups on ``keys``: the claim it is on has no domain there yet."""
        if keys:
            for group in self.topology.selecting(pod):
                if group.key in keys:
                    self.undecided[id(group)] = self.undecided.get(id(group), 0) + change


def single(requirements: Requirements, key: str) -> str | None:
    """The one value ``requirements`` allow for ``key``, if they allow exactly one."""
    req = requirements.get(key)
    return req.single_value() if req is not None else None


def claim_domains(claim: ClaimInProgress, keys: frozenset[str]) -> dict[str, str]:
    """The domains a claim's pods are in: its own hostname and every key it has settled on."""
    domains = {HOSTNAME: claim.hostname}
    for key in keys:
        value = single(claim.requirements, key)
        if value is not None:
            domains[key] = value
    return domains


def pick_domains(requirements: Requirements, allowed: Mapping[str, list[str]]) -> Requirements | None:
    """For a claim, the best allowed domain of each key it can still take (None if one key has none)."""
    chosen = []
    for key, values in allowed.items():
        req = requirements.get(key)
        value = next((v for v in values if req is None or req.has(v)), None)
        if value is None:
            return None
        chosen.append(Requirement.single(key, value))
    return Requirements.of(chosen)


def domain_choices(allowed: Mapping[str, list[str]]) -> list[Requirements]:
    """Single-domain choices for a new claim, best first (one key varies; others take their best)."""
    if not allowed:
        return [Requirements()]
    keys = list(allowed)
    first, rest = keys[0], keys[1:]
    others = [Requirement.single(k, allowed[k][0]) for k in rest]
    return [Requirements.of([Requirement.single(first, v), *others]) for v in allowed[first]]


def pool_values(pool: PreparedPool, key: str, requirements: Requirements, indices: Sequence[int]) -> set[str]:
    """The values of ``key`` a NodePool's claims could carry under these requirements."""
    if key in (ZONE, CAPACITY_TYPE, ZONE_ID):
        table = pool.offerings(requirements)
        per_type = {ZONE: table.zones, ZONE_ID: table.zone_ids, CAPACITY_TYPE: table.capacity_types}[key]
        values: set[str] = set()
        for i in indices:
            values.update(per_type[i])
        return values
    only = single(requirements, key)
    if only is not None:
        return {only}
    found = {pool.types[i].labels[key] for i in indices if key in pool.types[i].labels}
    req = requirements.get(key)
    if req is not None and not req.complement:
        found.update(req.values)
    return found
