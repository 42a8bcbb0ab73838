"""The account the AWS fixtures build in moto (``tests/fixtures/aws.py``): its names, the types the fixtures
return, and the EC2NodeClass selecting its subnets and security group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.unavailable import InMemoryUnavailableOfferings
from fleetwright.catalog.loader import ondemand_prices
from fleetwright.model.ec2nodeclass import EC2NodeClass
from tests.aws.fakes import FleetCapacity, SpotMarket

REGION = "us-east-1"
CLUSTER = "demo"
SPOT_DISCOUNT = 0.3

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@dataclass
class RegionListing:
    types: list[dict[str, Any]]
    zone_offerings: dict[str, frozenset[str]]


def default_spot_price(name: str, zone: str) -> float:
    """A spot price derived from the static on-demand table; zones differ by a few percent."""
    ondemand = ondemand_prices(REGION).get(name, 1.0)
    return round(ondemand * SPOT_DISCOUNT * (1 + 0.01 * (ord(zone[-1]) - ord("a"))), 6)


@dataclass
class Aws:
    clients: AwsClients
    spot: SpotMarket
    fleet: FleetCapacity
    spot_overrides: dict[tuple[str, str], float]
    unavailable: InMemoryUnavailableOfferings
    vpc_id: str
    subnets: dict[str, str]  # name → subnet id
    security_group: str
    cluster: ClusterInfo

    def spot_price(self, name: str, zone: str) -> float:
        return self.spot_overrides.get((name, zone), default_spot_price(name, zone))


def node_class(**spec: Any) -> EC2NodeClass:
    """An EC2NodeClass selecting the fixture's tagged subnets and security group (overridable)."""
    body: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "instanceProfile": "demo-node-profile",
    }
    body.update(spec)
    return EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": body,
        }
    )


@dataclass
class SeededAmis:
    ids: dict[tuple[str, str], str]  # (arch, variant) → image id
