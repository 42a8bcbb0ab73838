"""What the termination workflow tells users on the Node and NodeClaims it works on."""

from __future__ import annotations

from typing import Any

from fleetwright.kube.resources import EVENTS
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.termination.conftest import Harness


def events(harness: Harness, name: str, kind: str) -> list[tuple[str, str]]:
    listed = harness.world.client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
    return sorted((e["reason"], e["message"]) for e in listed if e["involvedObject"]["kind"] == kind)


def _claim(harness: Harness, claim_id: str, status: ClaimStatus, instance_id: str) -> None:
    harness.world.state.nodeclaims.create(
        NodeClaimRecord(
            id=claim_id,
            nodepool="default",
            status=str(status),
            created_at=harness.clock(),
            instance_id=instance_id,
        )
    )


def test_a_disrupted_node_and_its_claim_say_they_are_terminating(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, "default-abcd1234", ClaimStatus.INITIALIZED, instance["InstanceId"])
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)

    result = harness.run(harness.request(instance, node, reason="Underutilized"))

    assert result["status"] == "SUCCEEDED", result
    assert events(harness, node, "Node") == [("DisruptionTerminating", "Disrupting Node: Underutilized")]
    assert events(harness, "default-abcd1234", "NodeClaim") == [
        ("DisruptionTerminating", "Disrupting NodeClaim: Underutilized")
    ]


def test_waiting_for_a_replacement_says_so_on_the_replacement(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, "default-abcd1234", ClaimStatus.INITIALIZED, instance["InstanceId"])
    _claim(harness, "default-repl0001", ClaimStatus.LAUNCHED, "i-0123456789abcdef0")  # no node yet
    node = harness.node_for(instance, "node-a")
    request: dict[str, Any] = harness.request(
        instance,
        node,
        reason="Drifted",
        seconds_to_deadline=3600,
        waitForReplacement=True,
        replacementClaims=["default-repl0001"],
    )

    state = harness.steps.run("await_replacement", harness.steps.run("cordon", request))

    assert state["replacement"]["ready"] is False
    assert events(harness, "default-repl0001", "NodeClaim") == [
        ("DisruptionWaitingReadiness", "Waiting on readiness to continue disruption")
    ]
    assert events(harness, node, "Node") == []  # not terminating yet: the drain has not started
