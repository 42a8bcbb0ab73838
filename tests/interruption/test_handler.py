"""The interruption handler on SQS batches: what each event does, duplicates, ordering, bad messages."""

from __future__ import annotations

import json
import threading
from typing import Any

from fleetwright.kube.resources import EVENTS
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.interruption import (
    REBALANCE,
    SCHEDULED_CHANGE,
    SPOT_WARNING,
    STATE_CHANGE,
    Interruptions,
    claimed_node,
    for_instance,
)
from tests.support.termination import Harness

CLAIM = "default-abcd1234"


def _node_with_pods(harness: Harness, pods: int = 2) -> tuple[dict[str, Any], str]:
    instance, node = claimed_node(harness, CLAIM), "node-a"
    for i in range(pods):
        harness.pod(f"web-{i}", node)
    return instance, node


def _replacements(harness: Harness) -> list[NodeClaimRecord]:
    return [r for r in harness.world.state.nodeclaims.list() if r.id != CLAIM]


def test_spot_warning_marks_the_offering_replaces_and_terminates(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness)
    instance_id = instance["InstanceId"]
    zone = instance["Placement"]["AvailabilityZone"]

    response = interruptions.deliver(for_instance(SPOT_WARNING, instance_id))

    assert response == {"batchItemFailures": []}
    assert harness.world.state.unavailable.is_unavailable("m5.large", zone, "spot")
    replacements = _replacements(harness)
    assert len(replacements) == 1
    replacement = replacements[0]
    assert replacement.status == ClaimStatus.LAUNCHED and replacement.instance_id
    assert (replacement.instance_type, replacement.zone, replacement.capacity_type) != (
        "m5.large",
        zone,
        "spot",
    )
    assert replacement.pod_count == 2
    [execution] = interruptions.executions()
    assert execution["name"] == f"{instance_id}-SpotInterruption-1"
    result = harness.wait(execution["executionArn"])
    assert result["status"] == "SUCCEEDED", result
    request = json.loads(result["input"])
    assert request["deadline"] == "2027-01-15T08:01:45Z"  # two minutes after the warning, less 15 s
    assert request["waitForReplacement"] is False
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    assert harness.world.state.nodeclaims.get(CLAIM).status == ClaimStatus.TERMINATED  # type: ignore[union-attr]
    if harness.strict is not None:  # the replacement has been up a while: EC2 lists it by now
        harness.strict.consistency.settle()
    assert harness.instance_state(replacement.instance_id) == "running"


