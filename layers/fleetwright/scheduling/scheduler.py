"""The scheduling simulation: place pending pods on existing nodes, then on as few new NodeClaims as fit.

Pods are taken largest first (CPU, then memory). Each pod goes to the first existing node that accepts
it, else to the first NodeClaim of this run that still has room, else to a new NodeClaim from the
highest-weight NodePool that can run it. A claim keeps every compatible instance type that still holds
its pods; the cheapest is chosen at the end. Topology spread and pod (anti-)affinity are checked against
per-domain counts (:mod:`fleetwright.scheduling.topology`); a claim narrows itself to the one zone (or
other domain) a constraint chose. Preferences are treated as required, then relaxed one at a time
(see :func:`_attempts` for the order; PreferNoSchedule taints are tolerated last) when the pod cannot
be placed. A pod still not placed is retried after the others while the batch makes progress.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from fleetwright.catalog.bill import node_bill
from fleetwright.model import resources as res
from fleetwright.model.labels import CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE, ZONE_ID
from fleetwright.model.legacy_labels import normalize_pod
from fleetwright.model.pod import Pod
from fleetwright.model.quantity import CPU
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import (
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    first_untolerated,
    tolerates_all,
)
from fleetwright.model.volumes import pod_volume_requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress, min_values_hold
from fleetwright.scheduling.costs import credits
from fleetwright.scheduling.existing import NodeInProgress, daemon_ports_coming, node_in_progress
from fleetwright.scheduling.pools import Fitting, PreparedPool, prepare_pool, remember
from fleetwright.scheduling.repack import repack
from fleetwright.scheduling.reservations import (
    ReservationLedger,
    ReservationPlanner,
    pinned,
    reserved_offerings,
    without_reserved,
)
from fleetwright.scheduling.topology import (
    AFFINITY,
    SPREAD,
    Constraint,
    PodConstraints,
    Topology,
    domain_constraints,
    host_constraints,
)
from fleetwright.scheduling.types import (
    ExistingNodePlacement,
    NewNodeClaim,
    PodError,
    Results,
    SchedulingInput,
)

NEW_NODE = "<new node>"  # the hostname domain of a claim not opened yet: always empty


@dataclass(slots=True, eq=False)
class Attempt:
    """One way of placing a pod: node requirements and the topology constraints still enforced."""

    option_key: str
    option: Requirements
    constraints: tuple[Constraint, ...]


@dataclass(slots=True, eq=False)
class PodGroup:
    """Pods that share every placement constraint (not necessarily their requests)."""

    attempts: list[Attempt]  # strictest first
    tolerations: tuple[Toleration, ...]
    tolerations_key: int
    error: str = ""  # set when no attempt can work (a missing volume, contradictory selectors)
    resumable: bool = True  # refusals are permanent (see Simulation.resume)
    mix: vec.Vector = ()  # the summed needs of the group's pending pods: the shape claims pack for
    # The same pods tolerating PreferNoSchedule taints, tried after every attempt above has failed.
    tolerating_preferences: PodGroup | None = None


def _option_key(option: Requirements) -> str:
    return option.describe()


def _group_key(pod: Pod, constraints: PodConstraints, volumes: Requirements | str) -> tuple[object, ...]:
    volume_key = volumes if isinstance(volumes, str) else _option_key(volumes)
    return (
        tuple(_option_key(o) for o in pod.node_requirement_options()),
        tuple(sorted((p.weight, _option_key(p.requirements)) for p in pod.preferred_affinity)),
        pod.tolerations,
        constraints.signature(),
        volume_key,
    )


def _attempts(pod: Pod, constraints: PodConstraints, volumes: Requirements) -> list[Attempt]:
    """The ways of placing the pod, strictest first.

    Everything is first treated as required. When the pod cannot be placed, preferences are relaxed one
    at a time, in Karpenter's order: preferred pod affinity terms (heaviest first), then preferred pod
    anti-affinity terms (heaviest first), then preferred node affinity (the heaviest term is required
    first; it is replaced by the next heaviest, and finally none), then ScheduleAnyway topology spreads.
    Each step tries every required (ORed) node-selector term in order.
    """
    required = [option.intersect(volumes) for option in pod.node_requirement_options()]
    preferred_terms = sorted(pod.preferred_affinity, key=lambda p: -p.weight)
    extras = [term.requirements for term in preferred_terms] + [Requirements()]
    affinity = list(constraints.preferred_affinity)
    anti = list(constraints.preferred_anti)
    anyway = list(constraints.schedule_anyway)
    steps: list[tuple[Requirements, list[Constraint]]] = []
    steps.extend((extras[0], affinity[k:] + anti + anyway) for k in range(len(affinity) + 1))
    steps.extend((extras[0], anti[k:] + anyway) for k in range(1, len(anti) + 1))
    steps.extend((extra, anyway) for extra in extras[1:])
    steps.extend((extras[-1], anyway[k:]) for k in range(1, len(anyway) + 1))
    attempts: list[Attempt] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for extra, preferences in steps:
        for option in required:
            combined = option.intersect(extra)
            if any(r.is_empty() for r in combined):
                continue
            key = _option_key(combined)
            chosen = (*constraints.required, *preferences)
            identity = (key, tuple(id(c) for c in chosen))
            if identity not in seen:
                seen.add(identity)
                attempts.append(Attempt(key, combined, chosen))
    return attempts


class Simulation:
    """One scheduling run. Use :func:`schedule`."""

    def __init__(self, inp: SchedulingInput) -> None:
        self.input = inp
        pending = [normalize_pod(p) for p in inp.pods if not p.node_name]
        self.dims = vec.dimensions([p.requests for p in pending] + [d.requests for d in inp.daemonsets])
        instance_types = sorted(inp.instance_types, key=lambda it: it.name)
        # Static pools keep their own node count: pending pods never open claims in them.
        templates = sorted((t for t in inp.nodepools if not t.static), key=lambda t: (-t.weight, t.name))
        static = sorted(t.name for t in inp.nodepools if t.static)
        self.no_pool_reason = (
            f"no NodePool launches nodes for pods (static NodePools keep their replicas: {', '.join(static)})"
            if static
            else "no NodePool exists"
        )
        self.pools = [prepare_pool(t, instance_types, inp.daemonsets, self.dims) for t in templates]
        self.nodes = [
            node_in_progress(i, n, self.dims) for i, n in enumerate(sorted(inp.nodes, key=lambda n: n.name))
        ]
        for n in self.nodes:
            if n.node.in_flight:
                n.host_ports.extend(daemon_ports_coming(n.node, inp.daemonsets))
        self.node_domains = [
            {**n.node.labels, HOSTNAME: n.node.labels.get(HOSTNAME, n.node.name)} for n in self.nodes
        ]
        self.claims: list[ClaimInProgress] = []
        self.open_claims: list[ClaimInProgress] = []
        self.reservations = ReservationPlanner(ReservationLedger(inp.instance_types))
        self.groups: dict[tuple[object, ...], PodGroup] = {}
        self.errors: list[PodError] = []
        self.topology = Topology(inp.namespace_labels)
        self.universes: dict[tuple[str, str, int], list[str]] = {}
        self.spread_domains: dict[tuple[str, str, int], list[str]] = {}
        self.tolerated: dict[tuple[int, int], bool] = {}
        needs = {p.key: vec.pod_need(p.requests, self.dims) for p in pending}
        self.min_need = tuple(min((n[i] for n in needs.values()), default=0) for i in range(len(self.dims)))
        totals = [max(1, sum(n[i] for n in needs.values())) for i in range(len(self.dims))]
        self.pending = sorted(
            pending, key=lambda p: (-sum(a / t for a, t in zip(needs[p.key], totals, strict=True)), p.key)
        )
        self.needs = needs
        self.shared = _sharing_a_node(pending)
        self.pod_groups: dict[str, PodGroup] = {}
        self.preferred_taints = {
            taint
            for taints in [*(t.taints for t in templates), *(n.taints for n in inp.nodes)]
            for taint in taints
            if taint.effect == PREFER_NO_SCHEDULE
        }
        self._group_pending(pending)
        self._count_running_pods()
        # A pod refused by a node or claim is refused by them again when it is identical (same group,
        # requests and allowed domains): totals only grow. Resume the scan where the last one landed.
        self.resume: dict[tuple[int, str, vec.Vector], tuple[int, int]] = {}
        self.placed_count = 0  # pods placed so far: what a remembered failure is valid for
        self.failed: dict[tuple[object, ...], tuple[int, str]] = {}
        # per topology group: its pods on claims that have not settled on a domain of its key
        self.undecided: dict[int, int] = {}

    def _group_pending(self, pending: Sequence[Pod]) -> None:
        """Each pending pod's group, whose ``mix`` sums its pods' needs."""
        for p in pending:
            group = self.group_of(p)
            need = self.needs[p.key]
            group.mix = vec.add(group.mix, need) if group.mix else need
            if group.tolerating_preferences is not None:
                group.tolerating_preferences.mix = group.mix
            self.pod_groups[p.key] = group

    def _count_running_pods(self) -> None:
        """Topology spread and affinity count the pods already running, in their nodes' domains."""
        for node in self.nodes:
            for running in node.node.pods:
                self.topology.register_owner_terms(running)
        self.topology_keys = self.topology.keys
        if self.topology.groups:
            for node, domains in zip(self.nodes, self.node_domains, strict=True):
                site = (None, _hard_taints(node))
                for running in node.node.pods:
                    self.topology.record(running, domains, site=site)

    def group_of(self, pod: Pod) -> PodGroup:
        """The pod's constraint group (computed once per distinct set of constraints)."""
        constraints = self.topology.constraints_for(pod) if _has_topology(pod) else PodConstraints()
        volumes = (
            pod_volume_requirements(pod.namespace, pod.volume_claims, self.input.volumes)
            if pod.volume_claims
            else Requirements()
        )
        key = _group_key(pod, constraints, volumes)
        group = self.groups.get(key)
        if group is None:
            if isinstance(volumes, str):
                group = PodGroup([], pod.tolerations, len(self.groups), error=volumes)
            else:
                attempts = _attempts(pod, constraints, volumes)
                group = PodGroup(attempts, pod.tolerations, len(self.groups))
                if not attempts:
                    group.error = "node selector, required node affinity and volumes cannot all be met"
                group.resumable = not any(
                    c.kind == AFFINITY and c.key == HOSTNAME for a in attempts for c in a.constraints
                )
                group.tolerating_preferences = self._tolerating_preferences(pod, group, constraints, volumes)
            self.groups[key] = group
        return group

    def _tolerating_preferences(
        self, pod: Pod, group: PodGroup, constraints: PodConstraints, volumes: Requirements
    ) -> PodGroup | None:
        """The last resort, as in Karpenter: every preference relaxed and PreferNoSchedule tolerated.

        None when no NodePool or node carries a PreferNoSchedule taint the pod does not tolerate.
        """
        if not group.attempts or all(
            any(t.tolerates(taint) for t in pod.tolerations) for taint in self.preferred_taints
        ):
            return None
        required = [option.intersect(volumes) for option in pod.node_requirement_options()]
        attempts = [
            Attempt(_option_key(option), option, constraints.required)
            for option in required
            if not any(r.is_empty() for r in option)
        ]
        tolerations = (*pod.tolerations, Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE))
        return PodGroup(attempts, tolerations, -1 - group.tolerations_key, resumable=group.resumable)

    def run(self) -> Results:
        """Place every pending pod or explain why it cannot be placed.

        As in Karpenter, a pod that cannot be placed yet goes to the back of the queue and is tried again
        while the batch makes progress: a pod may need another pod of the batch placed first (required
        pod affinity to it, a chain of them, or a spread only its turn can balance). The loop stops
        when a whole pass over the queue places nothing.
        """
        queue = deque(self.pending)
        requeued_at: dict[str, int] = {}  # pod key -> queue length when it was last pushed back
        failures: dict[str, str] = {}
        while queue:
            pod = queue[0]
            if requeued_at.get(pod.key) == len(queue):
                break  # every pod left was tried since the last placement
            queue.popleft()
            reason = self.place(pod)
            if reason is None:
                if failures:
                    failures.pop(pod.key, None)
                continue
            failures[pod.key] = reason
            if self.pod_groups[pod.key].error:
                continue  # a missing volume or contradictory selectors: no placement can change that
            queue.append(pod)
            requeued_at[pod.key] = len(queue)
        self.errors.extend(PodError(p, failures[p.key]) for p in self.pending if p.key in failures)
        unplaced = [e.pod for e in self.errors]
        self.claims = repack(self.claims, self.needs, self._movable, unplaced, self._joins)
        if unplaced:
            placed = {p.key for claim in self.claims if claim.settled for p in claim.pods}
            self.errors = [e for e in self.errors if e.pod.key not in placed]
        return self.results()

    def _joins(self, pod: Pod, claim: ClaimInProgress) -> bool:
        """True when the unplaced pod could have opened a claim with ``claim``'s requirements."""
        group = self.pod_groups[pod.key]
        if group.error or not self._claim_tolerated(claim, group):
            return False
        wanted = claim.requirements.describe()
        for attempt in group.attempts:
            # An incompatible option matches nothing (it reports the NodePool's own requirements).
            match = claim.pool.match(attempt.option_key, attempt.option)
            if match.type_indices and match.requirements.describe() == wanted:
                return True
        return False

    def _movable(self, pod: Pod) -> bool:
        """True when the pod's placement touches no topology count or host port (it can move freely)."""
        group = self.pod_groups[pod.key]
        if pod.host_ports or any(a.constraints for a in group.attempts):
            return False
        return not (self.topology.groups and self.topology.selecting(pod))

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
        reason = _explain(reasons)
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
        allowed = self._allowed_domains(constraints, attempt, group)
        if isinstance(allowed, str):
            return False, [allowed]
        if allowed:
            restriction = Requirements.of(Requirement.create(k, "In", v) for k, v in allowed.items())
            option = attempt.option.intersect(restriction)
            option_key = _option_key(option)
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
            return False, [self._topology_reason(refusing, [])]
        reasons: list[str] = []
        for narrowed in _domain_choices(allowed):
            choice = option.intersect(narrowed)
            choice_key = _option_key(choice) if allowed else option_key
            created, reasons = self.new_claim(pod, need, group, choice_key, choice)
            if created is not None:
                self.resume[resume_key] = (len(self.nodes), created.seq)
                self._record_on_claim(pod, created)
                return True, []
        if allowed:
            return False, [self._capacity_reason(attempt, group, constraints, allowed, reasons)]
        return False, reasons

    def _allowed_domains(
        self, constraints: tuple[Constraint, ...], attempt: Attempt, group: PodGroup
    ) -> dict[str, list[str]] | str:
        """Per topology key, the domains the pod's constraints allow, best first; or why none is."""
        allowed: dict[str, list[str]] = {}
        for key, on_key in domain_constraints(constraints).items():
            universe = self._universe(key, attempt, group)
            values: list[str] | None = None
            for constraint in on_key:
                eligible = self._spread_domains(key, constraint, attempt, group)
                mine = constraint.allowed_values(universe, eligible)
                if not mine:
                    return self._topology_reason(constraint, universe, eligible or ())
                values = mine if values is None else [v for v in values if v in set(mine)]
            if not values:
                shown = ", ".join(sorted(universe)) or "none"
                return f"topology constraints on {key} leave no domain (candidates: {shown})"
            allowed[key] = values
        return allowed

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
            if not self._claim_tolerated(claim, group):
                continue
            if hosts and not all(c.allows(claim.hostname) for c in hosts):
                continue
            narrowed = _pick_domains(claim.requirements, allowed) if allowed else option
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

    def _universe(self, key: str, attempt: Attempt, group: PodGroup) -> list[str]:
        """The domains of ``key`` the pod could reach: its NodePools' offerings and matching nodes."""
        cache_key = (key, attempt.option_key, group.tolerations_key)
        found = self.universes.get(cache_key)
        if found is None:
            values = set(self._pool_domains(key, attempt, group)[0])
            for domains in self.node_domains:
                value = domains.get(key)
                if value is not None and attempt.option.matches(domains):
                    values.add(value)
            found = sorted(values)
            self.universes[cache_key] = found
        return found

    def _pool_domains(self, key: str, attempt: Attempt, group: PodGroup) -> tuple[list[str], list[str]]:
        """The domains of ``key`` new claims could be launched in, and the NodePools offering them."""
        values: set[str] = set()
        names: list[str] = []
        for pool in self.pools:
            if first_untolerated(group.tolerations, pool.template.taints) is not None:
                continue
            match = pool.match(attempt.option_key, attempt.option)
            if match.type_indices:
                values.update(_pool_values(pool, key, match.requirements, match.type_indices))
                names.append(pool.name)
        return sorted(values), names

    def _spread_domains(
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
                values.update(_pool_values(pool, key, match.requirements, match.type_indices))
        for node, domains in zip(self.nodes, self.node_domains, strict=True):
            value = domains.get(key)
            if value is None or (honor_affinity and not option.matches(domains)):
                continue
            if honor_taints and tolerates_all(group.tolerations, _hard_taints(node)) is not None:
                continue
            values.add(value)
        found = sorted(values)
        self.spread_domains[cache_key] = found
        return found

    def _topology_reason(
        self, constraint: Constraint, universe: list[str], eligible: Sequence[str] = ()
    ) -> str:
        group = constraint.group
        if constraint.kind == AFFINITY and group.total == 0 and self.undecided.get(id(group), 0) > 0:
            return (
                f"pod affinity on {group.describe()}: the matching pods are on new nodes whose "
                f"{group.describe()} is not decided yet"
            )
        if constraint.kind == AFFINITY and group.total > 0 and group.key == HOSTNAME and not universe:
            held = f"{group.total} matching pod{'s' if group.total > 1 else ''}"
            return f"pod affinity on hostname: no node holding a matching pod can take it ({held})"
        return constraint.explain(universe, eligible)

    def _capacity_reason(
        self,
        attempt: Attempt,
        group: PodGroup,
        constraints: tuple[Constraint, ...],
        allowed: Mapping[str, list[str]],
        reasons: list[str],
    ) -> str:
        """Why a pod whose topology narrowed its domains found no room in them."""
        for key, values in allowed.items():
            universe = self._universe(key, attempt, group)
            if len(values) == len(universe):
                continue
            eligible = {id(c): self._spread_domains(key, c, attempt, group) for c in constraints}
            excluding = [
                c
                for c in constraints
                if c.key == key and len(c.allowed_values(universe, eligible[id(c)])) < len(universe)
            ]
            pool_domains, pools = self._pool_domains(key, attempt, group)
            where = ", ".join(pool_domains) or "none"
            by = f"NodePool {', '.join(pools)}" if pools else "any NodePool"
            head = (
                excluding[0].explain(universe, eligible[id(excluding[0])] or ())
                if excluding
                else f"topology on {key}"
            )
            return f"{head}; only {where} allowed by {by}"
        return _explain(reasons)

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
                if k != HOSTNAME and _single(claim.requirements, k) and not _single(before, k)
            ]
            if newly:
                domains = _claim_domains(claim, self.topology_keys)
                site = (claim.requirements, claim.pool.template.taints)
                for earlier in claim.pods[:-1]:
                    self.topology.record(earlier, domains, newly, site)
                    self._count_undecided(earlier, newly, -1)
        self._record_on_claim(pod, claim)
        self._close_if_full(claim)
        return True

    def _record_on_node(self, pod: Pod, node: NodeInProgress) -> None:
        if self.topology.groups:
            self.topology.record(pod, self.node_domains[node.seq], site=(None, _hard_taints(node)))

    def _record_on_claim(self, pod: Pod, claim: ClaimInProgress) -> None:
        if self.topology.groups:
            domains = _claim_domains(claim, self.topology_keys)
            self.topology.record(pod, domains, site=(claim.requirements, claim.pool.template.taints))
            self._count_undecided(pod, [k for k in self.topology_keys if k not in domains], 1)

    def _count_undecided(self, pod: Pod, keys: Sequence[str], change: int) -> None:
        """Count the pod in (or out of) its groups on ``keys``: the claim it is on has no domain there yet."""
        if keys:
            for group in self.topology.selecting(pod):
                if group.key in keys:
                    self.undecided[id(group)] = self.undecided.get(id(group), 0) + change

    def _claim_tolerated(self, claim: ClaimInProgress, group: PodGroup) -> bool:
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
            return _no_types_reason(pool)
        match = pool.match(option_key, option)
        if not match.type_indices:
            return match.reason
        type_indices = match.type_indices
        if pod.host_ports and pool.daemon_ports:
            type_indices = _port_free_types(pool, pod, type_indices)
            if not type_indices:
                return _daemon_port_reason(pool, pod, match.type_indices)
        indices = pool.within_limits(type_indices)
        if not indices:
            return pool.limit_reason(type_indices)
        if not any(vec.fits(need, pool.capacity[i]) for i in indices):
            return _too_big_reason(pool, indices, need, self.dims)
        if pool.has_min_values and not min_values_hold(pool, match.requirements, indices, need):
            return _min_values_reason(pool, match.requirements, indices, need)
        return match.requirements, indices

    def results(self) -> Results:
        """Turn the simulation's state into the public result."""
        out = Results(errors=sorted(self.errors, key=lambda e: e.pod.key))
        for node in self.nodes:
            if node.placed:
                out.existing.append(
                    ExistingNodePlacement(node.node.name, sorted(node.placed, key=lambda p: p.key))
                )
        counters: dict[str, int] = {}
        ledger = ReservationLedger(self.input.instance_types)
        for claim in self.claims:
            counters[claim.pool.name] = counters.get(claim.pool.name, 0) + 1
            final = finalize(claim, f"{claim.pool.name}-{counters[claim.pool.name]}", ledger)
            if isinstance(final, str):
                out.errors.extend(PodError(p, final) for p in sorted(claim.pods, key=lambda p: p.key))
                continue
            out.new_claims.append(final)
        out.errors.sort(key=lambda e: e.pod.key)
        return out


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


