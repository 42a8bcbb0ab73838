"""What every disruption method shares: which nodes are ours, which may be disrupted gracefully, what their
pods are, how the budgets and PodDisruptionBudgets limit one command.

:class:`Cluster` indexes a :class:`DisruptionInput` once per pass; the methods ask it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

from fleetwright.catalog.bill import NodeBill, NodeClassView, node_bill, node_class_view
from fleetwright.claims.terms import NO_TERMS, ClaimTerms, pool_terms
from fleetwright.disruption.budgets import allowed_disruptions
from fleetwright.disruption.types import DRIFTED, DisruptionInput, NodeState, Pdb
from fleetwright.model.donotdisrupt import node_protected, pod_protection
from fleetwright.model.hashes import HASH_VERSION, nodeclass_hash, nodepool_hash
from fleetwright.model.hashes import VERSIONS as HASH_VERSIONS
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod, is_node_bound
from fleetwright.model.quantity import CPU
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling.types import NewNodeClaim

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})


def is_terminal(pod: Pod) -> bool:
    """True for pods that have finished (they no longer occupy the node)."""
    return pod.phase in TERMINAL_PHASES


def is_empty(node: Node) -> bool:
    """True when the node runs no pod that would need a new home if the node went away."""
    return all(is_terminal(pod) or is_node_bound(pod) for pod in node.pods)


def evictable_pods(state: NodeState) -> list[Pod]:
    """The node's pods that would need a new home: running, not DaemonSet or mirror pods."""
    return [p for p in state.node.pods if not is_terminal(p) and not is_node_bound(p)]


def as_pending(pods: Iterable[Pod]) -> list[Pod]:
    """Pods as the scheduler sees pods still to place (no node, phase Pending)."""
    return [replace(p, node_name=None, phase="Pending") for p in pods]


def node_is_empty(state: NodeState) -> bool:
    """True when the node holds only DaemonSet, mirror and finished pods."""
    return is_empty(state.node)


def type_summary(states: Sequence[NodeState]) -> str:
    """``m5.xlarge ×2, c5.large ×1`` (most frequent first)."""
    counts: dict[str, int] = {}
    for state in states:
        counts[state.instance_type] = counts.get(state.instance_type, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} ×{n}" for name, n in ordered)


def price_of(states: Iterable[NodeState]) -> float:
    """Summed hourly price of the nodes' instances (see :meth:`Cluster.bill_of` for their whole bill)."""
    return sum(s.price for s in states)


def requested_cpu(state: NodeState) -> int:
    """The CPU (millicores) the node's running pods request, DaemonSet pods included."""
    return sum(p.requests.get(CPU, 0) for p in state.node.pods if not is_terminal(p))


@dataclass(slots=True)
class PdbLedger:
    """Counts, over one command, the pods each PodDisruptionBudget would lose."""

    pdbs: Sequence[Pdb]
    used: dict[int, int] = field(default_factory=dict)

    def selecting(self, pod: Pod) -> list[int]:
        """Indices of the PDBs that select ``pod``."""
        return [
            i
            for i, pdb in enumerate(self.pdbs)
            if pdb.namespace == pod.namespace and pdb.selector.matches(pod.labels)
        ]

    def blocking(self, pods: Sequence[Pod]) -> Pdb | None:
        """The first PDB that evicting ``pods`` on top of what this ledger holds would violate.

        The first node of a command only needs every PDB selecting its pods to allow a disruption: its
        drain evicts them one at a time as the PDB permits. Nodes joining it must keep each PDB's total
        within ``disruptions_allowed``, so one command never leans on a PDB for several nodes at once.
        """
        wanted: dict[int, int] = {}
        for pod in pods:
            for i in self.selecting(pod):
                wanted[i] = wanted.get(i, 0) + 1
        first = not self.used
        for i, count in sorted(wanted.items()):
            allowed = self.pdbs[i].disruptions_allowed
            if allowed <= 0 or (not first and self.used.get(i, 0) + count > allowed):
                return self.pdbs[i]
        return None

    def take(self, pods: Sequence[Pod]) -> None:
        """Count ``pods`` as evicted by the command."""
        self.used.setdefault(-1, 0)  # marks that a node was taken, even one without PDB'd pods
        for pod in pods:
            for i in self.selecting(pod):
                self.used[i] = self.used.get(i, 0) + 1


