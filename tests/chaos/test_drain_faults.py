"""Kubernetes API faults while nodes are drained — an outage of 60, 100 or 300 s, 409 and 429 answers on
cordon and eviction — in a disruption (consolidation) and in a spot interruption: no pod evicted past its
PodDisruptionBudget before an explicit deadline, no node left cordoned once the API is back."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.figures import check
from tests.chaos.harness import Chaos
from tests.support.disruption import nodepool


def outage_at_first_drain(chaos: Chaos, seconds: float, *, after_handler: bool = False) -> None:
    """The API goes down as the workflow's first drain step starts (``after_handler``: and once the
    interruption handler's invocation, which launches the replacement, has returned)."""
    fired: list[bool] = []

    def hook(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain" and not fired:
            fired.append(True)
            if after_handler:
                chaos.queue().handled.wait(30)
            chaos.apiserver.faults.outage(seconds, clock=chaos.wall)

    chaos.harness.before_step.append(hook)


def consolidation(chaos: Chaos) -> tuple[str, str]:
    """Two half-empty nodes whose pods fit on one: a consolidation deletes one, evicting its pod; a PDB
    lets only one of the two pods be away at a time."""
    chaos.use(nodepool(consolidate_after="0s", budgets=[{"nodes": "100%"}]))
    a = chaos.node("m5.large")
    b = chaos.node("m5.large", zone="us-east-1b")
    chaos.pod("web-a", a, cpu="500m")
    chaos.pod("web-b", b, cpu="500m")
    chaos.pdb("web", min_available=1)
    return a, b


def interrupted(chaos: Chaos) -> str:
    """A spot node with three pods under a PDB that allows one away at a time; its interruption warning."""
    chaos.use(nodepool(consolidate_after="Never", capacity_types=["spot", "on-demand"]))
    node = chaos.node("m5.large", capacity_type="spot")
    for i in range(3):
        chaos.pod(f"web-{i}", node, cpu="200m")
    chaos.pdb("web", min_available=2)
    instance_id = chaos.instance_of(node)
    chaos.queue().send(chaos.spot_warning(instance_id), expect=chaos.terminated(instance_id))
    # From the workflow's deadline (the notice less a margin) on, the drain may delete what the PDB still
    # protects.
    chaos.explicit_deadlines = True
    return node


@pytest.mark.parametrize("seconds", [60, 100, 300])
def test_api_down_during_a_disruption_drain(chaos: Chaos, seconds: int) -> None:
    consolidation(chaos)
    outage_at_first_drain(chaos, seconds)
    chaos.disrupt()
    chaos.settle(disruption=True)
    check(f"API down {seconds} s during a disruption drain", chaos.figures(needed=0))


@pytest.mark.parametrize("seconds", [60, 100, 300])
def test_api_down_during_an_interruption_drain(chaos: Chaos, seconds: int) -> None:
    interrupted(chaos)
    outage_at_first_drain(chaos, seconds, after_handler=True)
    chaos.queue().drain()
    chaos.settle(disruption=True)
    check(f"API down {seconds} s during an interruption drain", chaos.figures(needed=1))


@pytest.mark.parametrize(("status", "times"), [(409, 3), (429, 8)])
def test_cordon_refused_during_a_disruption(chaos: Chaos, status: int, times: int) -> None:
    consolidation(chaos)
    chaos.apiserver.faults.inject(status, verb="PATCH", resource="nodes", times=times, retry_after=1)
    chaos.disrupt()
    chaos.settle(disruption=True)
    check(f"{status} x{times} on cordon (disruption)", chaos.figures(needed=0))


@pytest.mark.parametrize(("status", "times"), [(409, 3), (429, 8)])
def test_cordon_refused_during_an_interruption(chaos: Chaos, status: int, times: int) -> None:
    interrupted(chaos)
    chaos.apiserver.faults.inject(status, verb="PATCH", resource="nodes", times=times, retry_after=1)
    chaos.queue().drain()
    chaos.settle(disruption=True)
    check(f"{status} x{times} on cordon (interruption)", chaos.figures(needed=1))


@pytest.mark.parametrize(("status", "times"), [(409, 3), (429, 8)])
def test_eviction_refused_during_a_disruption(chaos: Chaos, status: int, times: int) -> None:
    consolidation(chaos)
    chaos.apiserver.faults.inject(
        status, verb="POST", resource="pods", subresource="eviction", times=times, retry_after=1
    )
    chaos.disrupt()
    chaos.settle(disruption=True)
    check(f"{status} x{times} on eviction (disruption)", chaos.figures(needed=0))


@pytest.mark.parametrize(("status", "times"), [(409, 3), (429, 8)])
def test_eviction_refused_during_an_interruption(chaos: Chaos, status: int, times: int) -> None:
    interrupted(chaos)
    chaos.apiserver.faults.inject(
        status, verb="POST", resource="pods", subresource="eviction", times=times, retry_after=1
    )
    chaos.queue().drain()
    chaos.settle(disruption=True)
    check(f"{status} x{times} on eviction (interruption)", chaos.figures(needed=1))