def _daemon_port_reason(pool: PreparedPool, pod: Pod, indices: Sequence[int]) -> str:
    """Which DaemonSet binds which of the pod's host ports on the NodePool's nodes."""
    taken = sorted(
        {
            f"hostPort {mine.port}/{mine.protocol} is bound by DaemonSet {owner}"
            for i in indices
            for other, owner in pool.daemon_ports[i]
            for mine in pod.host_ports
            if mine.conflicts(other)
        }
    )
    return "; ".join(taken) + " on its nodes"


def _identity(pod: Pod, group: PodGroup, need: vec.Vector) -> tuple[object, ...]:
    """What placement looks at: pods alike in it are placed, or refused, alike."""
    return (group.tolerations_key, need, pod.namespace, tuple(sorted(pod.labels.items())), pod.host_ports)


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


def _sharing_a_node(pending: Sequence[Pod]) -> frozenset[str]:
    """Pods that must share a node with others of the batch: those with a required hostname pod
    affinity term and the pending pods such a term selects (namespaces are not narrowed: including
    too many only lets a claim grow larger)."""
    selectors = [
        term.label_selector
        for pod in pending
        for term in pod.pod_affinity
        if term.topology_key == HOSTNAME and term.label_selector is not None
    ]
    if not selectors:
        return frozenset()
    unique = list({repr(selector): selector for selector in selectors}.values())
    return frozenset(
        pod.key
        for pod in pending
        if any(t.topology_key == HOSTNAME for t in pod.pod_affinity)
        or any(selector.matches(pod.labels) for selector in unique)
    )


