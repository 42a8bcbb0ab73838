"""Placement: one pod onto an existing node, else an open claim of this run, else a new claim.

Each of the pod's attempts (strictest first, :mod:`fleetwright.scheduling.preferences`) is tried in
turn. Within an attempt it is first fit: existing nodes in name order, then open claims in the order
they were opened, then a new claim from the highest-weight NodePool that can run the pod. Topology
constraints first narrow the domains the pod may use (:mod:`fleetwright.scheduling.domains`); a claim
taking the pod settles on one of them. Refusals are remembered so that identical pods skip the nodes
and claims that refused the last one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import islice

from fleetwright.model.labels import HOSTNAME, INSTANCE_TYPE
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import first_untolerated
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress, min_values_hold
from fleetwright.scheduling.domains import Domains, claim_domains, domain_choices, pick_domains, single
from fleetwright.scheduling.existing import NodeInProgress, hard_taints
from fleetwright.scheduling.groups import PodGroup
from fleetwright.scheduling.pools import PreparedPool
from fleetwright.scheduling.preferences import Attempt, key_of
from fleetwright.scheduling.reasons import (
    daemon_port_reason,
    explain,
    min_values_reason,
    no_types_reason,
    too_big_reason,
)
from fleetwright.scheduling.reservations import ReservationPlanner
from fleetwright.scheduling.topology import Constraint, Topology, host_constraints

NEW_NODE = "<new node>"  # the hostname domain of a claim not opened yet: always empty


class Placement:
    """The nodes and claims of one run and the pods placed on them so far."""

    def __init__(
        self,
        pools: Sequence[PreparedPool],
        nodes: Sequence[NodeInProgress],
        node_domains: Sequence[Mapping[str, str]],
        topology: Topology,
        reservations: ReservationPlanner,
        pod_groups: Mapping[str, PodGroup],
        needs: Mapping[str, vec.Vector],
        *,
        dims: tuple[str, ...],
        min_need: vec.Vector,
        shared: frozenset[str],
        no_pool_reason: str,
    ) -> None:
        self.pools = pools
        self.nodes = nodes
        self.node_domains = node_domains
        self.topology = topology
        self.topology_keys = topology.keys
        self.reservations = reservations
        self.pod_groups = pod_groups  # each pending pod's group, by pod key
        self.needs = needs  # each pending pod's requests as a vector, by pod key
        self.domains = Domains(pools, nodes, node_domains, topology)
        self.claims: list[ClaimInProgress] = []
        self.open_claims: list[ClaimInProgress] = []
        self.tolerated: dict[tuple[int, int], bool] = {}
        # A pod refused by a node or claim is refused by them again when it is identical (same group,
        # requests and allowed domains): totals only grow. Resume the scan where the last one landed.
        self.resume: dict[tuple[int, str, vec.Vector], tuple[int, int]] = {}
        self.placed_count = 0  # pods placed so far: what a remembered failure is valid for
        self.failed: dict[tuple[object, ...], tuple[int, str]] = {}
        self.dims = dims
        self.min_need = min_need  # the smallest request of each resource: a claim short of it is full
        self.shared = shared  # pods that must share a node with others of the batch
        self.no_pool_reason = no_pool_reason

    def place(self, pod: Pod) -> str | None:
        """Try each attempt (strictest first) until the pod lands somewhere; None, or why it did not.

        A pod identical in what placement looks at (group, requests, labels, host ports) to one that
        failed since the last placement fails the same way, so it is not tried again.
        """
        group = self.pod_groups[pod.key]
        if group.error:
            return group.error
        need = self.needs[pod.key]
        if self.failed:
            failed = self.failed.get(_identity(pod, group, need))
            if failed is not None and failed[0] == self.placed_count:
                return failed[1]
        reasons: list[str] = []
        relaxed = group.tolerating_preferences
        tries = [(group, a) for a in group.attempts] + (
            [(relaxed, a) for a in relaxed.attempts] if relaxed else []
        )
        for tolerance, attempt in tries:
            constraints = attempt.constraints + self.topology.inverse_constraints(pod)
            placed, reasons = self._place(pod, need, tolerance, attempt, constraints)
            if placed:
                self.placed_count += 1
                return None
        reason = explain(reasons)
        self.failed[_identity(pod, group, need)] = (self.placed_count, reason)
        return reason

    def _place(
        self,
        pod: Pod,
        need: vec.Vector,
        group: PodGroup,
        attempt: Attempt,
        constraints: tuple[Constraint, ...],
    ) -> tuple[bool, list[str]]:
        """First fit over existing nodes, then open claims, then a new claim.

        Topology constraints first narrow the domains the pod may use (zones, ...), best first; a claim
        taking the pod settles on one of them.
        """
        hosts = host_constraints(constraints)
        allowed = self.domains.allowed(constraints, attempt, group)
        if isinstance(allowed, str):
            return False, [allowed]
        if allowed:
            restriction = Requirements.of(Requirement.create(k, "In", v) for k, v in allowed.items())
            option = attempt.option.intersect(restriction)
            option_key = key_of(option)
            resume_key = (group.tolerations_key, option_key + repr(sorted(allowed.items())), need)
        else:
            option, option_key = attempt.option, attempt.option_key
            resume_key = (group.tolerations_key, option_key, need)
        if pod.host_ports:  # refusals of a pod binding host ports hold only for pods binding the same
            resume_key = (resume_key[0], f"{resume_key[1]} ports={pod.host_ports}", need)
        node_start, claim_start = self.resume.get(resume_key, (0, 0)) if group.resumable else (0, 0)
        for node in self.nodes[node_start:]:
            if hosts and not all(c.allows(self.node_domains[node.seq][HOSTNAME]) for c in hosts):
                continue
            if node.accepts(option_key, option, group.tolerations_key, group.tolerations) and node.try_add(
                pod, need
            ):
                self.resume[resume_key] = (node.seq, claim_start)
                self._record_on_node(pod, node)
                return True, []
        joined = self._join_open_claim(pod, need, group, hosts, allowed, option, claim_start)
        if joined is not None:
            self.resume[resume_key] = (len(self.nodes), joined.seq)
            return True, []
        if hosts and not all(c.allows(NEW_NODE) for c in hosts):
            refusing = next(c for c in hosts if not c.allows(NEW_NODE))
            return False, [self.domains.topology_reason(refusing, [])]
        reasons: list[str] = []
        for narrowed in domain_choices(allowed):
            choice = option.intersect(narrowed)
            choice_key = key_of(choice) if allowed else option_key
            created, reasons = self.new_claim(pod, need, group, choice_key, choice)
            if created is not None:
                self.resume[resume_key] = (len(self.nodes), created.seq)
                self._record_on_claim(pod, created)
                return True, []
        if allowed:
            return False, [self.domains.capacity_reason(attempt, group, constraints, allowed, reasons)]
        return False, reasons

    def _join_open_claim(
        self,
        pod: Pod,
        need: vec.Vector,
        group: PodGroup,
        hosts: Sequence[Constraint],
        allowed: Mapping[str, list[str]],
        option: Requirements,
        claim_start: int,
    ) -> ClaimInProgress | None:
        """The first open claim from ``claim_start`` on that takes the pod (settling on its domains)."""
        # Open claims are in seq order: start at the resume point instead of skipping up to it.
        first = bisect_left(self.open_claims, claim_start, key=_seq) if claim_start else 0
        for claim in islice(self.open_claims, first, None):
            if not self.claim_tolerated(claim, group):
                continue
            if hosts and not all(c.allows(claim.hostname) for c in hosts):
                continue
            narrowed = pick_domains(claim.requirements, allowed) if allowed else option
            if narrowed is None:
                continue
            chosen = option.intersect(narrowed) if allowed else option
            if pod.host_ports and claim.pool.daemon_ports:
                clear = _clear_of_daemon_ports(claim, pod, chosen)
                if clear is None:
                    continue
                chosen = clear
            if self._add_to_claim(claim, pod, need, chosen):
                return claim
        return None

    def _add_to_claim(self, claim: ClaimInProgress, pod: Pod, need: vec.Vector, option: Requirements) -> bool:
        before = claim.requirements
        if not claim.try_add(pod, need, option):
            return False
        if pod.key in self.shared:
            claim.share()
        if self.topology_keys and claim.requirements is not before:
            # The claim just settled on one value of some key: count its earlier pods there now.
            newly = [
                k
                for k in self.topology_keys
                if k != HOSTNAME and single(claim.requirements, k) and not single(before, k)
            ]
            if newly:
                domains = claim_domains(claim, self.topology_keys)
                site = (claim.requirements, claim.pool.template.taints)
                for earlier in claim.pods[:-1]:
                    self.topology.record(earlier, domains, newly, site)
                    self.domains.count_undecided(earlier, newly, -1)
        self._record_on_claim(pod, claim)
        self._close_if_full(claim)
        return True

    def _record_on_node(self, pod: Pod, node: NodeInProgress) -> None:
        if self.topology.groups:
            self.topology.record(pod, self.node_domains[node.seq], site=(None, hard_taints(node)))

    def _record_on_claim(self, pod: Pod, claim: ClaimInProgress) -> None:
        if self.topology.groups:
            domains = claim_domains(claim, self.topology_keys)
            self.topology.record(pod, domains, site=(claim.requirements, claim.pool.template.taints))
            self.domains.count_undecided(pod, [k for k in self.topology_keys if k not in domains], 1)

    def claim_tolerated(self, claim: ClaimInProgress, group: PodGroup) -> bool:
        key = (group.tolerations_key, id(claim.pool))
        tolerated = self.tolerated.get(key)
        if tolerated is None:
            tolerated = first_untolerated(group.tolerations, claim.pool.template.taints) is None
            self.tolerated[key] = tolerated
        return tolerated

    def _close_if_full(self, claim: ClaimInProgress) -> None:
        if claim.open and not claim.can_fit(self.min_need):
            claim.open = False
            self.open_claims.remove(claim)

    def new_claim(
        self, pod: Pod, need: vec.Vector, group: PodGroup, option_key: str, option: Requirements
    ) -> tuple[ClaimInProgress | None, list[str]]:
        """Open a claim for the pod in the first NodePool (by weight) that can run it."""
        reasons: list[str] = []
        if not self.pools:
            return None, [self.no_pool_reason]
        for pool in self.pools:
            fit = self._pool_fit(pool, pod, need, group, option_key, option)
            if isinstance(fit, str):
                reasons.append(f"NodePool {pool.name}: {fit}")
                continue
            requirements, indices = fit
            reserving = False
            if self.reservations.capacity:
                choice = self.reservations.choose(pool, requirements, indices, need)
                if isinstance(choice, str):
                    reasons.append(f"NodePool {pool.name}: {choice}")
                    continue
                requirements, indices, reserving = choice
            claim = ClaimInProgress(
                len(self.claims),
                pool,
                requirements,
                indices,
                need,
                pods=[pod],
                host_ports=list(pod.host_ports),
                mix=group.mix,
                shared=pod.key in self.shared,
                reserving=reserving,
            )
            claim.reserve_limits()
            self.claims.append(claim)
            self.open_claims.append(claim)
            self._close_if_full(claim)
            return claim, reasons
        return None, reasons

    def _pool_fit(
        self,
        pool: PreparedPool,
        pod: Pod,
        need: vec.Vector,
        group: PodGroup,
        option_key: str,
        option: Requirements,
    ) -> tuple[Requirements, list[int]] | str:
        """The requirements and instance types (indices) a claim for the pod in ``pool`` may use, or why
        the pool cannot run it."""
        taint = first_untolerated(group.tolerations, pool.template.taints)
        if taint is not None:
            return f"taint {taint.render()} is not tolerated"
        if not pool.types:
            return no_types_reason(pool)
        match = pool.match(option_key, option)
        if not match.type_indices:
            return match.reason
        type_indices = match.type_indices
        if pod.host_ports and pool.daemon_ports:
            type_indices = _port_free_types(pool, pod, type_indices)
            if not type_indices:
                return daemon_port_reason(pool, pod, match.type_indices)
        indices = pool.within_limits(type_indices)
        if not indices:
            return pool.limit_reason(type_indices)
        if not any(vec.fits(need, pool.capacity[i]) for i in indices):
            return too_big_reason(pool, indices, need, self.dims)
        if pool.has_min_values and not min_values_hold(pool, match.requirements, indices, need):
            return min_values_reason(pool, match.requirements, indices, need)
        return match.requirements, indices


def _port_free_types(pool: PreparedPool, pod: Pod, indices: Sequence[int]) -> list[int]:
    """The types among ``indices`` whose DaemonSets leave every host port of the pod free."""
    ports = pool.daemon_ports
    return [
        i
        for i in indices
        if not any(mine.conflicts(taken) for mine in pod.host_ports for taken, _ in ports[i])
    ]


def _clear_of_daemon_ports(claim: ClaimInProgress, pod: Pod, option: Requirements) -> Requirements | None:
    """The option narrowed to the claim's types where no DaemonSet binds the pod's host ports, or None."""
    free = _port_free_types(claim.pool, pod, claim.type_indices)
    if len(free) == len(claim.type_indices):
        return option
    if not free:
        return None
    names = sorted({claim.pool.types[i].name for i in free})
    return option.intersect(Requirements.of([Requirement.create(INSTANCE_TYPE, "In", names)]))


def _identity(pod: Pod, group: PodGroup, need: vec.Vector) -> tuple[object, ...]:
    """What placement looks at: pods alike in it are placed, or refused, alike."""
    return (group.tolerations_key, need, pod.namespace, tuple(sorted(pod.labels.items())), pod.host_ports)


def _seq(claim: ClaimInProgress) -> int:
    return claim.seq
