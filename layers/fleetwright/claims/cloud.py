"""What a launcher needs of a cloud provider (``fleetwright.aws.provider.AwsProvider`` in production,
or any stand-in with the same methods)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from fleetwright.aws.request import LaunchedInstance, LaunchRequest
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType


class Cloud(Protocol):
    """Instance types, launch, list and terminate for one cluster."""

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """Instance types with offerings (refused offerings marked unavailable); with a node class,
        only those it can boot."""
        ...

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim with its own CreateFleet, tagged with the claim's id (or find the instance
        already launched for it by that tag); raises ``LaunchError``. Called from several threads at once,
        each inside its own deadline scope (``fleetwright.aws.deadline``)."""
        ...

    def find_claimed(self, nodeclaims: Iterable[str]) -> Mapping[str, LaunchedInstance]:
        """Live instances launched for these NodeClaims, found by their tag."""
        ...

    def list(self) -> list[Any]:
        """This cluster's live instances (objects with ``id``, ``zone``, ``instance_type``,
        ``capacity_type`` and ``nodeclaim``)."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> Any:
        """Terminate this cluster's instances."""
        ...
