"""What every controller function connects to: AWS clients, the state table, the cloud provider and the
Kubernetes API. The handlers build their controllers from these (imported on their first invocation, so
boto3 and the adapters stay out of their cold start).

The cloud provider and the cluster cache are made (and their modules imported) when first used: the
termination steps need neither, and their first invocation stays as short as it was before they shared
these connections.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from fleetwright.aws.clients import AwsClients, clients_for
from fleetwright.aws.cluster import ClusterInfo, describe_cluster
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.state import StateStore

if TYPE_CHECKING:
    from fleetwright.aws.provider import AwsProvider
    from fleetwright.kube.cache import ClusterCache


class Connections:
    """The shared clients of one function process, and its cluster cache (listed on first use, then kept
    current by watches for the life of the process)."""

    def __init__(
        self, clients: AwsClients, state: StateStore, info: ClusterInfo, region: str, client: KubeClient
    ) -> None:
        self.clients = clients
        self.state = state
        self.info = info
        self.region = region
        self.client = client
        self.kube = KubeCluster(client)

    @cached_property
    def cloud(self) -> AwsProvider:
        """EC2 through an ``AwsProvider``, its unavailable offerings kept in the state table."""
        from fleetwright.aws.provider import AwsProvider

        return AwsProvider(self.info, self.region, clients=self.clients, unavailable=self.state.unavailable)

    @cached_property
    def cache(self) -> ClusterCache:
        """The watch-fed cluster cache (nothing is listed or watched until a pass reads it)."""
        from fleetwright.kube.cache import ClusterCache

        return ClusterCache(self.client)

    def stop(self) -> None:
        """Stop the cluster cache's watches, if it was ever made."""
        if "cache" in self.__dict__:
            self.cache.stop()


def connect(cluster: str, table: str, region: str, kubeconfig: str | None = None) -> Connections:
    """Connect to ``cluster`` in ``region``: the state table ``table``, EC2 (``Connections.cloud``), and
    the Kubernetes API through ``kubeconfig`` when given, else with EKS token authentication."""
    clients = clients_for(region)
    state = StateStore(table, cluster, region=region)
    info = describe_cluster(clients, cluster)
    # The endpoint and CA come from the DescribeCluster just made: no second call for the Kubernetes client.
    client = (
        KubeClient.from_kubeconfig(kubeconfig)
        if kubeconfig
        else KubeClient.for_eks(
            cluster,
            region,
            endpoint=info.endpoint,
            certificate_authority=info.ca_bundle or None,
            credentials=clients.session,
        )
    )
    return Connections(clients, state, info, region, client)
