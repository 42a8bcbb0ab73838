"""The disruption planner's inputs and outputs: plain data, so a decision can be logged, tested, benchmarked
and re-validated.

The controller (I/O) gathers a :class:`DisruptionInput` — nodes with what is known about them, the
NodePools and EC2NodeClasses, the catalog, DaemonSets, PodDisruptionBudgets — and the pure planner turns it
into a :class:`Plan`: repairs, forceful expiration and scale-down commands, plus at most one graceful
command per pass (the methods of :mod:`fleetwright.disruption.method`, in Karpenter's order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from fleetwright.catalog.bill import DEFAULT_REGION
from fleetwright.claims.terms import ClaimTerms
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.hashes import HASH_VERSION
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import NODEPOOL
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import LabelSelector, Pod
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling.types import NewNodeClaim

if TYPE_CHECKING:
    from fleetwright.disruption.balanced import Score

# Disruption reasons (budgets' ``reasons`` use the first three; Expired and Unhealthy are forceful and not
# budgeted).
EMPTY: Final = "Empty"
DRIFTED: Final = "Drifted"
UNDERUTILIZED: Final = "Underutilized"
EXPIRED: Final = "Expired"
UNHEALTHY: Final = "Unhealthy"

# Methods (``Command.method``); the planner's ``METHODS`` holds the order a pass tries them in.
EMPTINESS: Final = "emptiness"
DRIFT: Final = "drift"
MULTI_NODE: Final = "multi-node-consolidation"
SINGLE_NODE: Final = "single-node-consolidation"
EXPIRATION: Final = "expiration"
REPAIR: Final = "repair"


@dataclass(slots=True)
class DisruptionSettings:
    """Knobs beyond Karpenter's (anti-churn) and the limits of the search.

    A consolidation must save at least ``max(min_saving_fraction × whole bill of the removed nodes,
    min_saving_dollars)`` per hour (0 and 0 by default: any cheaper replacement, as Karpenter; raising
    them is an anti-churn choice); nodes younger than ``min_node_age_seconds`` are not consolidated
    (emptiness and drift still apply; 0 by default: ``consolidateAfter`` counted from the node's last pod
    event, as Karpenter counts it, is the only wait). ``max_candidates`` caps multi-node consolidation
    (Karpenter: 100); ``spot_to_spot`` (off by default, like Karpenter's ``SpotToSpotConsolidation``
    feature gate) allows
    replacing a spot node by a cheaper spot node when at least ``spot_to_spot_min_types`` cheaper types
    remain. A command older than ``revalidate_after_seconds``
    is recomputed before acting. ``default_drain_seconds`` bounds draining when the NodePool sets no
    terminationGracePeriod (``expiration_drain_seconds`` for expirations). ``node_repair`` (off by default,
    like Karpenter's ``NodeRepair`` feature gate) replaces nodes unhealthy past their condition's toleration.
    After starting a graceful command the controller reads and plans again at once (Karpenter re-queues);
    ``max_commands_per_pass`` bounds those rounds in one invocation and ``command_window_seconds`` the time
    after which none starts (the invocation's timeout must leave room for them).
    """

    min_saving_fraction: float = 0.0
    min_saving_dollars: float = 0.0
    min_node_age_seconds: float = 0.0
    max_candidates: int = 100
    spot_to_spot: bool = False
    spot_to_spot_min_types: int = 15
    revalidate_after_seconds: float = 15.0
    default_drain_seconds: float = 3600.0
    expiration_drain_seconds: float = 23 * 3600.0
    node_repair: bool = False
    max_commands_per_pass: int = 50
    command_window_seconds: float = 20.0


@dataclass(slots=True, eq=False)
class NodeState:
    """One node as the disruption planner sees it.

    ``node`` is the scheduler's view (labels, allocatable, pods). ``price`` is the node's offering in USD per
    hour (0 when unknown: such a node is never consolidated for savings). ``created_at`` is when its
    instance launched (epoch seconds). ``empty_since`` is when it was first seen holding no pod that would
    need a new home (None while it holds one). ``terminating``: already cordoned for disruption, being
    deleted, or a termination workflow runs for it. ``annotations`` are the Node's annotations.
    ``claim_id``/``instance_id`` tie it to its NodeClaim record and EC2 instance; ``image_id`` is the AMI it
    booted; ``nodepool_hash``/``nodeclass_hash`` were recorded at launch (""
    when unknown: no hash drift is reported), digested at ``hash_version``. ``terms`` are the
    ``expireAfter`` and ``terminationGracePeriod`` its claim copied at launch (None when it has none of its
    own: its NodePool's current ones apply, :mod:`fleetwright.claims.terms`).
    ``subnet_id``/``security_group_ids`` are its instance's now
    ("" / empty when unknown: no subnet or security-group drift is reported). ``conditions`` are the Node's
    status conditions: type → (status, lastTransitionTime in epoch seconds, None when absent).
    ``last_pod_event`` is when a pod needing a new home was last bound to or gone from the node, never
    before its initialization (:mod:`fleetwright.disruption.podevents`; None when not known: its launch
    counts).
    """

    node: Node
    instance_type: str
    capacity_type: str
    zone: str
    price: float
    created_at: float
    initialized: bool = True
    terminating: bool = False
    empty_since: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    claim_id: str = ""
    instance_id: str = ""
    image_id: str = ""
    nodepool_hash: str = ""
    nodeclass_hash: str = ""
    hash_version: str = HASH_VERSION
    terms: ClaimTerms | None = None
    subnet_id: str = ""
    security_group_ids: frozenset[str] = frozenset()
    conditions: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    last_pod_event: float | None = None

    @property
    def name(self) -> str:
        """The Node's name."""
        return self.node.name

    @property
    def nodepool(self) -> str:
        """The NodePool that owns the node (label ``karpenter.sh/nodepool``; "" for nodes not ours)."""
        return self.node.labels.get(NODEPOOL, "")


@dataclass(frozen=True, slots=True)
class Pdb:
    """A PodDisruptionBudget: the pods it selects in its namespace and how many may be evicted now."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int


@dataclass(slots=True, eq=False)
class DisruptionInput:
    """Everything one planning pass looks at.

    ``nodes`` are all nodes of the cluster (Fleetwright's and others: others only receive pods).
    ``in_flight`` are launched NodeClaims not registered yet, as scheduler nodes. ``instance_types`` is the
    catalog the provisioner would use (offerings carry prices and availability). ``amis`` maps an
    EC2NodeClass name to the AMI ids it resolves to now, ``subnets``/``security_groups`` to the subnet and
    security-group ids its selector terms resolve to now (a class missing, or resolving to none: no such
    drift is reported); ``nodepool_hashes``/``nodeclass_hashes`` are the current hashes. ``now`` is epoch
    seconds.
    """

    nodes: list[NodeState]
    nodepools: list[NodePool]
    nodeclasses: list[EC2NodeClass]
    instance_types: list[InstanceType]
    now: float
    daemonsets: list[Pod] = field(default_factory=list)
    pdbs: list[Pdb] = field(default_factory=list)
    in_flight: list[Node] = field(default_factory=list)
    # Pods waiting for capacity (kube-scheduler found no node for them): consolidation keeps their room.
    pending: list[Pod] = field(default_factory=list)
    volumes: dict[str, Requirements | str] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    amis: dict[str, set[str]] = field(default_factory=dict)
    subnets: dict[str, set[str]] = field(default_factory=dict)
    security_groups: dict[str, set[str]] = field(default_factory=dict)
    nodepool_hashes: dict[str, str] = field(default_factory=dict)
    nodeclass_hashes: dict[str, str] = field(default_factory=dict)
    settings: DisruptionSettings = field(default_factory=DisruptionSettings)
    # Capacity Blocks of our nodes that end soon (id → end, epoch seconds): their nodes are expired.
    expiring_reservations: dict[str, float] = field(default_factory=dict)
    # Per EC2NodeClass name, the instance types it boots now (InstanceTypeNotFound drift) and the capacity
    # reservations it selects now (reservation drift); a class missing is unknown: no such drift.
    bootable: dict[str, set[str]] = field(default_factory=dict)
    reservations: dict[str, set[str]] = field(default_factory=dict)
    # Where node bills are priced, and per EC2NodeClass name whether its subnets assign public IPv4
    # addresses on launch (fleetwright.catalog.bill.node_class_view; unknown: they do not).
    region: str = DEFAULT_REGION
    public_subnets: dict[str, bool] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class Command:
    """One disruption decision: remove ``candidates`` (node names) and launch ``replacements`` first.

    ``savings`` is the expected change in USD per hour (the whole bill of the removed nodes less the
    replacements': instances, volumes, public IPv4 addresses, burstable CPU credits; 0 for drift and
    expiration that replace like for like). ``explanation`` is the log line's text;
    ``condition`` names the node condition a repair acts on; ``scores`` are the Balanced NodePools' scores of
    a consolidation.
    """

    method: str
    reason: str
    candidates: list[NodeState]
    replacements: list[NewNodeClaim] = field(default_factory=list)
    savings: float = 0.0
    explanation: str = ""
    condition: str = ""
    scores: list[Score] = field(default_factory=list)  # a Balanced NodePool's, per pool in the command

    @property
    def node_names(self) -> list[str]:
        """The names of the nodes this command removes."""
        return [c.name for c in self.candidates]


@dataclass(slots=True)
class Plan:
    """A pass's decisions: ``repairs`` of unhealthy nodes and ``expirations`` (forceful, not budgeted, may be
    several), at most one graceful ``command``, why notable nodes were left alone (``skipped``: node name →
    reason), why single-node consolidation found no command for the candidates it tried
    (``unconsolidatable``: node name → reason), and why unhealthy nodes are not repaired
    (``repair_blocked``: node name → reason)."""

    repairs: list[Command] = field(default_factory=list)
    expirations: list[Command] = field(default_factory=list)
    scale_down: list[Command] = field(default_factory=list)  # static NodePools' surplus nodes, not budgeted
    command: Command | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    unconsolidatable: dict[str, str] = field(default_factory=dict)
    repair_blocked: dict[str, str] = field(default_factory=dict)
