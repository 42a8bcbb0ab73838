"""Topology constraints: spread, pod affinity and anti-affinity, kept as per-domain pod counts.

A *group* is one selector over one topology key (``topology.kubernetes.io/zone``, ``kubernetes.io/hostname``
or any label): it counts, per domain (label value), the pods it selects. Counts start from the pods
already running and grow as the simulation places pods, so every check is a dictionary lookup.
Anti-affinity groups also count their *owners* (pods carrying the term) per domain, so an existing
pod's anti-affinity keeps new pods away too (Kubernetes' symmetry rule).

A spread group also has a :class:`NodeFilter` (kube-scheduler's ``nodeAffinityPolicy`` and
``nodeTaintsPolicy``): only pods on the nodes it admits are counted, and only those nodes' domains (and
the domains of the NodePools it admits) take part in the skew's minimum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetwright.model.labels import HOSTNAME
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.taints import Taint, Toleration, tolerates_all

SPREAD = "spread"
AFFINITY = "affinity"
ANTI = "anti-affinity"
INVERSE_ANTI = "anti-affinity of running pods"  # symmetry: another pod's anti-affinity selects this one


def _selector_key(selector: LabelSelector | None) -> str:
    if selector is None:
        return "<none>"
    return f"{sorted(selector.match_labels)}|{selector.match_expressions.describe()}"


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """The nodes a topology spread counts, from its ``nodeAffinityPolicy`` and ``nodeTaintsPolicy``.

    ``options``: with ``nodeAffinityPolicy: Honor`` (the default) the pod's node selector and required
    node affinity (ORed terms), and only nodes matching one of them count; None counts every node
    (``Ignore``, or a pod with no node selection). ``tolerations``: with ``nodeTaintsPolicy: Honor`` the
    pod's tolerations, and only nodes whose NoSchedule and NoExecute taints they tolerate count; None
    counts every node (``Ignore``, the default).
    """

    options: tuple[Requirements, ...] | None = None
    tolerations: tuple[Toleration, ...] | None = None

    @staticmethod
    def of(pod: Pod, spread: TopologySpreadConstraint) -> NodeFilter | None:
        """The spread's filter for this pod; None when it admits every node."""
        options: tuple[Requirements, ...] | None = None
        if spread.node_affinity_policy == "Honor":
            found = pod.node_requirement_options()
            if any(len(o) for o in found):
                options = found
        tolerations = pod.tolerations if spread.node_taints_policy == "Honor" else None
        if options is None and tolerations is None:
            return None
        return NodeFilter(options, tolerations)

    def signature(self) -> tuple[object, ...]:
        """Hashable identity (filters alike count alike)."""
        options = None if self.options is None else tuple(o.describe() for o in self.options)
        return (options, self.tolerations)

    def admits_taints(self, taints: tuple[Taint, ...]) -> bool:
        """True when the taints do not exclude the node (PreferNoSchedule never does)."""
        return self.tolerations is None or tolerates_all(self.tolerations, taints) is None

    def admits_node(self, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> bool:
        """True when a node with these labels and taints counts."""
        if self.options is not None and not any(o.matches(labels) for o in self.options):
            return False
        return self.admits_taints(taints)

    def admits_claim(self, requirements: Requirements, taints: tuple[Taint, ...]) -> bool:
        """True when a new node with these requirements and taints counts."""
        if self.options is not None and not any(o.compatible(requirements) for o in self.options):
            return False
        return self.admits_taints(taints)


@dataclass(eq=False, slots=True)
class TopologyGroup:
    """Pods selected by one label selector (in some namespaces), counted per domain of one key."""

    kind: str
    key: str
    selector: LabelSelector | None
    namespaces: frozenset[str] | None  # None: every namespace the namespace selector admits
    namespace_selector: LabelSelector | None
    node_filter: NodeFilter | None = None  # spreads only: the nodes whose pods count
    counts: dict[str, int] = field(default_factory=dict)
    owners: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def selects(self, pod: Pod, namespace_labels: Mapping[str, dict[str, str]]) -> bool:
        """True when the group counts this pod (a missing selector selects nothing)."""
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace in self.namespaces:
            return self.selector.matches(pod.labels)
        if self.namespace_selector is not None and self.namespace_selector.matches(
            namespace_labels.get(pod.namespace, {})
        ):
            return self.selector.matches(pod.labels)
        return False

    def describe(self) -> str:
        """``topology.kubernetes.io/zone`` shortened for messages (``zone``)."""
        return self.key.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Constraint:
    """One of a pod's topology constraints, bound to its group."""

    kind: str
    group: TopologyGroup
    required: bool
    self_match: bool  # the pod would count in its own group
    max_skew: int = 1
    min_domains: int | None = None
    weight: int = 0
    honor_node_affinity: bool = True  # spreads: only domains the pod's node selection allows count
    honor_taints: bool = False  # spreads: only domains of nodes and NodePools whose taints it tolerates

    @property
    def key(self) -> str:
        """The topology key."""
        return self.group.key

    def allows(self, domain: str) -> bool:
        """Whether the pod may land in ``domain`` given current counts (new nodes are empty domains).

        For hostname spreads the minimum over domains is 0, since a new node is always an option.
        """
        group = self.group
        if self.kind == SPREAD:
            return group.counts.get(domain, 0) + (1 if self.self_match else 0) <= self.max_skew
        if self.kind == AFFINITY:
            if group.total == 0:
                return self.self_match
            return group.counts.get(domain, 0) > 0
        if self.kind == ANTI:
            return group.counts.get(domain, 0) == 0
        return group.owners.get(domain, 0) == 0

    def allowed_values(self, universe: Iterable[str], eligible: Iterable[str] | None = None) -> list[str]:
        """The domains of ``universe`` where the pod may land, best first (fewest matching pods).

        ``eligible``: for a spread, the domains its skew's minimum is taken over (its node filter's);
        the universe when not given.
        """
        domains = sorted(set(universe))
        counts = self.group.counts
        if self.kind == SPREAD:
            among = domains if eligible is None else set(eligible)
            lowest = min((counts.get(d, 0) for d in among), default=0)
            if self.min_domains is not None and len(among) < self.min_domains:
                lowest = 0
            own = 1 if self.self_match else 0
            allowed = [d for d in domains if counts.get(d, 0) + own - lowest <= self.max_skew]
        elif self.kind == AFFINITY:
            if self.group.total == 0:
                allowed = domains if self.self_match else []
            else:
                allowed = [d for d in domains if counts.get(d, 0) > 0]
        elif self.kind == ANTI:
            allowed = [d for d in domains if counts.get(d, 0) == 0]
        else:
            allowed = [d for d in domains if self.group.owners.get(d, 0) == 0]
        return sorted(allowed, key=lambda d: (counts.get(d, 0), d))

    def explain(self, universe: Iterable[str], eligible: Iterable[str] = ()) -> str:
        """Why no domain is allowed (``topology spread on zone: maxSkew 1 cannot be met ...``)."""
        domains = sorted(set(universe) | set(eligible))
        counts = ", ".join(f"{d}={self.group.counts.get(d, 0)}" for d in domains) or "none"
        name = self.group.describe()
        if self.kind == SPREAD:
            return (
                f"topology spread on {name}: maxSkew {self.max_skew} cannot be met (matching pods: {counts})"
            )
        if self.kind == AFFINITY:
            if self.group.total == 0:
                return f"pod affinity on {name}: no pod matches the selector"
            return f"pod affinity on {name}: no allowed domain holds a matching pod (matching pods: {counts})"
        if self.kind == ANTI:
            return f"pod anti-affinity on {name}: every allowed domain holds a matching pod ({counts})"
        return f"anti-affinity of running pods on {name} excludes every allowed domain"

    def signature(self) -> tuple[object, ...]:
        """What distinguishes this constraint for grouping pods."""
        return (
            self.kind,
            id(self.group),
            self.required,
            self.self_match,
            self.max_skew,
            self.min_domains,
            self.honor_node_affinity,
            self.honor_taints,
        )


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """A pod's topology constraints: required ones and preferences in relaxation order."""

    required: tuple[Constraint, ...] = ()
    preferred_affinity: tuple[Constraint, ...] = ()  # heaviest first: relaxed first, as in Karpenter
    preferred_anti: tuple[Constraint, ...] = ()  # heaviest first
    schedule_anyway: tuple[Constraint, ...] = ()

    def signature(self) -> tuple[object, ...]:
        """Hashable identity for grouping pods that share constraints."""
        return tuple(
            tuple(c.signature() for c in part)
            for part in (self.required, self.preferred_affinity, self.preferred_anti, self.schedule_anyway)
        )

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred_affinity or self.preferred_anti or self.schedule_anyway)


