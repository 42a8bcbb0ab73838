"""What the interruption handler tells users on the NodeClaim and Node of an interrupted instance, with the
reasons and messages of Karpenter's AWS provider."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube.resources import EVENTS
from tests.support.interruption import (
    REBALANCE,
    SCHEDULED_CHANGE,
    SPOT_WARNING,
    STATE_CHANGE,
    Interruptions,
    claimed_node,
    for_instance,
)

CLAIM = "default-abcd1234"
NODE = "node-a"


def _events(interruptions: Interruptions, name: str, kind: str) -> list[tuple[str, str, str]]:
    client = interruptions.harness.world.client
    listed = client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
    return sorted(
        (e["reason"], e["type"], e["message"]) for e in listed if e["involvedObject"]["kind"] == kind
    )


@pytest.mark.parametrize(
    ("template", "detail", "notice"),
    [
        (SPOT_WARNING, {}, ("SpotInterrupted", "Warning", "Spot interruption warning was triggered")),
        (
            SCHEDULED_CHANGE,
            {},
            ("InstanceUnhealthy", "Warning", "An unhealthy warning was triggered for the instance"),
        ),
    ],
)
def test_an_interruption_that_terminates_says_what_and_that_termination_started(
    interruptions: Interruptions, template: dict[str, Any], detail: dict[str, Any], notice: tuple[str, ...]
) -> None:
    instance = claimed_node(interruptions.harness, CLAIM, NODE)

    response = interruptions.deliver(for_instance(template, instance["InstanceId"], **detail))

    assert response == {"batchItemFailures": []}
    assert notice in _events(interruptions, CLAIM, "NodeClaim")
    assert notice in _events(interruptions, NODE, "Node")
    assert (
        "TerminatingOnInterruption",
        "Warning",
        "Interruption triggered termination for the NodeClaim",
    ) in _events(interruptions, CLAIM, "NodeClaim")
    assert (
        "TerminatingOnInterruption",
        "Warning",
        "Interruption triggered termination for the Node",
    ) in _events(interruptions, NODE, "Node")


@pytest.mark.parametrize(
    ("state", "reason", "message"),
    [
        ("terminated", "InstanceTerminating", "Instance is terminating"),
        ("stopped", "InstanceStopping", "Instance is stopping"),
    ],
)
def test_an_instance_that_left_says_how_on_its_claim(
    interruptions: Interruptions, state: str, reason: str, message: str
) -> None:
    harness = interruptions.harness
    instance = claimed_node(harness, CLAIM, NODE)
    instance_id = instance["InstanceId"]
    if state == "terminated":
        harness.world.aws.clients.ec2.terminate_instances(InstanceIds=[instance_id])
    else:
        harness.world.aws.clients.ec2.stop_instances(InstanceIds=[instance_id])

    response = interruptions.deliver(for_instance(STATE_CHANGE, instance_id, state=state))

    assert response == {"batchItemFailures": []}
    found = _events(interruptions, CLAIM, "NodeClaim")
    assert (reason, "Warning", message) in found
    assert (
        "TerminatingOnInterruption",
        "Warning",
        "Interruption triggered termination for the NodeClaim",
    ) in found


def test_a_rebalance_recommendation_is_a_normal_event_and_starts_nothing(
    interruptions: Interruptions,
) -> None:
    instance = claimed_node(interruptions.harness, CLAIM, NODE)

    interruptions.deliver(for_instance(REBALANCE, instance["InstanceId"]))

    expected = [("SpotRebalanceRecommendation", "Normal", "Spot rebalance recommendation was triggered")]
    assert _events(interruptions, CLAIM, "NodeClaim") == expected
    assert _events(interruptions, NODE, "Node") == expected
    assert interruptions.executions() == []


def test_an_events_api_that_refuses_never_stops_the_handling(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance = claimed_node(harness, CLAIM, NODE)
    harness.apiserver.faults.inject(403, verb="POST", resource="events", times=100)

    response = interruptions.deliver(for_instance(SPOT_WARNING, instance["InstanceId"]))

    assert response == {"batchItemFailures": []}
    assert len(interruptions.executions()) == 1  # the node is still drained and terminated
    assert interruptions.metrics.total("EventsNotRecorded") >= 1
    assert harness.world.client.list(EVENTS).items == []
