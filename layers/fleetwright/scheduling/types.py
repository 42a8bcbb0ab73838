"""The scheduler's inputs and outputs: plain data, so decisions can be logged, tested and printed."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.catalog.bill import DEFAULT_VIEW, ZERO_BILL, NodeBill, NodeClassView
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.model.resources import ResourceList
from fleetwright.model.taints import Taint

# The pseudo-resource ``spec.limits.nodes`` counts: each node or claim of the NodePool is one.
NODES = "nodes"


@dataclass(slots=True, eq=False)
class NodePoolTemplate:
    """What the scheduler needs of a NodePool (and its EC2NodeClass's kubelet settings).

    ``usage`` is what the NodePool's existing nodes already count against ``limits``. ``packing`` says
    how its claims trade node count against cost (see docs/scheduling.md). A ``static`` pool (``replicas``
    set) keeps a fixed node count: pods may land on its nodes, but the scheduler never opens claims in it.
    ``bill`` is what its EC2NodeClass adds to each node's bill (volumes, public IPv4 address, region).
    """

    name: str
    requirements: Requirements = field(default_factory=Requirements)
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    weight: int = 0
    limits: ResourceList | None = None
    kubelet: KubeletOverrides | None = None
    node_class: str = ""
    usage: ResourceList = field(default_factory=dict)
    packing: str = "LowestCost"  # or "FewerNodes" (NodePool annotation fleetwright.io/packing)
    ami_family: str = ""  # the EC2NodeClass's; a Windows family makes Windows nodes
    static: bool = False
    bill: NodeClassView = DEFAULT_VIEW


@dataclass(slots=True, eq=False)
class SchedulingInput:
    """Everything one scheduling simulation looks at.

    ``daemonsets`` holds one pod per DaemonSet (its template): the scheduler reserves room for each that
    would run on a NodePool's nodes. ``volumes`` maps ``namespace/claim`` to the node requirements the
    claim imposes, or why it cannot be used (see :func:`fleetwright.model.volumes.volume_requirements`);
    a pod whose claim is missing there is unschedulable. ``namespace_labels`` serves pod affinity's
    ``namespaceSelector``.
    """

    pods: list[Pod]
    nodepools: list[NodePoolTemplate]
    instance_types: list[InstanceType]
    nodes: list[Node] = field(default_factory=list)
    daemonsets: list[Pod] = field(default_factory=list)
    volumes: dict[str, Requirements | str] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class NewNodeClaim:
    """A node to launch: its NodePool, the compatible instance types (cheapest first), the zones and
    capacity types it may use, the labels and taints it will carry and the pods it will run.

    ``requests`` sums the pods' and the DaemonSets' requests; ``price`` is the cheapest compatible
    offering in USD per hour; ``bill`` the node's whole hourly bill on it (instance, volumes, public IPv4
    address, burstable CPU credits: ``fleetwright.catalog.bill``).
    """

    name: str
    nodepool: str
    instance_types: list[InstanceType]
    zones: list[str]
    capacity_types: list[str]
    labels: dict[str, str]
    taints: list[Taint]
    pods: list[Pod]
    requests: ResourceList
    daemon_requests: ResourceList
    price: float
    requirements: Requirements = field(default_factory=Requirements)
    bill: NodeBill = ZERO_BILL


@dataclass(slots=True, eq=False)
class ExistingNodePlacement:
    """Pending pods the scheduler placed on a node that already exists (or is already launching)."""

    node: str
    pods: list[Pod]


@dataclass(slots=True, eq=False)
class PodError:
    """A pod that cannot be scheduled, and why, in words a user can act on."""

    pod: Pod
    reason: str


@dataclass(slots=True, eq=False)
class Results:
    """The scheduler's decision."""

    new_claims: list[NewNodeClaim] = field(default_factory=list)
    existing: list[ExistingNodePlacement] = field(default_factory=list)
    errors: list[PodError] = field(default_factory=list)

    @property
    def hourly_cost(self) -> float:
        """Sum of the new claims' prices in USD per hour."""
        return sum(claim.price for claim in self.new_claims)

    @property
    def bill(self) -> NodeBill:
        """The new claims' bills summed by part, USD per hour."""
        return sum((claim.bill for claim in self.new_claims), ZERO_BILL)

    @property
    def scheduled(self) -> int:
        """Number of pods placed on new or existing nodes."""
        return sum(len(c.pods) for c in self.new_claims) + sum(len(p.pods) for p in self.existing)
