"""The AWS side every in-process benchmark starts from, in moto: a VPC whose subnets and security group
carry the cluster's discovery tag, EKS-optimized AMIs, and Fleetwright's state table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

K8S_VERSION = "1.31"


def seed_network(clients: Any, cluster: str, zones: Sequence[str], table: str) -> list[str]:
    """A /18 subnet per zone in one VPC, a security group, EKS AMIs for ``K8S_VERSION`` and the state
    table ``table``; returns the subnet ids, in the order of ``zones``."""
    from fleetwright.local.aws_fakes import seed_discovery_network, seed_eks_amis
    from fleetwright.state.table import create_state_table

    ec2 = clients.ec2
    subnets = seed_discovery_network(ec2, cluster, zones, prefix=18)
    seed_eks_amis(ec2, K8S_VERSION)
    create_state_table(clients.client("dynamodb"), table)
    return subnets
