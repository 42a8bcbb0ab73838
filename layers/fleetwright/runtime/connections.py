"""What every controller function connects to: AWS clients, the state table, the cloud provider and the
Kubernetes API. The handlers build their controllers from these (imported on their first invocation, so
boto3 and the adapters stay out of their cold start)."""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright.aws.clients import AwsClients, clients_for
from fleetwright.aws.cluster import describe_cluster
from fleetwright.aws.provider import AwsProvider
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.cache import ClusterCache
from fleetwright.state import StateStore


@dataclass(frozen=True, slots=True)
class Connections:
    """The shared clients of one function process, and its cluster cache (listed on first use, then kept
    current by watches for the life of the process)."""

    clients: AwsClients
    state: StateStore
    cloud: AwsProvider
    kube: KubeCluster
    cache: ClusterCache


def connect(cluster: str, table: str, region: str, kubeconfig: str | None = None) -> Connections:
    """Connect to ``cluster`` in ``region``: the state table ``table``, EC2 through an ``AwsProvider``
    (its unavailable offerings kept in the table), and the Kubernetes API through ``kubeconfig`` when
    given, else with EKS token authentication."""
    clients = clients_for(region)
    state = StateStore(table, cluster, region=region)
    info = describe_cluster(clients, cluster)
    cloud = AwsProvider(info, region, clients=clients, unavailable=state.unavailable)
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
    return Connections(clients, state, cloud, KubeCluster(client), ClusterCache(client))
