"""What a launch is asked to do, and what it reports back."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.taints import Taint

# A launch offers at most this many instance types, the cheapest (Karpenter's limit for one NodeClaim):
# the claim records just these, so its record stays small and its in-flight size is what can launch.
MAX_INSTANCE_TYPES = 60

# The extended resource pods request for Elastic Fabric Adapter interfaces: a claim whose pods request it
# launches with EFA interfaces (``LaunchRequest.efa``), and an instance type offers as many as it supports.
EFA_RESOURCE = "vpc.amazonaws.com/efa"


@dataclass(frozen=True, slots=True, eq=False)
class LaunchRequest:
    """One node to launch (a NodeClaim): the provider-side view of the scheduler's ``NewNodeClaim``.

    ``instance_types`` are the compatible types, cheapest first; ``zones`` and ``capacity_types``
    narrow their offerings (empty means any). ``labels`` are the NodePool template labels plus the
    claim's single-valued requirement labels; they, the taints and the startup taints are registered
    by the kubelet. ``node_class`` is the EC2NodeClass and ``node_class_name`` its metadata name.
    """

    nodeclaim: str
    nodepool: str
    instance_types: tuple[InstanceType, ...]
    zones: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class: EC2NodeClass | None = None
    node_class_name: str = ""
    reservation_ids: tuple[str, ...] = ()  # the capacity reservations a reserved launch may use (any)
    efa: bool = False  # the claim's pods request EFA_RESOURCE: launch with EFA interfaces


@dataclass(frozen=True, slots=True)
class LaunchedInstance:
    """An instance launched (or found already launched) for a NodeClaim."""

    nodeclaim: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str = ""
    launch_template: str = ""
    price: float | None = None
    reused: bool = False  # found by the idempotency lookup instead of launched by this call
    # Node labels the launch decided: tenancy, placement group id and partition, the capacity
    # reservation's.
    labels: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def provider_id(self) -> str:
        """The Kubernetes ``spec.providerID`` the node will register with."""
        return f"aws:///{self.zone}/{self.instance_id}"