def _capacity_type_order(capacity_type: str) -> tuple[int, str]:
    order = {"spot": 0, "on-demand": 1, "reserved": 2}
    return (order.get(capacity_type, 9), capacity_type)


def _no_types_reason(pool: PreparedPool) -> str:
    if pool.dropped_for_daemons:
        return (
            f"no instance type has room for the DaemonSets that run on its nodes "
            f"({pool.dropped_for_daemons} types too small)"
        )
    reqs = pool.template.requirements.describe() or "none"
    return f"no instance type offered in this region satisfies the NodePool's requirements ({reqs})"


def _too_big_reason(
    pool: PreparedPool, indices: Sequence[int], need: vec.Vector, dims: tuple[str, ...]
) -> str:
    largest = vec.elementwise_max((pool.capacity[i] for i in indices), len(dims))
    short = {dims[d]: need[d] for d in range(len(dims)) if need[d] > largest[d]}
    overhead = vec.elementwise_max((vec.vector(pool.daemon_overhead[i], dims) for i in indices), len(dims))
    overhead_text = ""
    if any(overhead):
        shown = {dims[d]: overhead[d] for d in range(len(dims)) if overhead[d]}
        overhead_text = f" (after DaemonSet overhead {res.render(shown)})"
    if short:
        return f"no instance type has {res.render(short)} within the NodePool's requirements{overhead_text}"
    wanted = {dims[d]: need[d] for d in range(len(dims)) if need[d]}
    return (
        f"no instance type has {res.render(wanted)} at once within the NodePool's requirements{overhead_text}"
    )


