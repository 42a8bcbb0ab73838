"""Stand-ins for what moto does not emulate, shared by the local sandbox and the tests: a spot market
and the public EKS AMI parameters in SSM. Each hooks into boto3's event system or moto's backend, so
the code under test makes its real calls."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
from moto.core.botocore_stubber import MockRawResponse


def _http(status: int = 200, body: str = "") -> AWSResponse:
    return AWSResponse("https://fake", status, {}, MockRawResponse(body))


@dataclass
class SpotMarket:
    """Answers DescribeSpotPriceHistory from a table instead of moto's flat 0.00001.

    Each (type, zone) gets ``price(type, zone)``; an hour-old entry with a different price precedes it,
    so only code that keeps the latest entry gets it right.
    """

    offerings: Mapping[str, frozenset[str]]
    price: Callable[[str, str], float]
    calls: int = 0

    def install(self, ec2: Any) -> None:
        ec2.meta.events.register_first("before-call.ec2.DescribeSpotPriceHistory", self._answer)

    def _answer(self, params: Mapping[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls += 1
        now = datetime.datetime.now(datetime.UTC)
        history = []
        for name, zones in sorted(self.offerings.items()):
            for zone in sorted(zones):
                current = self.price(name, zone)
                history.append(self._entry(name, zone, current * 3, now - datetime.timedelta(hours=1)))
                history.append(self._entry(name, zone, current, now))
        return _http(), {"SpotPriceHistory": history}

    @staticmethod
    def _entry(name: str, zone: str, price: float, when: datetime.datetime) -> dict[str, Any]:
        return {
            "InstanceType": name,
            "AvailabilityZone": zone,
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": f"{price:.6f}",
            "Timestamp": when,
        }


def seed_ssm_parameter(name: str, value: str, region: str = "us-east-1") -> None:
    """Create a parameter under ``/aws/`` (which PutParameter refuses) in moto's SSM backend."""
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    backend._parameters[name].append(
        Parameter(  # type: ignore[abstract]
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.datetime.now(),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def seed_eks_amis(ec2: Any, k8s_version: str, region: str = "us-east-1") -> dict[tuple[str, str], str]:
    """Register EKS AL2023 images in moto and publish them under their public SSM parameter names
    (``alias al2023@latest``); returns ``{(arch, variant): image id}``."""
    from fleetwright.aws.amis import alias_parameters

    ids: dict[tuple[str, str], str] = {}
    for parameter, arch, variant in alias_parameters("al2023@latest", k8s_version):
        image = ec2.register_image(
            Name=f"amazon-eks-node-al2023-{arch}-{variant}-{k8s_version}-v20261101",
            Architecture="x86_64" if arch == "amd64" else "arm64",
            RootDeviceName="/dev/xvda",
        )["ImageId"]
        seed_ssm_parameter(parameter, str(image), region)
        ids[(arch, variant)] = str(image)
    return ids


def seed_windows_amis(ec2: Any, k8s_version: str, region: str = "us-east-1") -> dict[str, str]:
    """Register EKS-optimized Windows Server Core images (2019, 2022, and 2025 from Kubernetes 1.35) and
    publish them under their public SSM parameter names; returns ``{family: image id}``."""
    from fleetwright.aws.amis import WINDOWS_2025_MIN_MINOR, windows_alias_parameter
    from fleetwright.catalog.os_family import WINDOWS_RELEASES

    ids: dict[str, str] = {}
    minor = int(k8s_version.partition(".")[2] or 0)
    for family, (release, _) in WINDOWS_RELEASES.items():
        if release == "2025" and minor < WINDOWS_2025_MIN_MINOR:
            continue
        image = ec2.register_image(
            Name=f"Windows_Server-{release}-English-Core-EKS_Optimized-{k8s_version}-2026.11.01",
            Architecture="x86_64",
            RootDeviceName="/dev/sda1",
        )["ImageId"]
        seed_ssm_parameter(windows_alias_parameter(family, k8s_version), str(image), region)
        ids[family] = str(image)
    return ids
