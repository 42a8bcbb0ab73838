"""What the launch step is asked to do, and what it reports back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.aws.failures import LaunchFailure
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.taints import Taint


@dataclass(frozen=True, slots=True, eq=False)
class LaunchRequest:
    """One node to launch (a NodeClaim): the provider-side view of the scheduler's ``NewNodeClaim``.

    ``instance_types`` are the compatible types, cheapest first; ``zones`` and ``capacity_types``
    narrow their offerings (empty means any). ``labels`` are the NodePool template labels plus the
    claim's single-valued requirement labels; they, the taints and the startup taints are registered
    by the kubelet. ``node_class`` is the EC2NodeClass (:class:`fleetwright.model.ec2nodeclass.EC2NodeClass`)
    and ``node_class_name`` its metadata name.
    """

    nodeclaim: str
    nodepool: str
    instance_types: tuple[InstanceType, ...]
    zones: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class: Any = None
    node_class_name: str = ""
    reservation_ids: tuple[str, ...] = ()  # the capacity reservations a reserved launch may use (any)
    efa: bool = False  # the claim's pods request vpc.amazonaws.com/efa: launch with EFA interfaces


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The capacity reservation a launch template targets: its id, type (``default`` or
    ``capacity-block``) and whether it is interruptible."""

    id: str
    reservation_type: str = "default"
    interruptible: bool = False


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


class LaunchError(Exception):
    """No instance was launched for a NodeClaim; ``failures`` say why (typed, see
    :mod:`fleetwright.aws.failures`).

    ``may_have_launched`` is True when a CreateFleet request may have taken effect without an answer
    (it timed out, or EC2 failed internally): the claim must then be settled by finding its instance by
    tag, not failed at once.
    """

    def __init__(
        self, nodeclaim: str, failures: Sequence[LaunchFailure], *, may_have_launched: bool = False
    ) -> None:
        self.nodeclaim = nodeclaim
        self.failures = list(dict.fromkeys(failures))
        self.may_have_launched = may_have_launched
        summary = "; ".join(self.reasons) if self.failures else "no reason given"
        super().__init__(f"cannot launch nodeclaim {nodeclaim}: {summary}")

    @property
    def reasons(self) -> list[str]:
        """The failures as readable lines."""
        return [f.render() for f in self.failures]

    @property
    def codes(self) -> list[str]:
        """The distinct failure codes (metric dimensions)."""
        return list(dict.fromkeys(f.code for f in self.failures))
