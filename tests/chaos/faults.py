"""AWS faults the chaos scenarios inject through botocore event hooks (the code under test makes its real
calls): a Lambda killed at a chosen point, slow calls, partial fulfilment, throttling before execution."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse


class LambdaKilled(BaseException):
    """The Lambda runtime ending an invocation (timeout, out of memory): no ``except Exception`` catches it
    and nothing after the point of death runs."""


@dataclass
class Kill:
    """Raises :class:`LambdaKilled` at ``event`` (e.g. ``after-call.ec2.CreateFleet``) of the first
    ``times`` calls; ``fired`` counts the kills."""

    event: str
    times: int = 1
    fired: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register(self.event, self._kill)

    def _kill(self, **_: Any) -> None:
        if self.fired < self.times:
            self.fired += 1
            raise LambdaKilled(self.event)


@dataclass
class During:
    """Runs ``action`` (once per call, the first ``times`` calls) at ``event``: something the world does while
    a call is in flight — time passing, a competing invocation, the API going down."""

    event: str
    action: Callable[[], None]
    times: int = 1
    fired: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register(self.event, self._run)

    def _run(self, **_: Any) -> None:
        if self.fired < self.times:
            self.fired += 1
            self.action()


@dataclass
class EmptyFleet:
    """The first ``times`` CreateFleet calls launch nothing and report their cheapest override under
    ``Errors`` (InsufficientInstanceCapacity): EC2's answer when it fulfils 0 of a one-instance target. The
    answer comes from ``before-call``, so moto launches nothing for it."""

    times: int = 1
    refused: list[str] = field(default_factory=list)
    _params: dict[str, Any] = field(default_factory=dict)

    def install(self, ec2: Any) -> None:
        ec2.meta.events.register("provide-client-params.ec2.CreateFleet", self._remember)
        ec2.meta.events.register_first("before-call.ec2.CreateFleet", self._answer)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self._params = copy.deepcopy(params)

    def _answer(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if len(self.refused) >= self.times:
            return None
        params = self._params
        config = params["LaunchTemplateConfigs"][0]
        override = config["Overrides"][0]
        self.refused.append(f"{override['InstanceType']} in {override['AvailabilityZone']}")
        error = {
            "LaunchTemplateAndOverrides": {
                "LaunchTemplateSpecification": copy.deepcopy(config["LaunchTemplateSpecification"]),
                "Overrides": copy.deepcopy(override),
            },
            "Lifecycle": params["TargetCapacitySpecification"]["DefaultTargetCapacityType"],
            "ErrorCode": "InsufficientInstanceCapacity",
            "ErrorMessage": "We currently do not have sufficient capacity in the Availability Zone.",
        }
        parsed = {"FleetId": "fleet-empty", "Instances": [], "Errors": [error]}
        return AWSResponse("https://ec2.us-east-1.amazonaws.com", 200, {}, MockRawResponse(b"")), parsed


@dataclass
class ThrottleCalls:
    """The first ``times`` calls of ``operation`` fail with RequestLimitExceeded (HTTP 503) before any
    request is sent: the call never executes, as on EC2. The answer comes from a ``before-call`` hook, the
    one botocore event whose first answer replaces the request (moto serves ``before-send``, where every
    handler runs and moto would execute the call anyway)."""

    operation: str
    times: int
    throttled: int = 0
    executed: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register_first(f"before-call.ec2.{self.operation}", self._answer)
        client.meta.events.register(f"after-call.ec2.{self.operation}", self._count)

    def _answer(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if self.throttled >= self.times:
            return None
        self.throttled += 1
        parsed = {
            "Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."},
            "ResponseMetadata": {"HTTPStatusCode": 503, "RequestId": "throttled"},
        }
        return AWSResponse("https://ec2.us-east-1.amazonaws.com", 503, {}, MockRawResponse(b"")), parsed

    def _count(self, http_response: Any, **_: Any) -> None:
        if http_response is not None and http_response.status_code < 300:
            self.executed += 1


def throttle(client: Any, operation: str, times: int) -> ThrottleCalls:
    """Install :class:`ThrottleCalls` on ``client``."""
    fault = ThrottleCalls(operation, times)
    fault.install(client)
    return fault