class Cluster:
    """One pass's view of a :class:`DisruptionInput`: our NodePools, their nodes and the budgets left."""

    def __init__(self, inp: DisruptionInput) -> None:
        self.input = inp
        self.settings = inp.settings
        self.now = inp.now
        self.moment = datetime.fromtimestamp(inp.now, UTC)
        self.pools: dict[str, NodePool] = {p.name: p for p in inp.nodepools}
        self.by_name: dict[str, NodeState] = {s.name: s for s in inp.nodes}
        self.pool_nodes: dict[str, list[NodeState]] = {name: [] for name in self.pools}
        for state in sorted(inp.nodes, key=lambda s: s.name):
            if state.nodepool in self.pools:
                self.pool_nodes[state.nodepool].append(state)
        self._allowed: dict[tuple[str, str], int] = {}
        self.memo: dict[str, object] = {}  # per-pass figures a method computes once (e.g. Balanced totals)
        self._views: dict[str, NodeClassView] = {}
        # Durations parsed once per pool, not once per node: what nodes without terms of their own follow.
        self.pool_terms = {name: pool_terms(p) for name, p in self.pools.items()}
        # Each NodePool's current lifetime; a node expires by its own (:meth:`terms`).
        self.expire_after = {name: t.expire_after for name, t in self.pool_terms.items()}
        self._hashes: dict[tuple[str, str, str], str | None] = {}
        self._types: dict[str, InstanceType] | None = None
        self._requirements: dict[str, Requirements] = {}
        self.memo_type_drift: dict[tuple[str, str], str | None] = {}  # (pool, type) → why, per pass
        self.consolidate_after = {
            name: p.spec.disruption.consolidate_after_seconds() for name, p in self.pools.items()
        }

    @property
    def ours(self) -> list[NodeState]:
        """Our nodes (their NodePool is in the input), by name."""
        return [s for states in self.pool_nodes.values() for s in states]

    def view(self, pool: str) -> NodeClassView:
        """What the NodePool's EC2NodeClass adds to each node's bill (volumes, public IPv4 address)."""
        views = self._views
        found = views.get(pool)
        if found is None:
            inp = self.input
            nodepool = self.pools.get(pool)
            name = nodepool.node_class_name() if nodepool is not None else ""
            nodeclass = next((nc for nc in inp.nodeclasses if nc.name == name), None)
            found = views[pool] = node_class_view(nodeclass, inp.region, inp.public_subnets.get(name, False))
        return found

    def bill(self, state: NodeState) -> NodeBill:
        """The node's whole hourly bill: its instance at its offering's price, its node class's volumes
        and public IPv4 address, and on a burstable type the credits its pods' CPU requests spend."""
        return node_bill(state.instance_type, state.price, self.view(state.nodepool), requested_cpu(state))

    def bill_of(self, states: Iterable[NodeState]) -> float:
        """The nodes' whole bills summed, USD per hour."""
        return sum(self.bill(s).total for s in states)

    def pool_of(self, state: NodeState) -> NodePool | None:
        """The NodePool of ``state``, or None when the node is not ours."""
        return self.pools.get(state.nodepool)

    def instance_type(self, name: str) -> InstanceType | None:
        """The catalog's instance type ``name`` (None when the catalog lacks it)."""
        types = self._types
        if types is None:
            types = self._types = {t.name: t for t in self.input.instance_types}
        return types.get(name)

    def requirements(self, pool: NodePool) -> Requirements:
        """The NodePool's requirements, built once per pass."""
        found = self._requirements.get(pool.name)
        if found is None:
            found = self._requirements[pool.name] = pool.requirements()
        return found

    def terms(self, state: NodeState) -> ClaimTerms:
        """The node's ``expireAfter`` and ``terminationGracePeriod``: its claim's own, copied at launch, else
        (a claim recorded before they were copied) its NodePool's current ones."""
        if state.terms is not None:
            return state.terms
        return self.pool_terms.get(state.nodepool, NO_TERMS)

    def current_hash(self, kind: str, name: str, version: str) -> str | None:
        """The current drift hash of NodePool (``kind`` "nodepool") or EC2NodeClass ``name`` digested at
        ``version``; None when unknown (the document is missing, or the version is not one this release
        knows: no hash drift, as Karpenter when versions differ)."""
        if version == HASH_VERSION:
            known = self.input.nodepool_hashes if kind == "nodepool" else self.input.nodeclass_hashes
            return known.get(name) or None
        key = (kind, name, version)
        if key not in self._hashes:
            self._hashes[key] = self._digest(kind, name, version)
        return self._hashes[key]

    def _digest(self, kind: str, name: str, version: str) -> str | None:
        if version not in HASH_VERSIONS:
            return None
        if kind == "nodepool":
            found = self.pools.get(name)
            return nodepool_hash(found, version) if found is not None else None
        node_class = next((nc for nc in self.input.nodeclasses if nc.name == name), None)
        return nodeclass_hash(node_class, version) if node_class is not None else None

    def is_static(self, state: NodeState) -> bool:
        """True when ``state`` belongs to a static NodePool (``spec.replicas``): it keeps its nodes."""
        pool = self.pools.get(state.nodepool)
        return pool is not None and pool.spec.replicas is not None

    def allowed(self, pool: str, reason: str) -> int:
        """How many of ``pool``'s nodes may still be disrupted for ``reason`` (before this pass acts).

        As Karpenter counts them (``BuildDisruptionBudgetMapping``): only initialized nodes count towards
        the pool's total, so replacements still starting do not raise a percentage's allowance; of those,
        the ones already being disrupted and the ones whose Node is not Ready use it up.
        """
        key = (pool, reason)
        if key not in self._allowed:
            counted = [s for s in self.pool_nodes.get(pool, []) if s.initialized and not s.node.in_flight]
            disrupting = sum(1 for s in counted if s.terminating or not s.node.ready)
            self._allowed[key] = allowed_disruptions(
                self.pools[pool], reason, len(counted), disrupting, self.moment
            )
        return self._allowed[key]

    def graceful_block(self, state: NodeState, reason: str = "") -> str | None:
        """Why ``state`` may not be disrupted gracefully for ``reason`` (None when it may).

        Budgets are not checked here: they depend on the other nodes of the command. A drifted node with a
        ``terminationGracePeriod`` is not held by its pods (``karpenter.sh/do-not-disrupt``,
        PodDisruptionBudgets): as Karpenter's eventual disruption, its drain respects them until that
        deadline and then deletes what is left (:meth:`pods_may_hold`).
        """
        if state.nodepool not in self.pools:
            return "not managed by a NodePool of this cluster"
        if state.terminating:
            return "already being disrupted"
        if state.node.in_flight or not state.initialized:
            return "not initialized yet"
        if node_protected(state.annotations):
            return f"node is annotated {DO_NOT_DISRUPT_ANNOTATION}"
        if not self.pods_may_hold(state, reason):
            return None
        protected = self.protected_pod(state)
        if protected is not None:
            return protected
        pdb = PdbLedger(self.input.pdbs).blocking(evictable_pods(state))
        if pdb is not None:
            allowed = pdb.disruptions_allowed
            return f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows {allowed} disruption(s)"
        return None

    def pods_may_hold(self, state: NodeState, reason: str) -> bool:
        """False when the node's pods cannot hold a disruption for ``reason``: drift (Karpenter's eventual
        disruption class) of a node with a ``terminationGracePeriod``, whose drain ends at that deadline."""
        return reason != DRIFTED or self.terms(state).termination_grace_period is None

    def protected_pod(self, state: NodeState) -> str | None:
        """Why a running pod's ``karpenter.sh/do-not-disrupt`` holds ``state`` now (None when none does):
        ``"true"``, or a duration not yet elapsed since the pod started."""
        for pod in state.node.pods:
            if is_terminal(pod):
                continue
            protection = pod_protection(pod.annotations, pod.started_at, self.now)
            if not protection.active:
                continue
            if protection.until is None:
                return f"pod {pod.key} is annotated {DO_NOT_DISRUPT_ANNOTATION}"
            until = datetime.fromtimestamp(protection.until, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return f"pod {pod.key} is annotated {DO_NOT_DISRUPT_ANNOTATION} until {until}"
        return None


@dataclass(slots=True)
class CommandBuilder:
    """Collects nodes for one command while keeping every NodePool budget and PDB satisfied."""

    cluster: Cluster
    reason: str
    taken: list[NodeState] = field(default_factory=list)
    per_pool: dict[str, int] = field(default_factory=dict)
    ledger: PdbLedger | None = None

    def __post_init__(self) -> None:
        if self.ledger is None:
            self.ledger = PdbLedger(self.cluster.input.pdbs)

    def refusal(self, state: NodeState) -> str | None:
        """Why ``state`` cannot join the command (budget or PDB), or None."""
        pool = state.nodepool
        allowed = self.cluster.allowed(pool, self.reason)
        if self.per_pool.get(pool, 0) >= allowed:
            return f"budget: NodePool {pool} allows {allowed} more {self.reason} disruption(s) now"
        assert self.ledger is not None
        if not self.cluster.pods_may_hold(state, self.reason):
            return None
        pdb = self.ledger.blocking(evictable_pods(state))
        if pdb is not None:
            return (
                f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows {pdb.disruptions_allowed} "
                "disruption(s) in one command"
            )
        return None

    def add(self, state: NodeState) -> str | None:
        """Add ``state`` when budgets and PDBs allow; return why not otherwise."""
        why = self.refusal(state)
        if why is None:
            assert self.ledger is not None
            self.ledger.take(evictable_pods(state))
            self.per_pool[state.nodepool] = self.per_pool.get(state.nodepool, 0) + 1
            self.taken.append(state)
        return why


def describe_seconds(seconds: float) -> str:
    """``45s``, ``12m``, ``3h``, ``2d4h`` — coarse, for explanations."""
    whole = int(seconds)
    if whole < 120:
        return f"{whole}s"
    if whole < 7200:
        return f"{whole // 60}m"
    if whole < 2 * 86400:
        return f"{whole // 3600}h"
    days, hours = divmod(whole // 3600, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def claims_summary(claims: Sequence[NewNodeClaim]) -> str:
    """``2 nodes (c6g.xlarge ×2, $0.272/h)`` for replacement claims (cheapest type of each)."""
    counts: dict[str, int] = {}
    for claim in claims:
        name = claim.instance_types[0].name if claim.instance_types else "?"
        counts[name] = counts.get(name, 0) + 1
    kinds = ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
    total = sum(c.price for c in claims)
    noun = "node" if len(claims) == 1 else "nodes"
    return f"{len(claims)} {noun} ({kinds}, ${total:.3f}/h)"
