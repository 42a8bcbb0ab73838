"""A node a person cordoned before its disruption began stays cordoned when the workflow gives it back
(a disruption called off at its deadline, a failed workflow), also when the Kubernetes API went away
while the node was being marked; a node Fleetwright cordoned is uncordoned."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube.resources import EVENTS, NODES
from tests.support.termination import Harness


def _blocked_node(harness: Harness, *, by_hand: bool) -> tuple[dict[str, Any], str]:
    """A node whose only pod a PodDisruptionBudget protects; cordoned by hand when ``by_hand``."""
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    if by_hand:
        harness.world.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pdb("db", {"app": "db"}, min_available=1)
    return instance, node


def _past_the_deadline_on_the_third_pass(harness: Harness) -> None:
    passes: list[int] = []

    def time_passes(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain":
            passes.append(1)
            if len(passes) == 3:
                harness.clock.advance(200)

    harness.before_step.append(time_passes)


def _node(harness: Harness, node: str) -> dict[str, Any]:
    obj = harness.world.kube.get_node(node)
    assert obj is not None
    return obj


def _tainted(obj: dict[str, Any]) -> bool:
    return any(t.get("key") == "karpenter.sh/disrupted" for t in obj["spec"].get("taints") or [])


@pytest.mark.parametrize("by_hand", [True, False], ids=["cordoned-by-hand", "cordoned-by-fleetwright"])
def test_a_called_off_disruption_gives_back_only_what_it_added(harness: Harness, by_hand: bool) -> None:
    instance, node = _blocked_node(harness, by_hand=by_hand)
    _past_the_deadline_on_the_third_pass(harness)

    result = harness.run(harness.request(instance, node, reason="Underutilized", onDeadline="abandon"))

    assert result["status"] == "SUCCEEDED", result
    obj = _node(harness, node)
    assert bool(obj["spec"].get("unschedulable")) is by_hand
    assert not _tainted(obj)
    assert harness.instance_state(instance["InstanceId"]) == "running"
    [event] = [
        e for e in harness.world.client.list(EVENTS, "default").items if e["reason"] == "DisruptionCalledOff"
    ]
    assert ("stays cordoned" in event["message"]) is by_hand


def test_a_cordon_by_hand_survives_an_api_outage_during_the_mark(harness: Harness) -> None:
    instance, node = _blocked_node(harness, by_hand=True)
    went_down: list[float] = []

    def outage_at_cordon(step: str, _payload: dict[str, Any]) -> None:
        if step == "cordon" and not went_down:
            went_down.append(harness.clock())
            harness.apiserver.faults.outage(100, clock=harness.clock)

    harness.before_step.append(outage_at_cordon)
    _past_the_deadline_on_the_third_pass(harness)

    result = harness.run(harness.request(instance, node, reason="Underutilized", onDeadline="abandon"))

    assert result["status"] == "SUCCEEDED", result
    assert went_down and harness.apiserver.faults.reset_connections > 0
    assert '"abandoned": true' in result["output"]
    obj = _node(harness, node)
    assert obj["spec"].get("unschedulable") is True and not _tainted(obj)


def test_a_failed_workflow_leaves_a_hand_cordoned_node_cordoned(harness: Harness) -> None:
    instance, node = _blocked_node(harness, by_hand=True)
    harness.apiserver.faults.inject(403, verb="GET", resource="pods", times=1)  # the drain cannot list

    result = harness.run(harness.request(instance, node, reason="Drifted"))

    assert result["status"] == "FAILED"
    [recorded] = harness.outputs("record_failure")
    assert recorded["failure"]["uncordoned"] is True  # given back: the taint is gone...
    obj = _node(harness, node)
    assert not _tainted(obj)
    assert obj["spec"].get("unschedulable") is True  # ...and the person's cordon stays
