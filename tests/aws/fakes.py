"""Stand-ins for what moto does not emulate: a spot market, EC2 capacity shortages, the EKS AMI
parameters in SSM, and (re-exported from ``tests.aws.faults``) throttling and other faults. Each hooks
into a boto3 client's event system, so the code under test makes its real calls."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse

from fleetwright.local.aws_fakes import SpotMarket, seed_ssm_parameter
from tests.aws.faults import FailCall, PartialFleet, SlowCall, Throttle


def _http(status: int = 200, body: str = "") -> AWSResponse:
    return AWSResponse("https://fake", status, {}, MockRawResponse(body))


@dataclass
class FleetCapacity:
    """Makes CreateFleet behave like EC2 when some offerings have no capacity.

    Overrides for offerings in ``exhausted`` ((type, zone) pairs, or (type, zone, capacity type)) are
    taken out of the request before moto sees it and come back as ``Errors`` with ``code``; when none
    remain, EC2's answer (no instances, only errors) is returned without calling moto. Every request
    as the code sent it is kept in ``requests``.
    """

    exhausted: set[tuple[str, ...]] = field(default_factory=set)
    code: str = "InsufficientInstanceCapacity"
    requests: list[dict[str, Any]] = field(default_factory=list)
    _refused: list[dict[str, Any]] = field(default_factory=list)
    _empty: bool = False

    def install(self, ec2: Any) -> None:
        events = ec2.meta.events
        events.register_first("provide-client-params.ec2.CreateFleet", self._filter)
        events.register_first("before-call.ec2.CreateFleet", self._short_circuit)
        events.register("after-call.ec2.CreateFleet", self._add_errors)

    def _is_exhausted(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone) in self.exhausted or (
            instance_type,
            zone,
            capacity_type,
        ) in self.exhausted

    def _filter(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(copy.deepcopy(params))
        capacity_type = params["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        self._refused = []
        for config in params["LaunchTemplateConfigs"]:
            kept = []
            for override in config["Overrides"]:
                if self._is_exhausted(override["InstanceType"], override["AvailabilityZone"], capacity_type):
                    self._refused.append(
                        {
                            "LaunchTemplateAndOverrides": {
                                "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                                "Overrides": override,
                            },
                            "Lifecycle": capacity_type,
                            "ErrorCode": self.code,
                            "ErrorMessage": f"no {capacity_type} capacity for {override['InstanceType']}",
                        }
                    )
                else:
                    kept.append(override)
            config["Overrides"] = kept
        params["LaunchTemplateConfigs"] = [c for c in params["LaunchTemplateConfigs"] if c["Overrides"]]
        self._empty = not params["LaunchTemplateConfigs"]

    def _short_circuit(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if not self._empty:
            return None
        return _http(), {"FleetId": "fleet-refused", "Instances": [], "Errors": list(self._refused)}

    def _add_errors(self, parsed: dict[str, Any], **_: Any) -> None:
        if not self._empty and self._refused:
            parsed.setdefault("Errors", []).extend(self._refused)


__all__ = [
    "FailCall",
    "FleetCapacity",
    "PartialFleet",
    "SlowCall",
    "SpotMarket",
    "Throttle",
    "seed_ssm_parameter",
]
