"""The scheduling simulation: place pending pods on existing nodes, then on as few new NodeClaims as fit.

Pods are taken largest first (CPU, then memory). Each pod goes to the first existing node that accepts
it, else to the first NodeClaim of this run that still has room, else to a new NodeClaim from the
highest-weight NodePool that can run it. A claim keeps every compatible instance type that still holds
its pods; the cheapest is chosen at the end. The heaviest preferred node affinity term is treated as
required, then relaxed one term at a time (heaviest first) when the pod cannot be placed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetwright.model import resources as res
from fleetwright.model.labels import ZONE
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import Toleration, tolerates_all
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress, min_values_hold
from fleetwright.scheduling.existing import node_in_progress
from fleetwright.scheduling.pools import PreparedPool, prepare_pool
from fleetwright.scheduling.types import (
    ExistingNodePlacement,
    NewNodeClaim,
    PodError,
    Results,
    SchedulingInput,
)


@dataclass(slots=True, eq=False)
class PodGroup:
    """Pods that share every placement constraint (not necessarily their requests)."""

    attempts: list[tuple[str, Requirements]]  # requirement options, strictest first
    tolerations: tuple[Toleration, ...]
    tolerations_key: int
    mix: vec.Vector = ()  # the summed needs of the group's pending pods: the shape claims pack for


def _option_key(option: Requirements) -> str:
    return option.describe()


def _group_key(pod: Pod) -> tuple[object, ...]:
    return (
        tuple(_option_key(o) for o in pod.node_requirement_options()),
        tuple(sorted((p.weight, _option_key(p.requirements)) for p in pod.preferred_affinity)),
        pod.tolerations,
    )


def _attempts(pod: Pod) -> list[tuple[str, Requirements]]:
    """Requirement options in the order tried.

    As in Karpenter, the heaviest preferred node affinity term is treated as required; when the pod
    cannot be placed it is dropped and the next heaviest is tried, and finally none. Within each step
    every required (ORed) term is tried in order.
    """
    required = pod.node_requirement_options()
    preferred = sorted(pod.preferred_affinity, key=lambda p: -p.weight)
    extras = [term.requirements for term in preferred] + [Requirements()]
    attempts: list[tuple[str, Requirements]] = []
    seen: set[str] = set()
    for extra in extras:
        for option in required:
            combined = option.intersect(extra)
            if any(r.is_empty() for r in combined):
                continue
            key = _option_key(combined)
            if key not in seen:
                seen.add(key)
                attempts.append((key, combined))
    return attempts


class Simulation:
    """One scheduling run. Use :func:`schedule`."""

    def __init__(self, inp: SchedulingInput) -> None:
        self.input = inp
        pending = [p for p in inp.pods if not p.node_name]
        self.dims = vec.dimensions([p.requests for p in pending] + [d.requests for d in inp.daemonsets])
        instance_types = sorted(inp.instance_types, key=lambda it: it.name)
        templates = sorted(inp.nodepools, key=lambda t: (-t.weight, t.name))
        self.pools = [prepare_pool(t, instance_types, inp.daemonsets, self.dims) for t in templates]
        self.nodes = [
            node_in_progress(i, n, self.dims) for i, n in enumerate(sorted(inp.nodes, key=lambda n: n.name))
        ]
        self.claims: list[ClaimInProgress] = []
        self.open_claims: list[ClaimInProgress] = []
        self.groups: dict[tuple[object, ...], PodGroup] = {}
        self.errors: list[PodError] = []
        needs = {p.key: vec.pod_need(p.requests, self.dims) for p in pending}
        self.min_need = tuple(min((n[i] for n in needs.values()), default=0) for i in range(len(self.dims)))
        self.pending = sorted(pending, key=lambda p: (-needs[p.key][0], -needs[p.key][1], p.key))
        self.needs = needs
        self.pod_groups: dict[str, PodGroup] = {}
        for p in pending:
            group = self.group_of(p)
            group.mix = vec.add(group.mix, needs[p.key]) if group.mix else needs[p.key]
            self.pod_groups[p.key] = group
        # Identical pods (same constraints and requests) never fit where the previous one did not: resume
        # the scan of nodes and claims where the last such pod landed.
        self.resume: dict[tuple[int, str, vec.Vector], tuple[int, int]] = {}

    def group_of(self, pod: Pod) -> PodGroup:
        """The pod's constraint group (computed once per distinct set of constraints)."""
        key = _group_key(pod)
        group = self.groups.get(key)
        if group is None:
            group = PodGroup(_attempts(pod), pod.tolerations, len(self.groups))
            self.groups[key] = group
        return group

    def run(self) -> Results:
        """Place every pending pod or explain why it cannot be placed."""
        for pod in self.pending:
            self.place(pod)
        return self.results()

    def place(self, pod: Pod) -> None:
        """Try existing nodes, open claims and new claims, relaxing preferences as needed."""
        group = self.pod_groups[pod.key]
        need = self.needs[pod.key]
        if not group.attempts:
            self.errors.append(PodError(pod, "node selector and required node affinity cannot be met"))
            return
        reasons: list[str] = []
        for option_key, option in group.attempts:
            resume_key = (group.tolerations_key, option_key, need)
            node_start, claim_start = self.resume.get(resume_key, (0, 0))
            for node in self.nodes[node_start:]:
                if node.accepts(
                    option_key, option, group.tolerations_key, group.tolerations
                ) and node.try_add(pod, need):
                    self.resume[resume_key] = (node.seq, claim_start)
                    return
            for claim in self.open_claims:
                if claim.seq < claim_start:
                    continue
                if self._claim_tolerated(claim, group) and claim.try_add(pod, need, option):
                    self.resume[resume_key] = (len(self.nodes), claim.seq)
                    self._close_if_full(claim)
                    return
            created, reasons = self.new_claim(pod, need, group, option_key, option)
            if created is not None:
                self.resume[resume_key] = (len(self.nodes), created.seq)
                return
        self.errors.append(PodError(pod, _explain(reasons)))

    def _claim_tolerated(self, claim: ClaimInProgress, group: PodGroup) -> bool:
        return tolerates_all(group.tolerations, claim.pool.template.taints) is None

    def _close_if_full(self, claim: ClaimInProgress) -> None:
        if not claim.can_fit(self.min_need):
            self.open_claims.remove(claim)

    def new_claim(
        self, pod: Pod, need: vec.Vector, group: PodGroup, option_key: str, option: Requirements
    ) -> tuple[ClaimInProgress | None, list[str]]:
        """Open a claim for the pod in the first NodePool (by weight) that can run it."""
        reasons: list[str] = []
        if not self.pools:
            return None, ["no NodePool exists"]
        for pool in self.pools:
            taint = tolerates_all(group.tolerations, pool.template.taints)
            if taint is not None:
                reasons.append(f"NodePool {pool.name}: taint {taint.render()} is not tolerated")
                continue
            if not pool.types:
                reasons.append(f"NodePool {pool.name}: {_no_types_reason(pool)}")
                continue
            match = pool.match(option_key, option)
            if not match.type_indices:
                reasons.append(f"NodePool {pool.name}: {match.reason}")
                continue
            indices = pool.within_limits(match.type_indices)
            if not indices:
                reasons.append(f"NodePool {pool.name}: {pool.limit_reason(match.type_indices)}")
                continue
            if not any(vec.fits(need, pool.capacity[i]) for i in indices):
                reasons.append(f"NodePool {pool.name}: {_too_big_reason(pool, indices, need, self.dims)}")
                continue
            if pool.has_min_values and not min_values_hold(pool, match.requirements, indices, need):
                reasons.append(
                    f"NodePool {pool.name}: {_min_values_reason(pool, match.requirements, indices, need)}"
                )
                continue
            claim = ClaimInProgress(
                len(self.claims),
                pool,
                match.requirements,
                indices,
                need,
                pods=[pod],
                host_ports=list(pod.host_ports),
                mix=group.mix,
            )
            claim.reserve_limits()
            self.claims.append(claim)
            self.open_claims.append(claim)
            self._close_if_full(claim)
            return claim, reasons
        return None, reasons

    def results(self) -> Results:
        """Turn the simulation's state into the public result."""
        out = Results(errors=sorted(self.errors, key=lambda e: e.pod.key))
        for node in self.nodes:
            if node.placed:
                out.existing.append(
                    ExistingNodePlacement(node.node.name, sorted(node.placed, key=lambda p: p.key))
                )
        counters: dict[str, int] = {}
        for claim in self.claims:
            counters[claim.pool.name] = counters.get(claim.pool.name, 0) + 1
            out.new_claims.append(finalize(claim, f"{claim.pool.name}-{counters[claim.pool.name]}"))
        return out


