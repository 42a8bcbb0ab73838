"""What the provisioner needs of a cloud provider (``fleetwright.aws.provider.AwsProvider`` in production,
or any stand-in with the same methods)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from fleetwright.aws.request import LaunchedInstance, LaunchError, LaunchRequest
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType


class Cloud(Protocol):
    """Instance types, launch, list and terminate for one cluster."""

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """Instance types with offerings (refused offerings marked unavailable); with a node class,
        only those it can boot."""
        ...

    def launch_many(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch NodeClaims (finding instances already launched for them by tag)."""
        ...

    def list(self) -> list[Any]:
        """This cluster's live instances (objects with ``id``, ``zone``, ``instance_type``,
        ``capacity_type`` and ``nodeclaim``)."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> Any:
        """Terminate this cluster's instances."""
        ...
