"""The whole chain: an EC2 event through EventBridge into the queue, the handler, the workflow, and out as a
terminated instance and a deleted Node; a bad message rejected and deleted; a message whose handling keeps
failing on its way to the dead-letter queue."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from fleetwright.kube.resources import PODS
from fleetwright.local.inprocess.interruption import run_interruption
from fleetwright.workflow.request import format_time
from tests.kube.objects import pod_object
from tests.support.interruption import SPOT_WARNING, Interruptions, for_instance, received_event
from tests.support.provisioning import make_config, nodepool
from tests.support.termination import Harness


class _Ec2Outage:
    """A cloud whose every DescribeInstances fails."""

    def describe(self, instance_ids: object) -> dict[str, Any]:
        raise RuntimeError("EC2 unavailable")


def _queue(harness: Harness) -> tuple[Any, str, str]:
    """The interruption queue with its dead-letter queue (maxReceiveCount 3), as infra/ deploys it, but
    with no visibility timeout so a failed message comes back at once."""
    sqs = harness.world.aws.clients.client("sqs")
    dlq = sqs.create_queue(QueueName="interruption-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName="interruption",
        Attributes={
            "VisibilityTimeout": "0",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
        },
    )["QueueUrl"]
    return sqs, queue, dlq


def _poll(interruptions: Interruptions, sqs: Any, queue: str) -> dict[str, Any]:
    """What the Lambda event source mapping does: receive, invoke, delete what succeeded."""
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
        "Messages", []
    )
    if not messages:
        return {"received": 0, "failed": []}
    from tests.support.termination import FakeContext

    response = interruptions.module.handler(received_event(messages), FakeContext("fleetwright-interruption"))
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return {"received": len(messages), "failed": sorted(failed)}


def test_spot_warning_from_eventbridge_ends_in_a_terminated_instance_and_no_node(
    interruptions: Interruptions, full_envelopes: None
) -> None:
    harness = interruptions.harness
    harness.clock.now = time.time()  # EventBridge stamps the envelope with the real time
    instance = harness.launch_instance(spot=True)
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    sqs, queue, _ = _queue(harness)
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = harness.world.aws.clients.client("events")
    events.put_rule(
        Name="spot-interruptions",
        EventPattern=json.dumps(
            {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}
        ),
    )
    events.put_targets(Rule="spot-interruptions", Targets=[{"Id": "queue", "Arn": queue_arn}])
    events.put_events(
        Entries=[
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance['InstanceId']}"],
                "Detail": json.dumps({"instance-id": instance["InstanceId"], "instance-action": "terminate"}),
            }
        ]
    )

    assert _poll(interruptions, sqs, queue) == {"received": 1, "failed": []}

    [execution] = interruptions.executions()
    result = harness.wait(execution["executionArn"])
    assert result["status"] == "SUCCEEDED", result
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    assert harness.steps.kube.get_pod("default", "web-0") is None
    assert sqs.receive_message(QueueUrl=queue).get("Messages", []) == []


def test_a_malformed_message_is_rejected_once_and_deleted(interruptions: Interruptions) -> None:
    sqs, queue, dlq = _queue(interruptions.harness)
    sqs.send_message(QueueUrl=queue, MessageBody="definitely not an event")

    polls = [_poll(interruptions, sqs, queue) for _ in range(2)]

    # Refused for good (the same body would be refused again): deleted, with its metric and log line.
    assert [p["received"] for p in polls] == [1, 0]
    assert polls[0]["failed"] == []
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="NotJson") == 1
    assert sqs.receive_message(QueueUrl=dlq).get("Messages", []) == []


def test_a_message_that_keeps_failing_reaches_the_dead_letter_queue_after_three_receives(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    harness.clock.now = time.time()
    instance = harness.launch_instance(spot=True)
    sqs, queue, dlq = _queue(harness)
    event = for_instance(SPOT_WARNING, instance["InstanceId"])
    event["time"] = format_time(datetime.fromtimestamp(harness.clock.now, tz=UTC))
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(event))

    interruptions.controller.cloud = _Ec2Outage()  # type: ignore[assignment]
    polls = [_poll(interruptions, sqs, queue) for _ in range(4)]

    assert [p["received"] for p in polls] == [1, 1, 1, 0]
    assert all(len(p["failed"]) == 1 for p in polls[:3])
    [dead] = sqs.receive_message(QueueUrl=dlq)["Messages"]
    assert json.loads(dead["Body"])["id"] == event["id"]


def test_in_process_chain_for_the_demo_terminates_and_replaces(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    world = harness.world
    instance = harness.launch_instance(spot=True)
    node = harness.node_for(instance, "node-a")
    world.client.create(PODS, pod_object("web-0", node=node))

    report = run_interruption(
        instance["InstanceId"],
        "spot-interruption",
        kube=world.kube,
        cloud=world.cloud,
        state=world.state,
        config=make_config(nodepool(capacity_types=["spot", "on-demand"])),
        clock=world.wall,
        sleep=lambda _s: None,
    )

    [outcome] = report.outcomes
    assert outcome.action == "workflow-started" and outcome.replacement is not None
    assert len(outcome.replacement.claims) == 1
    [execution] = report.executions
    assert execution.status == "SUCCEEDED", execution.state
    assert execution.history[0] == "cordon" and execution.history[-1] == "finalize_claim"
    assert report.event["detail"]["instance-id"] == instance["InstanceId"]
    assert report.event["time"] == format_time(datetime.fromtimestamp(world.wall(), tz=UTC))
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert world.kube.get_node(node) is None
