"""What the launch step is asked to do, and what it reports back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

    def batch_key(self) -> tuple[Any, ...]:
        """Requests with equal keys differ only by NodeClaim id and may share one CreateFleet call."""
        return (
            self.nodepool,
            tuple(t.name for t in self.instance_types),
            tuple(sorted(self.zones)),
            tuple(sorted(self.capacity_types)),
            tuple(sorted(self.labels.items())),
            self.taints,
            self.startup_taints,
            self.node_class_name,
            _content_key(self.node_class),
        )


def _content_key(node_class: Any) -> Any:
    # Equal node classes parsed twice are still the same node class.
    dump = getattr(node_class, "model_dump_json", None)
    return dump() if callable(dump) else id(node_class)


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

    @property
    def provider_id(self) -> str:
        """The Kubernetes ``spec.providerID`` the node will register with."""
        return f"aws:///{self.zone}/{self.instance_id}"


class LaunchError(Exception):
    """No instance could be launched for a NodeClaim; ``reasons`` says what EC2 answered."""

    def __init__(self, nodeclaim: str, reasons: list[str]) -> None:
        self.nodeclaim = nodeclaim
        self.reasons = list(reasons)
        summary = "; ".join(self.reasons) if self.reasons else "no reason given"
        super().__init__(f"cannot launch nodeclaim {nodeclaim}: {summary}")