def _min_values_reason(
    pool: PreparedPool, requirements: Requirements, indices: Sequence[int], need: vec.Vector
) -> str:
    fitting = [i for i in indices if vec.fits(need, pool.capacity[i])]
    problems = []
    for req in requirements:
        if req.min_values:
            values = {pool.types[i].labels.get(req.key) for i in fitting} - {None}
            if len(values) < req.min_values:
                problems.append(f"{req.key} minValues {req.min_values} but only {len(values)} value(s) fit")
    return "; ".join(problems) or "minValues cannot be met"


def _explain(reasons: list[str]) -> str:
    if not reasons:
        return "no NodePool can run the pod"
    if len(reasons) == 1:
        return reasons[0]
    return "incompatible with every NodePool: " + "; ".join(reasons)


def _has_topology(pod: Pod) -> bool:
    return bool(
        pod.topology_spread
        or pod.pod_affinity
        or pod.pod_anti_affinity
        or pod.preferred_pod_affinity
        or pod.preferred_pod_anti_affinity
    )


def _seq(claim: ClaimInProgress) -> int:
    return claim.seq


def _single(requirements: Requirements, key: str) -> str | None:
    req = requirements.get(key)
    return req.single_value() if req is not None else None


def _claim_domains(claim: ClaimInProgress, keys: frozenset[str]) -> dict[str, str]:
    """The domains a claim's pods are in: its own hostname and every key it has settled on."""
    domains = {HOSTNAME: claim.hostname}
    for key in keys:
        value = _single(claim.requirements, key)
        if value is not None:
            domains[key] = value
    return domains


