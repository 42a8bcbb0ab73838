"""The AWS cloud provider in one object: instance types, launch, describe, terminate."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fleetwright.aws.clients import AwsClients, clients_for
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.fleet import FleetLauncher
from fleetwright.aws.instances import (
    Instance,
    TerminateResult,
    describe_instances,
    list_instances,
    terminate_instances,
)
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.nodeclass import NodeClassResolver
from fleetwright.aws.request import LaunchedInstance, LaunchError, LaunchRequest
from fleetwright.aws.unavailable import UnavailableOfferings, default_cache
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType


class AwsProvider:
    """Everything Fleetwright asks of AWS for one cluster.

    ``clients`` defaults to the module-scope clients of ``region``; ``unavailable`` to the process-wide
    in-memory unavailable-offerings cache.
    """

    def __init__(
        self,
        cluster: ClusterInfo,
        region: str,
        *,
        clients: AwsClients | None = None,
        unavailable: UnavailableOfferings | None = None,
    ) -> None:
        self.cluster = cluster
        self.clients = clients or clients_for(region)
        self.unavailable = unavailable if unavailable is not None else default_cache()
        self.resolver = NodeClassResolver(self.clients, cluster)
        self.launcher = FleetLauncher(self.clients, cluster.name, self.resolver, unavailable=self.unavailable)

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """Instance types with offerings; with a node class, only those its AMIs boot, with its kubelet
        settings applied."""
        if node_class is None:
            return list_instance_types(self.clients, unavailable=self.unavailable)
        return list_instance_types(
            self.clients,
            accept=self.resolver.instance_type_filter(node_class),
            kubelet=node_class.kubelet_overrides(),
            unavailable=self.unavailable,
        )

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim; raises LaunchError."""
        return self.launcher.launch(request)

    def launch_many(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch NodeClaims, batching identical ones."""
        return self.launcher.launch_many(requests)

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids`` (gone or foreign ones are left out)."""
        return describe_instances(self.clients, self.cluster.name, instance_ids)

    def list(self) -> list[Instance]:
        """Every live instance of this cluster."""
        return list_instances(self.clients, self.cluster.name)

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate instances of this cluster; raises NotOwnedError for any that is not ours."""
        return terminate_instances(self.clients, self.cluster.name, instance_ids)
