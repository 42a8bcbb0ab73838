"""A Kubernetes API server that accepts requests and never answers (a hang, not a reset), for 60 and 300 s:
during a drain and during a provisioning pass. Every invocation ends before its Lambda timeout with its
outcome recorded (a drain step as a retried TransientError, a pass with its claims in the table), and once
the API answers again every promise holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleetwright.kube import KubeClient
from fleetwright.runtime.function import FunctionRuntime
from tests.chaos.faults import During
from tests.chaos.figures import check
from tests.chaos.harness import Chaos
from tests.chaos.test_drain_faults import consolidation
from tests.kube.hang import HungApi
from tests.support.termination import FakeContext

TIMEOUT_SECONDS = 60.0  # what FakeContext says is left when an invocation starts


@pytest.fixture
def hung(chaos: Chaos, client: KubeClient) -> HungApi:
    """The API every component shares, hung on demand on the world's clock."""
    return HungApi(client, chaos.wall, chaos.wall.advance)


@pytest.fixture
def durations(chaos: Chaos, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, float]]]:
    """Each termination step invocation's virtual duration, its Kubernetes calls bounded as the handler
    bounds them."""
    found: list[tuple[str, float]] = []
    harness = chaos.harness
    harness.handler.runtime.clock = chaos.wall
    invoke = harness.invoke

    def timed(payload: dict[str, Any]) -> tuple[bool, Any]:
        started = chaos.wall()
        try:
            return invoke(payload)
        finally:
            found.append((str(payload.get("step")), chaos.wall() - started))

    monkeypatch.setattr(harness, "invoke", timed)
    yield found


def within_timeout(durations: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return [(step, seconds) for step, seconds in durations if seconds > TIMEOUT_SECONDS]


@pytest.mark.parametrize("seconds", [60, 300])
def test_api_hangs_during_a_drain(
    chaos: Chaos, hung: HungApi, durations: list[tuple[str, float]], seconds: int
) -> None:
    consolidation(chaos)
    fired: list[bool] = []

    def hook(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain" and not fired:
            fired.append(True)
            hung.hang(seconds)

    chaos.harness.before_step.append(hook)
    chaos.disrupt()
    chaos.settle(disruption=True)
    assert fired and hung.read_timeouts, "the drain met the hang"
    assert within_timeout(durations) == []
    assert any(step == "drain" for step, _ in durations)
    check(f"API hangs {seconds} s during a disruption drain", chaos.figures(needed=0))


def provision_bounded(chaos: Chaos, holder: str) -> float:
    """One provisioner invocation with its Kubernetes calls bounded as the handler bounds them; its
    virtual duration."""
    runtime: FunctionRuntime[None] = FunctionRuntime("provisioner", "test", lambda _l, _m: None)
    runtime.clock = chaos.wall
    started = chaos.wall()
    with runtime.kubernetes_deadline(FakeContext("fleetwright-provisioner")):
        chaos.provision(holder)
    return chaos.wall() - started


@pytest.mark.parametrize("seconds", [60, 300])
@pytest.mark.parametrize("when", ["pass start", "after CreateFleet"])
def test_api_hangs_during_a_provisioning_pass(chaos: Chaos, hung: HungApi, seconds: int, when: str) -> None:
    chaos.world.pending(2)
    start: Callable[[], None] = lambda: hung.hang(seconds)  # noqa: E731
    if when == "pass start":
        start()
    else:
        During("after-call.ec2.CreateFleet", start).install(chaos.ec2)
    took = [provision_bounded(chaos, "hung")]
    for _ in range(3):
        chaos.wall.advance(60)
        took.append(provision_bounded(chaos, "next-run"))
    assert hung.read_timeouts, "the pass met the hang"
    assert max(took) <= TIMEOUT_SECONDS
    chaos.settle()
    check(f"API hangs {seconds} s from {when} in a provisioning pass", chaos.figures(needed=1))