class Topology:
    """All topology groups of one simulation and their counts."""

    def __init__(self, namespace_labels: Mapping[str, dict[str, str]] | None = None) -> None:
        self.namespace_labels: Mapping[str, dict[str, str]] = namespace_labels or {}
        self.groups: dict[tuple[object, ...], TopologyGroup] = {}
        self.anti_groups: list[TopologyGroup] = []
        self._selecting: dict[tuple[object, ...], list[TopologyGroup]] = {}
        self._inverse: dict[tuple[object, ...], tuple[Constraint, ...]] = {}

    @property
    def keys(self) -> frozenset[str]:
        """Every topology key in use."""
        return frozenset(g.key for g in self.groups.values())

    def _group(
        self,
        kind: str,
        key: str,
        selector: LabelSelector | None,
        namespaces: frozenset[str] | None,
        namespace_selector: LabelSelector | None,
        node_filter: NodeFilter | None = None,
    ) -> TopologyGroup:
        counting_kind = ANTI if kind == ANTI else "count"
        sig = (
            counting_kind,
            key,
            _selector_key(selector),
            tuple(sorted(namespaces)) if namespaces is not None else None,
            _selector_key(namespace_selector),
            node_filter.signature() if node_filter is not None else None,
        )
        group = self.groups.get(sig)
        if group is None:
            group = TopologyGroup(kind, key, selector, namespaces, namespace_selector, node_filter)
            self.groups[sig] = group
            self._selecting.clear()
            self._inverse.clear()
            if kind == ANTI:
                self.anti_groups.append(group)
        return group

    def _spread_group(self, pod: Pod, spread: TopologySpreadConstraint) -> TopologyGroup:
        selector = spread.label_selector
        if selector is not None and spread.match_label_keys:
            extra = [Requirement.single(k, pod.labels[k]) for k in spread.match_label_keys if k in pod.labels]
            selector = LabelSelector(
                selector.match_labels, selector.match_expressions.intersect(Requirements.of(extra))
            )
        namespaces = frozenset((pod.namespace,))
        return self._group(
            SPREAD, spread.topology_key, selector, namespaces, None, NodeFilter.of(pod, spread)
        )

    def _term_group(self, kind: str, pod: Pod, term: PodAffinityTerm) -> TopologyGroup:
        namespaces = frozenset(term.namespaces) if term.namespaces else None
        if namespaces is None and term.namespace_selector is None:
            namespaces = frozenset((pod.namespace,))
        return self._group(kind, term.topology_key, term.label_selector, namespaces, term.namespace_selector)

    def constraints_for(self, pod: Pod) -> PodConstraints:
        """Build (and register the groups of) a pod's own constraints."""
        required: list[Constraint] = []
        anyway: list[Constraint] = []
        for spread in pod.topology_spread:
            group = self._spread_group(pod, spread)
            constraint = Constraint(
                SPREAD,
                group,
                required=spread.when_unsatisfiable == "DoNotSchedule",
                self_match=group.selects(pod, self.namespace_labels),
                max_skew=spread.max_skew,
                min_domains=spread.min_domains,
                honor_node_affinity=spread.node_affinity_policy != "Ignore",
                honor_taints=spread.node_taints_policy == "Honor",
            )
            (required if constraint.required else anyway).append(constraint)
        for term in pod.pod_affinity:
            group = self._term_group(AFFINITY, pod, term)
            required.append(Constraint(AFFINITY, group, True, group.selects(pod, self.namespace_labels)))
        for term in pod.pod_anti_affinity:
            group = self._term_group(ANTI, pod, term)
            required.append(Constraint(ANTI, group, True, group.selects(pod, self.namespace_labels)))
        preferred_affinity = sorted(
            (
                Constraint(AFFINITY, g, False, g.selects(pod, self.namespace_labels), weight=t.weight or 0)
                for t in pod.preferred_pod_affinity
                for g in (self._term_group(AFFINITY, pod, t),)
            ),
            key=lambda c: -c.weight,
        )
        preferred_anti = sorted(
            (
                Constraint(ANTI, g, False, g.selects(pod, self.namespace_labels), weight=t.weight or 0)
                for t in pod.preferred_pod_anti_affinity
                for g in (self._term_group(ANTI, pod, t),)
            ),
            key=lambda c: -c.weight,
        )
        return PodConstraints(
            tuple(required), tuple(preferred_affinity), tuple(preferred_anti), tuple(anyway)
        )

    def register_owner_terms(self, pod: Pod) -> None:
        """Create the groups of a running pod's required anti-affinity (so symmetry can be checked)."""
        for term in pod.pod_anti_affinity:
            self._term_group(ANTI, pod, term)

    def _label_key(self, pod: Pod) -> tuple[object, ...]:
        return (pod.namespace, tuple(sorted(pod.labels.items())))

    def selecting(self, pod: Pod) -> list[TopologyGroup]:
        """The groups that count this pod (cached per namespace and labels)."""
        key = self._label_key(pod)
        groups = self._selecting.get(key)
        if groups is None:
            groups = [g for g in self.groups.values() if g.selects(pod, self.namespace_labels)]
            self._selecting[key] = groups
        return groups

    def inverse_constraints(self, pod: Pod) -> tuple[Constraint, ...]:
        """Running or placed pods' anti-affinity terms that select this pod (symmetry)."""
        key = self._label_key(pod)
        found = self._inverse.get(key)
        if found is None:
            found = tuple(
                Constraint(INVERSE_ANTI, g, True, False)
                for g in self.anti_groups
                if g.selects(pod, self.namespace_labels)
            )
            self._inverse[key] = found
        return tuple(c for c in found if c.group.owners)

    def record(
        self,
        pod: Pod,
        domain_of: Mapping[str, str],
        keys: Iterable[str] | None = None,
        site: tuple[Requirements | None, tuple[Taint, ...]] = (None, ()),
    ) -> None:
        """Count a placed pod in the domains it landed in (only ``keys`` when given).

        ``site``: the new node's requirements (None for an existing node, whose labels are
        ``domain_of``) and its taints, which spreads' node filters read.
        """
        wanted = None if keys is None else frozenset(keys)
        for group in self.selecting(pod):
            if wanted is not None and group.key not in wanted:
                continue
            domain = domain_of.get(group.key)
            if domain is not None and _admits(group.node_filter, domain_of, site):
                group.counts[domain] = group.counts.get(domain, 0) + 1
                group.total += 1
        for term in pod.pod_anti_affinity:
            if wanted is not None and term.topology_key not in wanted:
                continue
            domain = domain_of.get(term.topology_key)
            if domain is not None:
                group = self._term_group(ANTI, pod, term)
                group.owners[domain] = group.owners.get(domain, 0) + 1


def _admits(
    node_filter: NodeFilter | None,
    labels: Mapping[str, str],
    site: tuple[Requirements | None, tuple[Taint, ...]],
) -> bool:
    if node_filter is None:
        return True
    requirements, taints = site
    if requirements is None:
        return node_filter.admits_node(labels, taints)
    return node_filter.admits_claim(requirements, taints)


def host_constraints(constraints: Iterable[Constraint]) -> list[Constraint]:
    """The constraints keyed on the node itself."""
    return [c for c in constraints if c.key == HOSTNAME]


def domain_constraints(constraints: Iterable[Constraint]) -> dict[str, list[Constraint]]:
    """The constraints keyed on a node label other than the hostname, by key."""
    by_key: dict[str, list[Constraint]] = {}
    for c in constraints:
        if c.key != HOSTNAME:
            by_key.setdefault(c.key, []).append(c)
    return by_key
