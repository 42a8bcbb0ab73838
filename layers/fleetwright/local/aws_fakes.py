"""Stand-ins for what moto does not emulate, shared by the local sandbox and the tests: a spot market
and the public EKS AMI parameters in SSM. Each hooks into boto3's event system or moto's backend, so
the code under test makes its real calls."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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


@dataclass
class PlacementGroups:
    """Answers DescribePlacementGroups (moto lacks it) from ``groups``, as the API reference says EC2 does.

    ``GroupIds`` and ``GroupNames`` select groups, and a name or id that matches none is refused with
    ``InvalidPlacementGroup.Unknown``; filters ``state``, ``strategy``, ``group-name`` and
    ``spread-level`` narrow the answer; no selection lists every group. Each group is a dict of the
    response's fields (``GroupName``, ``GroupId``, ``Strategy``, ``State``, ``PartitionCount`` …).
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribePlacementGroups.html
    """

    groups: list[dict[str, Any]]
    calls: int = 0
    _asked: dict[str, Any] = field(default_factory=dict, repr=False)

    def install(self, ec2: Any) -> None:
        # before-call sees the serialized request; the parameters as sent are kept one step earlier.
        ec2.meta.events.register_first("provide-client-params.ec2.DescribePlacementGroups", self._keep)
        ec2.meta.events.register_first("before-call.ec2.DescribePlacementGroups", self._answer)

    def _keep(self, params: Mapping[str, Any], **_: Any) -> None:
        self._asked = dict(params)

    def add(
        self, name: str, strategy: str, *, partitions: int = 0, state: str = "available", group_id: str = ""
    ) -> str:
        """Create a group; returns its id."""
        group_id = group_id or f"pg-{len(self.groups) + 1:017x}"
        group: dict[str, Any] = {"GroupName": name, "GroupId": group_id, "Strategy": strategy, "State": state}
        if strategy == "partition":
            group["PartitionCount"] = partitions or 2
        self.groups.append(group)
        return group_id

    def _answer(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls += 1
        params = self._asked
        found = list(self.groups)
        for field_name, key in (("GroupIds", "GroupId"), ("GroupNames", "GroupName")):
            wanted = list(params.get(field_name) or [])
            if not wanted:
                continue
            unknown = [value for value in wanted if value not in {g[key] for g in self.groups}]
            if unknown:
                body = (
                    "<Response><Errors><Error><Code>InvalidPlacementGroup.Unknown</Code><Message>"
                    f"The Placement Group '{unknown[0]}' is unknown.</Message></Error></Errors></Response>"
                )
                return _http(400, body), {
                    "Error": {
                        "Code": "InvalidPlacementGroup.Unknown",
                        "Message": f"The Placement Group '{unknown[0]}' is unknown.",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
            found = [g for g in found if g[key] in wanted]
        filters = {
            "state": "State",
            "strategy": "Strategy",
            "group-name": "GroupName",
            "spread-level": "SpreadLevel",
        }
        for entry in params.get("Filters") or []:
            attribute = filters.get(str(entry.get("Name")))
            if attribute is not None:
                found = [g for g in found if str(g.get(attribute, "")) in entry.get("Values", [])]
        return _http(), {"PlacementGroups": [dict(g) for g in found]}