def finalize(claim: ClaimInProgress, name: str) -> NewNodeClaim:
    """The claim's instance types that hold all its pods, cheapest first, with zones and labels."""
    pool = claim.pool
    table = pool.offerings(claim.requirements)
    priced: list[tuple[float, str, int]] = []
    zones: set[str] = set()
    capacity_types: set[str] = set()
    for i in claim.fitting_indices():
        price = table.prices[i]
        if price is None:
            continue
        priced.append((price, pool.types[i].name, i))
        if len(zones) < len(table.all_zones):
            zones.update(table.zones[i])
        if len(capacity_types) < len(table.all_capacity_types):
            capacity_types.update(table.capacity_types[i])
    priced.sort()
    requirements = claim.requirements
    if len(zones) == 1:
        requirements = requirements.intersect(Requirements.from_labels({ZONE: next(iter(zones))}))
    labels = {**pool.template.labels, **requirements.single_values()}
    pod_requests = res.add(*(p.requests for p in claim.pods))
    daemon = pool.daemon_overhead[priced[0][2]] if priced else {}
    return NewNodeClaim(
        name=name,
        nodepool=pool.name,
        instance_types=[pool.types[i] for _, _, i in priced],
        zones=sorted(zones),
        capacity_types=sorted(capacity_types, key=_capacity_type_order),
        labels=dict(sorted(labels.items())),
        taints=list(pool.template.taints),
        pods=sorted(claim.pods, key=lambda p: p.key),
        requests=res.add(pod_requests, daemon),
        daemon_requests=dict(daemon),
        price=priced[0][0] if priced else 0.0,
        requirements=requirements,
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


def schedule(inp: SchedulingInput) -> Results:
    """Decide which new NodeClaims to launch and where each pending pod goes. Pure: no I/O."""
    return Simulation(inp).run()
