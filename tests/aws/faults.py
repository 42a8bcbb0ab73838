"""Faults real AWS produces and moto never does: throttled attempts, failed calls, slow calls, fleets
that launch only part of their target. Each hooks into a boto3 client's event system, so the code under
test makes its real calls and meets the fault where AWS would put it.

A fault answers *instead of* moto, never after it: moto's stubber is itself a ``before-send`` handler and
botocore calls every ``before-send`` handler even when an earlier one returned a response, so a fault that
only returned a response would still let moto execute the request (a throttled CreateFleet would launch).
:func:`answer_instead_of_moto` points the attempt at an address moto does not serve before answering.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse

# moto's stubber serves only AWS endpoint addresses; a request sent here is left to whoever answered it.
UNSERVED_URL = "https://fault.invalid/"


def error_body(code: str, message: str) -> str:
    """An EC2 (query protocol) error document."""
    return (
        f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        "</Error></Errors><RequestID>fault</RequestID></Response>"
    )


def answer_instead_of_moto(request: Any, status: int, body: str) -> AWSResponse:
    """Answer one HTTP attempt so that moto's stubber, called after us, does not execute it."""
    request.url = UNSERVED_URL
    return AWSResponse(UNSERVED_URL, status, {}, MockRawResponse(body))


def error_answer(code: str, message: str, status: int = 400) -> tuple[AWSResponse, dict[str, Any]]:
    """A ``before-call`` answer: botocore raises it as a ``ClientError`` without sending anything."""
    parsed = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "fault"},
    }
    return AWSResponse(UNSERVED_URL, status, {}, MockRawResponse(error_body(code, message))), parsed


@dataclass
class Throttle:
    """Fails the first ``times`` HTTP attempts of an operation with ``RequestLimitExceeded`` (503), as EC2
    throttles: the attempt does nothing, and botocore's retry mode retries it.

    EC2 API throttling: https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html
    """

    operation: str
    times: int
    service: str = "ec2"
    code: str = "RequestLimitExceeded"
    attempts: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register_first(f"before-send.{self.service}.{self.operation}", self._send)

    def _send(self, request: Any, **_: Any) -> AWSResponse | None:
        self.attempts += 1
        if self.attempts > self.times:
            return None  # let moto answer
        return answer_instead_of_moto(request, 503, error_body(self.code, "Request limit exceeded."))


@dataclass
class FailCall:
    """Fails calls ``nth`` … ``nth + times - 1`` (1-based) of an operation with ``code``, before anything is
    executed. The whole call fails (what the caller sees once retries are spent); use :class:`Throttle`
    to fail single attempts."""

    operation: str
    code: str
    nth: int = 1
    times: int = 1
    message: str = "injected failure"
    status: int = 400
    service: str = "ec2"
    calls: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register_first(f"before-call.{self.service}.{self.operation}", self._call)

    def _call(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        self.calls += 1
        if self.nth <= self.calls < self.nth + self.times:
            return error_answer(self.code, self.message, self.status)
        return None


@dataclass
class SlowCall:
    """Delays every call of an operation by ``seconds`` through ``sleep`` (pass a fake clock's advance to
    keep tests instant)."""

    operation: str
    seconds: float
    sleep: Callable[[float], Any] = time.sleep
    service: str = "ec2"
    calls: int = 0

    def install(self, client: Any) -> None:
        client.meta.events.register_first(f"before-call.{self.service}.{self.operation}", self._call)

    def _call(self, **_: Any) -> None:
        self.calls += 1
        self.sleep(self.seconds)


@dataclass
class PartialFleet:
    """CreateFleet (instant) launches at most ``fulfil`` instances per call and lists the shortfall under
    ``Errors`` with ``code``, as an instant fleet does when capacity runs short (it returns the instances it
    launched and an error for what it could not). Applies to the first ``calls`` CreateFleet calls (all
    when ``None``).

    Instant fleets: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instant-fleet.html
    CreateFleet errors: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleetError.html
    """

    fulfil: int
    code: str = "InsufficientInstanceCapacity"
    calls: int | None = None
    seen: int = 0
    shortfalls: list[int] = field(default_factory=list)

    def install(self, client: Any) -> None:
        events = client.meta.events
        events.register("provide-client-params.ec2.CreateFleet", self._cap)
        events.register_first("before-call.ec2.CreateFleet", self._nothing_launched)
        events.register("after-call.ec2.CreateFleet", self._add_errors)

    def _cap(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        self.seen += 1
        if self.calls is not None and self.seen > self.calls:
            return
        target = params.get("TargetCapacitySpecification") or {}
        wanted = int(target.get("TotalTargetCapacity", 0))
        if wanted <= self.fulfil:
            return
        target["TotalTargetCapacity"] = self.fulfil
        self.shortfalls.append(wanted - self.fulfil)
        configs = params.get("LaunchTemplateConfigs") or [{}]
        first = configs[0]
        lifecycle = str(target.get("DefaultTargetCapacityType", "on-demand"))
        context["partial_fleet_errors"] = [
            {
                "LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": first.get("LaunchTemplateSpecification", {}),
                    "Overrides": (first.get("Overrides") or [{}])[0],
                },
                "Lifecycle": lifecycle,
                "ErrorCode": self.code,
                "ErrorMessage": f"We currently do not have sufficient capacity for {wanted - self.fulfil} "
                "more instances in the requested pools.",
            }
        ]
        context["partial_fleet_empty"] = self.fulfil == 0

    def _nothing_launched(
        self, context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        if not context.get("partial_fleet_empty"):
            return None
        context["partial_fleet_answered"] = True
        parsed = {
            "FleetId": "fleet-partial-0",
            "Instances": [],
            "Errors": context.get("partial_fleet_errors", []),
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
        return AWSResponse(UNSERVED_URL, 200, {}, MockRawResponse("")), parsed

    def _add_errors(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("partial_fleet_answered"):
            return
        errors = context.get("partial_fleet_errors")
        if errors:
            parsed.setdefault("Errors", []).extend(errors)


__all__ = ["FailCall", "PartialFleet", "SlowCall", "Throttle", "answer_instead_of_moto", "error_answer"]