def test_duplicate_deliveries_start_one_workflow_and_launch_once(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance, _ = _node_with_pods(harness)
    event = for_instance(SPOT_WARNING, instance["InstanceId"])
    redelivered = threading.Event()
    # Hold the workflow at its first step so the redeliveries find it running.
    harness.before_step.append(lambda step, _: redelivered.wait(10) if step == "cordon" else None)

    first = interruptions.deliver(event)
    second = interruptions.deliver(event, event)
    redelivered.set()

    assert first == second == {"batchItemFailures": []}
    assert len(interruptions.executions()) == 1
    assert len(_replacements(harness)) == 1
    assert interruptions.metrics.total("InterruptionDuplicates") == 2
    harness.wait(interruptions.executions()[0]["executionArn"])


def test_terminated_before_the_warning_cleans_up_and_ignores_the_late_warning(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness)
    instance_id = instance["InstanceId"]
    harness.world.aws.clients.ec2.terminate_instances(InstanceIds=[instance_id])  # EC2 got there first

    response = interruptions.deliver(
        for_instance(STATE_CHANGE, instance_id), for_instance(SPOT_WARNING, instance_id)
    )

    assert response == {"batchItemFailures": []}
    assert harness.world.kube.get_node(node) is None
    assert harness.world.kube.list_pods_on_node(node) == []
    assert harness.world.state.nodeclaims.get(CLAIM).status == ClaimStatus.TERMINATED  # type: ignore[union-attr]
    assert interruptions.executions() == []
    assert _replacements(harness) == []
    assert interruptions.metrics.total("InterruptionEventsIgnored", Reason="AlreadyGone") == 1


def test_events_for_instances_of_others_are_acknowledged_and_ignored(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    stranger = harness.launch_instance(owned=False)
    node = harness.node_for(stranger, "not-ours")

    response = interruptions.deliver(
        for_instance(SPOT_WARNING, stranger["InstanceId"]),
        for_instance(STATE_CHANGE, "i-0000000000000dead"),
    )

    assert response == {"batchItemFailures": []}
    assert interruptions.executions() == []
    assert harness.world.kube.get_node(node) is not None
    assert harness.world.kube.get_node(node)["spec"].get("unschedulable") is None  # type: ignore[index]
    assert harness.instance_state(stranger["InstanceId"]) == "running"
    assert interruptions.metrics.total("InterruptionEventsIgnored", Reason="NotOwned") == 2


def test_the_bad_messages_of_a_batch_are_rejected_alone_and_deleted(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness, pods=0)

    response = interruptions.deliver(
        "}{ garbage",
        for_instance(REBALANCE, instance["InstanceId"]),
        json.dumps({**SPOT_WARNING, "detail-type": "EC2 Fleet Error"}),
        json.dumps({**SPOT_WARNING, "detail": {}}),
    )

    # Refused for good: not failed back (the same message would be refused on every receive).
    assert response == {"batchItemFailures": []}
    rejected = interruptions.metrics
    assert [
        rejected.total("InterruptionMessagesRejected", Reason=r)
        for r in ("NotJson", "UnknownEvent", "InvalidEvent")
    ] == [1, 1, 1]
    events = harness.world.client.list(EVENTS, "default").items
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == node] == [
        "SpotRebalanceRecommendation"
    ]


def test_rebalance_recommendation_records_an_event_and_a_metric_only(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness)

    assert interruptions.deliver(for_instance(REBALANCE, instance["InstanceId"])) == {"batchItemFailures": []}

    assert interruptions.metrics.total("RebalanceRecommendations") == 1
    events = harness.world.client.list(EVENTS, "default").items
    [event] = [e for e in events if e["involvedObject"]["name"] == node]
    assert (event["reason"], event["type"], event["message"]) == (
        "SpotRebalanceRecommendation",
        "Normal",
        "Spot rebalance recommendation was triggered",
    )
    assert interruptions.executions() == [] and _replacements(harness) == []
    assert harness.world.kube.get_node(node)["spec"].get("unschedulable") is None  # type: ignore[index]


def test_scheduled_change_waits_for_the_replacement_then_terminates_early(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness)
    instance_id = instance["InstanceId"]
    awaited: list[dict[str, Any]] = []

    def replacement_registers(step: str, payload: dict[str, Any]) -> None:
        if step == "await_replacement":
            awaited.append(payload)
            if len(awaited) == 2:  # the first check finds no node yet; then the kubelet registers
                [replacement] = _replacements(harness)
                harness.world.register_node(
                    f"aws:///{replacement.zone}/{replacement.instance_id}", "node-new", ready=True
                )

    harness.before_step.append(replacement_registers)
    assert interruptions.deliver(for_instance(SCHEDULED_CHANGE, instance_id)) == {"batchItemFailures": []}

    [execution] = interruptions.executions()
    assert execution["name"] == f"{instance_id}-ScheduledChange-1"
    result = harness.wait(execution["executionArn"])
    assert result["status"] == "SUCCEEDED", result
    request = json.loads(result["input"])
    assert request["deadline"] == "2027-01-15T08:50:00Z"  # ten minutes before the 09:00 retirement
    assert request["waitForReplacement"] is True
    assert request["replacementClaims"] == [r.id for r in _replacements(harness)]
    steps = harness.step_names()
    assert steps[:4] == ["cordon", "await_replacement", "await_replacement", "drain"]
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None


def test_stopped_instance_is_cleaned_up_and_terminated(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance, node = _node_with_pods(harness)
    instance_id = instance["InstanceId"]
    harness.world.aws.clients.ec2.stop_instances(InstanceIds=[instance_id])

    assert interruptions.deliver(for_instance(STATE_CHANGE, instance_id, state="stopped")) == {
        "batchItemFailures": []
    }

    assert harness.world.kube.get_node(node) is None
    assert harness.steps.kube.get_pod("default", "web-0") is None
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    claim = harness.world.state.nodeclaims.get(CLAIM)
    assert claim is not None and claim.status == ClaimStatus.TERMINATED and claim.reason == "instance stopped"
    assert interruptions.metrics.total("NodesCleanedUp", State="stopped") == 1