def _pick_domains(requirements: Requirements, allowed: Mapping[str, list[str]]) -> Requirements | None:
    """For a claim, the best allowed domain of each key it can still take (None if one key has none)."""
    chosen = []
    for key, values in allowed.items():
        req = requirements.get(key)
        value = next((v for v in values if req is None or req.has(v)), None)
        if value is None:
            return None
        chosen.append(Requirement.single(key, value))
    return Requirements.of(chosen)


def _domain_choices(allowed: Mapping[str, list[str]]) -> list[Requirements]:
    """Single-domain choices for a new claim, best first (one key varies; others take their best)."""
    if not allowed:
        return [Requirements()]
    keys = list(allowed)
    first, rest = keys[0], keys[1:]
    others = [Requirement.single(k, allowed[k][0]) for k in rest]
    return [Requirements.of([Requirement.single(first, v), *others]) for v in allowed[first]]


UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", NO_SCHEDULE)


def _hard_taints(node: NodeInProgress) -> tuple[Taint, ...]:
    """The node's taints, a cordoned node's ``node.kubernetes.io/unschedulable`` one included."""
    if node.node.unschedulable:
        return (*node.node.taints, UNSCHEDULABLE_TAINT)
    return node.node.taints


def _pool_values(
    pool: PreparedPool, key: str, requirements: Requirements, indices: Sequence[int]
) -> set[str]:
    """The values of ``key`` a NodePool's claims could carry under these requirements."""
    if key in (ZONE, CAPACITY_TYPE, ZONE_ID):
        table = pool.offerings(requirements)
        per_type = {ZONE: table.zones, ZONE_ID: table.zone_ids, CAPACITY_TYPE: table.capacity_types}[key]
        values: set[str] = set()
        for i in indices:
            values.update(per_type[i])
        return values
    single = _single(requirements, key)
    if single is not None:
        return {single}
    found = {pool.types[i].labels[key] for i in indices if key in pool.types[i].labels}
    req = requirements.get(key)
    if req is not None and not req.complement:
        found.update(req.values)
    return found


def schedule(inp: SchedulingInput) -> Results:
    """Decide which new NodeClaims to launch and where each pending pod goes. Pure: no I/O."""
    return Simulation(inp).run()
