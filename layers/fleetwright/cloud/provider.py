"""The cloud provider contract: :class:`CloudProvider` is everything Fleetwright asks of the cloud for one
cluster; each capability types against the narrowest view below that covers its calls, so a stand-in (or a
provider built without the launch machinery) only has to offer what that capability uses.

Not found is an answer, not an error, for the batch calls (``describe`` leaves the id out, ``terminate``
lists it as already gone); :meth:`InstanceCloud.get` raises
:class:`~fleetwright.cloud.errors.InstanceNotFoundError`.
Instances without this cluster's ownership tag are never described as ours and never terminated
(:class:`~fleetwright.cloud.errors.NotOwnedError`). A launch that produced nothing raises
:class:`~fleetwright.cloud.errors.LaunchError`; a provider-side failure worth retrying,
:class:`~fleetwright.cloud.errors.TransientCloudError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from fleetwright.cloud.instances import Instance, LaunchTemplateInfo, TerminateResult
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.cloud.nodeclass import NodeClassResolution
from fleetwright.cloud.offerings import UnavailableOfferings
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.requirements import Requirements


class InstanceReader(Protocol):
    """Describing this cluster's instances (the disruption input, its sweep and its deletion retirer)."""

    def describe(self, instance_ids: Iterable[str]) -> Mapping[str, Instance]:
        """This cluster's instances among ``instance_ids``; ids that are gone or not ours are left out."""
        ...


class InstanceCloud(InstanceReader, Protocol):
    """Describing and terminating this cluster's instances (the termination workflow, interruption
    handling)."""

    def get(self, instance_id: str) -> Instance:
        """This cluster's instance ``instance_id``; raises InstanceNotFoundError when it is gone or not
        ours."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate this cluster's instances (ids already gone are reported so); raises NotOwnedError,
        terminating nothing, when any of them is not ours."""
        ...


class InventoryCloud(Protocol):
    """Listing what the cluster owns in the cloud and removing what nothing uses (garbage collection)."""

    def list(self) -> Sequence[Instance]:
        """Every live (pending, running, stopping, stopped) instance of this cluster."""
        ...

    def describe_any(self, instance_ids: Iterable[str]) -> Mapping[str, Instance]:
        """Instances among ``instance_ids`` whoever owns them, terminated ones included (ownership checks
        only: ``terminate`` still refuses anything not ours)."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate this cluster's instances; raises NotOwnedError for any that is not ours."""
        ...

    def launch_templates(self) -> Sequence[LaunchTemplateInfo]:
        """This cluster's launch templates."""
        ...

    def launch_template_image(self, template_id: str) -> str:
        """The image the template's latest version boots ("" when it names none)."""
        ...

    def delete_launch_template(self, name: str) -> bool:
        """Delete one of this cluster's launch templates; False when it was already gone."""
        ...


class LaunchCloud(Protocol):
    """Instance types, launch, list and terminate (the provisioner)."""

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """Instance types with offerings (refused offerings marked unavailable); with a node class, only
        those it can boot, with its kubelet settings and capacity reservations applied."""
        ...

    def node_class_requirements(self, node_class: EC2NodeClass) -> Requirements:
        """What the node class adds to its NodePools' requirements (its placement group's id and
        partitions; nothing when it has none)."""
        ...

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim, tagged with the claim's id (or find the instance already launched for it
        by that tag); raises LaunchError. Called from several threads at once, each inside its own
        deadline scope."""
        ...

    def find_claimed(self, nodeclaims: Iterable[str]) -> Mapping[str, LaunchedInstance]:
        """Live instances launched for these NodeClaims, found by their tag."""
        ...

    def list(self) -> Sequence[Instance]:
        """Every live instance of this cluster."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate this cluster's instances; raises NotOwnedError for any that is not ours."""
        ...


class DriftCloud(Protocol):
    """What the cloud says now about a node class's resources and the cluster's capacity reservations
    (drift and reservation expiry in the disruption input)."""

    def node_class_amis(self, node_class: EC2NodeClass) -> set[str]:
        """The image ids the node class's ``amiSelectorTerms`` select now."""
        ...

    def node_class_subnets(self, node_class: EC2NodeClass) -> set[str]:
        """The subnet ids the node class's ``subnetSelectorTerms`` select now."""
        ...

    def node_class_security_groups(self, node_class: EC2NodeClass) -> set[str]:
        """The security-group ids the node class's ``securityGroupSelectorTerms`` select now."""
        ...

    def expiring_reservations(self, reservation_ids: Sequence[str]) -> dict[str, float]:
        """The reservations among these ids that end soon (id → end, epoch seconds)."""
        ...


class NodeClassStatusCloud(Protocol):
    """What a node class's selector terms resolve to now, part by part (the EC2NodeClass status the
    provisioner writes)."""

    def node_class_status(self, node_class: EC2NodeClass) -> NodeClassResolution:
        """Its subnets, security groups, AMIs, instance profile and capacity reservations, each found or
        with the reason its lookup failed (a failed part never hides the others)."""
        ...


class CloudProvider(InstanceCloud, InventoryCloud, LaunchCloud, DriftCloud, NodeClassStatusCloud, Protocol):
    """Everything Fleetwright asks of the cloud for one cluster."""

    @property
    def unavailable(self) -> UnavailableOfferings:
        """The offerings recently refused, which launches and instance types skip (the interruption
        handler marks a spot interruption's)."""
        ...
