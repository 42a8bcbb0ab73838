"""The scheduler's view of a pod: what it requests and every constraint on where it may run."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model.labels import MIRROR_POD_ANNOTATION
from fleetwright.model.requirements import Requirements
from fleetwright.model.resources import ResourceList
from fleetwright.model.taints import Toleration


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector: ``matchLabels`` AND ``matchExpressions`` (as requirements)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: Requirements = field(default_factory=Requirements)

    def matches(self, labels: dict[str, str]) -> bool:
        """True when the labels satisfy the selector (an empty selector matches everything)."""
        return all(labels.get(k) == v for k, v in self.match_labels) and self.match_expressions.matches(
            labels
        )


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """``spec.topologySpreadConstraints[]`` (enforced by the scheduler from the topology issue on)."""

    topology_key: str
    max_skew: int
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None
    min_domains: int | None = None
    match_label_keys: tuple[str, ...] = ()
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term; ``weight`` is set for preferred terms only."""

    topology_key: str
    label_selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    weight: int | None = None


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the host (``hostPort``)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """Kubernetes' rule: same port and protocol, and the IPs overlap (0.0.0.0 overlaps all)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip == other.host_ip or "0.0.0.0" in (self.host_ip, other.host_ip)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A preferred node affinity term: its weight and requirements."""

    weight: int
    requirements: Requirements


@dataclass(slots=True, eq=False)
class Pod:
    """A pod as the scheduler sees it.

    ``requests`` already applies Kubernetes' rule: the larger of the summed containers and each init
    container (restartable sidecar init containers add to both), plus ``spec.overhead``.
    ``node_selector`` and ``required_affinity`` are requirements; the pod fits a node that satisfies
    ``node_selector`` AND at least one ``required_affinity`` term (any, when the tuple is empty).
    """

    namespace: str
    name: str
    requests: ResourceList
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    node_selector: Requirements = field(default_factory=Requirements)
    required_affinity: tuple[Requirements, ...] = ()
    preferred_affinity: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    volume_claims: tuple[str, ...] = ()
    node_name: str | None = None
    owner: tuple[str, str] | None = None  # (kind, name) of the controlling owner
    priority: int = 0
    phase: str = "Pending"
    started_at: float | None = None  # status.startTime (epoch seconds): do-not-disrupt durations start here

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def node_requirement_options(self) -> tuple[Requirements, ...]:
        """The alternative requirement sets a node must meet (nodeSelector AND one affinity term)."""
        if not self.required_affinity:
            return (self.node_selector,)
        return tuple(self.node_selector.intersect(term) for term in self.required_affinity)


def is_node_bound(pod: Pod) -> bool:
    """True for pods that live and die with their node: DaemonSet pods and mirror (static) pods."""
    return (pod.owner is not None and pod.owner[0] == "DaemonSet") or MIRROR_POD_ANNOTATION in pod.annotations
