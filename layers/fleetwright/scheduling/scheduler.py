"""The scheduling simulation: place pending pods on existing nodes, then on as few new NodeClaims as fit.

Pods are taken largest first (CPU, then memory). Each pod goes to the first existing node that accepts
it, else to the first NodeClaim of this run that still has room, else to a new NodeClaim from the
highest-weight NodePool that can run it (:mod:`.placement`). A claim keeps every compatible instance type
that still holds its pods; the cheapest is chosen at the end (:mod:`.finalize`). Topology spread and pod
(anti-)affinity are checked against per-domain counts (:mod:`.topology`); a claim narrows itself to the
one zone (or other domain) a constraint chose (:mod:`.domains`). Preferences are treated as required,
then relaxed one named step at a time (:mod:`.preferences`; PreferNoSchedule taints are tolerated last)
when the pod cannot be placed. A pod still not placed is retried after the others while the batch makes
progress (:mod:`.requeue`); reason text comes from :mod:`.reasons`.

This module sets a run up (pools, nodes, pod groups, the running pods counted) and turns its state into
the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetwright.model.labels import HOSTNAME
from fleetwright.model.legacy_labels import normalize_pod
from fleetwright.model.pod import Pod
from fleetwright.model.taints import PREFER_NO_SCHEDULE
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress
from fleetwright.scheduling.existing import NodeInProgress, daemon_ports_coming, hard_taints, node_in_progress
from fleetwright.scheduling.finalize import finalize
from fleetwright.scheduling.groups import PodGroup, PodGroups
from fleetwright.scheduling.placement import Placement
from fleetwright.scheduling.pools import prepare_pool
from fleetwright.scheduling.repack import repack
from fleetwright.scheduling.requeue import place_while_progressing
from fleetwright.scheduling.reservations import ReservationLedger, ReservationPlanner
from fleetwright.scheduling.topology import Topology
from fleetwright.scheduling.types import ExistingNodePlacement, PodError, Results, SchedulingInput

__all__ = ["Simulation", "schedule"]


class Simulation:
    """One scheduling run. Use :func:`schedule`."""

    def __init__(self, inp: SchedulingInput) -> None:
        self.input = inp
        pending = [normalize_pod(p) for p in inp.pods if not p.node_name]
        dims = vec.dimensions([p.requests for p in pending] + [d.requests for d in inp.daemonsets])
        instance_types = sorted(inp.instance_types, key=lambda it: it.name)
        # Static pools keep their own node count: pending pods never open claims in them.
        templates = sorted((t for t in inp.nodepools if not t.static), key=lambda t: (-t.weight, t.name))
        pools = [prepare_pool(t, instance_types, inp.daemonsets, dims) for t in templates]
        nodes = [node_in_progress(i, n, dims) for i, n in enumerate(sorted(inp.nodes, key=lambda n: n.name))]
        for n in nodes:
            if n.node.in_flight:
                n.host_ports.extend(daemon_ports_coming(n.node, inp.daemonsets))
        node_domains = [{**n.node.labels, HOSTNAME: n.node.labels.get(HOSTNAME, n.node.name)} for n in nodes]
        self.errors: list[PodError] = []
        self.topology = Topology(inp.namespace_labels)
        needs = {p.key: vec.pod_need(p.requests, dims) for p in pending}
        totals = [max(1, sum(n[i] for n in needs.values())) for i in range(len(dims))]
        self.pending = sorted(
            pending, key=lambda p: (-sum(a / t for a, t in zip(needs[p.key], totals, strict=True)), p.key)
        )
        self.needs = needs
        preferred_taints = {
            taint
            for taints in [*(t.taints for t in templates), *(n.taints for n in inp.nodes)]
            for taint in taints
            if taint.effect == PREFER_NO_SCHEDULE
        }
        self.groups = PodGroups(self.topology, inp.volumes, preferred_taints)
        self.pod_groups: dict[str, PodGroup] = {}
        self._group_pending(pending)
        self._count_running_pods(nodes, node_domains)
        static = ", ".join(sorted(t.name for t in inp.nodepools if t.static))
        self.placement = Placement(
            pools,
            nodes,
            node_domains,
            self.topology,
            ReservationPlanner(ReservationLedger(inp.instance_types)),
            self.pod_groups,
            needs,
            dims=dims,
            min_need=tuple(min((n[i] for n in needs.values()), default=0) for i in range(len(dims))),
            shared=_sharing_a_node(pending),
            no_pool_reason=(
                f"no NodePool launches nodes for pods (static NodePools keep their replicas: {static})"
                if static
                else "no NodePool exists"
            ),
        )

    def _group_pending(self, pending: Sequence[Pod]) -> None:
        """Each pending pod's group, whose ``mix`` sums its pods' needs."""
        for p in pending:
            group = self.groups.of(p)
            need = self.needs[p.key]
            group.mix = vec.add(group.mix, need) if group.mix else need
            if group.tolerating_preferences is not None:
                group.tolerating_preferences.mix = group.mix
            self.pod_groups[p.key] = group

    def _count_running_pods(
        self, nodes: Sequence[NodeInProgress], node_domains: Sequence[dict[str, str]]
    ) -> None:
        """Topology spread and affinity count the pods already running, in their nodes' domains."""
        for node in nodes:
            for running in node.node.pods:
                self.topology.register_owner_terms(running)
        if self.topology.groups:
            for node, domains in zip(nodes, node_domains, strict=True):
                site = (None, hard_taints(node))
                for running in node.node.pods:
                    self.topology.record(running, domains, site=site)

    def run(self) -> Results:
        """Place every pending pod (requeueing those that must wait for others) or explain why it cannot
        be placed; then re-pack the claims."""
        failures = place_while_progressing(
            self.pending, self.placement.place, lambda p: bool(self.pod_groups[p.key].error)
        )
        self.errors.extend(PodError(p, failures[p.key]) for p in self.pending if p.key in failures)
        unplaced = [e.pod for e in self.errors]
        placement = self.placement
        placement.claims = repack(placement.claims, self.needs, self._movable, unplaced, self._joins)
        if unplaced:
            placed = {p.key for claim in placement.claims if claim.settled for p in claim.pods}
            self.errors = [e for e in self.errors if e.pod.key not in placed]
        return self.results()

    def _joins(self, pod: Pod, claim: ClaimInProgress) -> bool:
        """True when the unplaced pod could have opened a claim with ``claim``'s requirements."""
        group = self.pod_groups[pod.key]
        if group.error or not self.placement.claim_tolerated(claim, group):
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

    def results(self) -> Results:
        """Turn the simulation's state into the public result."""
        out = Results(errors=sorted(self.errors, key=lambda e: e.pod.key))
        for node in self.placement.nodes:
            if node.placed:
                out.existing.append(
                    ExistingNodePlacement(node.node.name, sorted(node.placed, key=lambda p: p.key))
                )
        counters: dict[str, int] = {}
        ledger = ReservationLedger(self.input.instance_types)
        for claim in self.placement.claims:
            counters[claim.pool.name] = counters.get(claim.pool.name, 0) + 1
            final = finalize(claim, f"{claim.pool.name}-{counters[claim.pool.name]}", ledger)
            if isinstance(final, str):
                out.errors.extend(PodError(p, final) for p in sorted(claim.pods, key=lambda p: p.key))
                continue
            out.new_claims.append(final)
        out.errors.sort(key=lambda e: e.pod.key)
        return out


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


def schedule(inp: SchedulingInput) -> Results:
    """Decide which new NodeClaims to launch and where each pending pod goes. Pure: no I/O."""
    return Simulation(inp).run()
