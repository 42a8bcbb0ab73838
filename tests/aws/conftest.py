"""Fixtures: fake credentials, moto per test, the region's instance type listing fetched once."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from moto import mock_aws

from fleetwright.aws import instancetypes
from fleetwright.aws.clients import AwsClients
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.ttlcache import clear_all_caches
from fleetwright.aws.unavailable import InMemoryUnavailableOfferings
from fleetwright.catalog.loader import ondemand_prices
from fleetwright.model.ec2nodeclass import EC2NodeClass
from tests.aws.fakes import FleetCapacity, SpotMarket

REGION = "us-east-1"
CLUSTER = "demo"
SPOT_DISCOUNT = 0.3

_FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@pytest.fixture(scope="session", autouse=True)
def fake_credentials() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in _FAKE_CREDENTIALS}
    os.environ.update(_FAKE_CREDENTIALS)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@dataclass
class RegionListing:
    types: list[dict[str, Any]]
    zone_offerings: dict[str, frozenset[str]]


@pytest.fixture(scope="session")
def listing(fake_credentials: None) -> RegionListing:
    """DescribeInstanceTypes and DescribeInstanceTypeOfferings through the real code, once (8-10 s)."""
    with mock_aws():
        clear_all_caches()
        clients = AwsClients(REGION)
        return RegionListing(
            instancetypes.describe_instance_types(clients), instancetypes.describe_zone_offerings(clients)
        )


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


@pytest.fixture
def aws(listing: RegionListing) -> Iterator[Aws]:
    """moto with a VPC (tagged subnets in us-east-1a/b, an untagged one in c), a tagged security group,
    a fake spot market and CreateFleet capacity control."""
    with mock_aws():
        clear_all_caches()
        instancetypes.prime_cache(REGION, listing.types, listing.zone_offerings)
        clients = AwsClients(REGION)
        ec2 = clients.ec2
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        tags = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]

        def subnet(cidr: str, zone: str, tagged: bool) -> str:
            spec = [{"ResourceType": "subnet", "Tags": tags}] if tagged else []
            return str(
                ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=spec)[
                    "Subnet"
                ]["SubnetId"]
            )

        subnets = {
            "a-small": subnet("10.0.0.0/24", "us-east-1a", True),
            "a-large": subnet("10.0.16.0/20", "us-east-1a", True),
            "b": subnet("10.0.32.0/24", "us-east-1b", True),
            "c-untagged": subnet("10.0.48.0/24", "us-east-1c", False),
        }
        group = ec2.create_security_group(
            GroupName="demo-nodes",
            Description="nodes",
            VpcId=vpc,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
        )["GroupId"]
        overrides: dict[tuple[str, str], float] = {}
        state = Aws(
            clients=clients,
            spot=None,  # type: ignore[arg-type]
            fleet=FleetCapacity(),
            spot_overrides=overrides,
            unavailable=InMemoryUnavailableOfferings(),
            vpc_id=vpc,
            subnets=subnets,
            security_group=group,
            cluster=ClusterInfo(
                name=CLUSTER,
                endpoint="https://EXAMPLE.gr7.us-east-1.eks.amazonaws.com",
                ca_bundle=base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n").decode(),
                version="1.31",
                service_cidr="10.100.0.0/16",
            ),
        )
        state.spot = SpotMarket(listing.zone_offerings, state.spot_price)
        state.spot.install(ec2)
        state.fleet.install(ec2)
        yield state
        clear_all_caches()


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


@pytest.fixture
def amis(aws: Aws) -> SeededAmis:
    """EKS AL2023 images registered in moto and published under the public SSM parameter names."""
    from fleetwright.local.aws_fakes import seed_eks_amis

    ids = seed_eks_amis(aws.clients.ec2, aws.cluster.version)
    return SeededAmis(ids)
