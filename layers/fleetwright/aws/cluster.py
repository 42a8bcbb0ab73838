"""What a node needs to know about its EKS cluster to join it."""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright.aws.clients import AwsClients


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """The EKS cluster nodes join: API endpoint, CA bundle (base64 PEM), version and service CIDR."""

    name: str
    endpoint: str
    ca_bundle: str
    version: str
    service_cidr: str = "10.100.0.0/16"


def describe_cluster(clients: AwsClients, name: str) -> ClusterInfo:
    """``eks:DescribeCluster`` → :class:`ClusterInfo`."""
    cluster = clients.eks.describe_cluster(name=name)["cluster"]
    network = cluster.get("kubernetesNetworkConfig") or {}
    return ClusterInfo(
        name=name,
        endpoint=str(cluster.get("endpoint", "")),
        ca_bundle=str((cluster.get("certificateAuthority") or {}).get("data", "")),
        version=str(cluster.get("version", "")),
        service_cidr=str(network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr") or "10.100.0.0/16"),
    )
