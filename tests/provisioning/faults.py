"""Small botocore hooks the launch fault tests need: a call that stalls (time passes on the test's clock
while something else happens), and a throttled attempt that never reaches moto."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse

# moto's stubber serves only AWS endpoint addresses: an attempt pointed here is answered by us alone.
UNSERVED_URL = "https://fault.invalid/"
THROTTLED_BODY = (
    "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
    "</Error></Errors><RequestID>fault</RequestID></Response>"
)


@dataclass
class Stall:
    """The first ``event`` call after :meth:`arm` runs ``meanwhile`` before it goes on: what happens
    elsewhere while the call is slow (another invocation takes the lease, a clock moves)."""

    event: str
    meanwhile: Callable[[], None]
    armed: bool = False
    fired: int = 0

    def install(self, client: Any) -> Stall:
        client.meta.events.register(self.event, self._hook)
        return self

    def arm(self) -> None:
        self.armed = True

    def _hook(self, **_: Any) -> None:
        if not self.armed:
            return
        self.armed = False  # before acting: what runs meanwhile may make the same call
        self.fired += 1
        self.meanwhile()


@dataclass
class ThrottleEveryAttempt:
    """Every HTTP attempt of ``operation`` is answered RequestLimitExceeded (503) without moto executing
    it, and takes ``seconds`` on ``advance`` (the test's clock).

    The time passes when the answer arrives (``response-received``), as a real attempt's time passes while
    it is sent, after every ``before-send`` handler has run: the launch deadline's checks then see the
    clock as it was before the attempt, whatever botocore's retry jitter."""

    operation: str
    advance: Callable[[float], None]
    seconds: float = 0.0
    attempts: list[str] = field(default_factory=list)

    def install(self, client: Any) -> ThrottleEveryAttempt:
        client.meta.events.register_first(f"before-send.ec2.{self.operation}", self._send)
        client.meta.events.register_first(f"response-received.ec2.{self.operation}", self._received)
        return self

    def uninstall(self, client: Any) -> None:
        client.meta.events.unregister(f"before-send.ec2.{self.operation}", self._send)
        client.meta.events.unregister(f"response-received.ec2.{self.operation}", self._received)

    def _send(self, request: Any, **_: Any) -> AWSResponse:
        self.attempts.append(str(request.url))
        request.url = UNSERVED_URL
        return AWSResponse(UNSERVED_URL, 503, {}, MockRawResponse(THROTTLED_BODY))

    def _received(self, **_: Any) -> None:
        self.advance(self.seconds)
