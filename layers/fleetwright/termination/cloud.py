"""The cloud side of termination: describe and terminate this cluster's instances (``fleetwright.aws``),
without the launch machinery ``AwsProvider`` builds (and without its ``eks:DescribeCluster`` call)."""

from __future__ import annotations

from collections.abc import Iterable

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.instances import Instance, TerminateResult, describe_instances, terminate_instances


class ClusterInstances:
    """This cluster's instances: ``describe`` leaves out instances without the ownership tag, ``terminate``
    refuses them (``NotOwnedError``)."""

    def __init__(self, clients: AwsClients, cluster: str) -> None:
        self.clients = clients
        self.cluster = cluster

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids``."""
        return describe_instances(self.clients, self.cluster, instance_ids)

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate this cluster's instances; raises NotOwnedError for one that is not ours."""
        return terminate_instances(self.clients, self.cluster, instance_ids)
