"""Interruption handling under faults: duplicate and concurrent deliveries, stale and out-of-order events,
failed workflows and deliveries that died half way. Each delivery goes through the Lambda handler; faults
come from botocore event hooks, the workflow's step hooks and the state table."""

from __future__ import annotations

import json
import threading
from typing import Any

from fleetwright.aws.tags import NODECLAIM_TAG
from fleetwright.cloud.deadline import current_deadline
from fleetwright.kube.resources import EVENTS
from fleetwright.state.interruptions import CLAIMED, InterruptionRecord, InterruptionRecords
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.interruption import (
    REPO_ROOT,
    SCHEDULED_CHANGE,
    SPOT_WARNING,
    STATE_CHANGE,
    Interruptions,
    claimed_node,
    for_instance,
    sqs_event,
)
from tests.support.termination import FakeContext, Harness, load_module

CLAIM = "default-abcd1234"


def _node_with_pods(harness: Harness, pods: int = 2) -> tuple[str, str]:
    instance, node = claimed_node(harness, CLAIM), "node-a"
    for i in range(pods):
        harness.pod(f"web-{i}", node, labels={"app": "web"})
    return str(instance["InstanceId"]), node


def _replacements(harness: Harness) -> list[NodeClaimRecord]:
    return [r for r in harness.world.state.nodeclaims.list() if r.id != CLAIM]


def _records(interruptions: Interruptions) -> InterruptionRecords:
    return interruptions.controller.records


def _cordoned(harness: Harness, node: str) -> bool:
    obj = harness.world.kube.get_node(node)
    return bool(obj and (obj.get("spec") or {}).get("unschedulable"))


def test_a_stop_delivered_after_a_restart_deletes_nothing(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)
    harness.pdb("web", {"app": "web"}, min_available=2)
    ec2 = harness.world.aws.clients.ec2
    ec2.stop_instances(InstanceIds=[instance_id])
    ec2.start_instances(InstanceIds=[instance_id])  # running again before the "stopped" event arrives

    response = interruptions.deliver(for_instance(STATE_CHANGE, instance_id, state="stopped"))

    assert response == {"batchItemFailures": []}
    assert harness.pods_on(node) == ["web-0", "web-1"]  # the PDB's two pods are still there
    assert harness.world.kube.get_node(node) is not None
    assert harness.instance_state(instance_id) == "running"
    assert harness.world.state.nodeclaims.get(CLAIM).status == ClaimStatus.INITIALIZED  # type: ignore[union-attr]
    assert interruptions.metrics.total("InterruptionEventsIgnored", Reason="StaleEvent") == 1


def test_a_stop_event_acts_on_what_ec2_says_now(interruptions: Interruptions) -> None:
    # The event says "stopping"; by the time it is handled the instance is terminated: no stop call, the
    # Node and pods go, the claim is finalized as terminated.
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)
    harness.world.aws.clients.ec2.terminate_instances(InstanceIds=[instance_id])

    assert interruptions.deliver(for_instance(STATE_CHANGE, instance_id, state="stopping")) == {
        "batchItemFailures": []
    }

    assert harness.world.kube.get_node(node) is None
    claim = harness.world.state.nodeclaims.get(CLAIM)
    assert claim is not None and claim.reason == "instance terminated"


def test_concurrent_duplicates_launch_one_replacement_and_one_workflow(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, _ = _node_with_pods(harness)
    event = for_instance(SCHEDULED_CHANGE, instance_id)
    first_starting = threading.Event()
    release = threading.Event()

    def hold_the_first_start(**_: Any) -> None:
        # The first delivery has launched its replacement and is about to start the workflow.
        first_starting.set()
        release.wait(30)

    def replacement_registers(step: str, _: dict[str, Any]) -> None:
        if step == "await_replacement":
            for claim in _replacements(harness):
                if harness.world.kube.get_node(f"node-{claim.id}") is None:
                    provider_id = f"aws:///{claim.zone}/{claim.instance_id}"
                    harness.world.register_node(provider_id, f"node-{claim.id}", ready=True)

    harness.before_step.append(replacement_registers)
    harness.sfn.meta.events.register("before-call.sfn.StartExecution", hold_the_first_start)
    # A second Lambda environment (its own batch processor) receives the copy.
    other = load_module(
        "interruption_handler_second", REPO_ROOT / "functions" / "interruption" / "handler.py"
    )
    other.runtime.set(interruptions.controller)
    responses: dict[str, dict[str, Any]] = {}
    first = threading.Thread(target=lambda: responses.setdefault("first", interruptions.deliver(event)))
    first.start()
    assert first_starting.wait(30)
    context = FakeContext("fleetwright-interruption")
    second = threading.Thread(
        target=lambda: responses.setdefault("second", other.handler(sqs_event(json.dumps(event)), context))
    )
    second.start()
    second.join(30)
    release.set()
    first.join(30)
    harness.sfn.meta.events.unregister("before-call.sfn.StartExecution", hold_the_first_start)

    assert responses["first"] == {"batchItemFailures": []}
    # The duplicate is not dropped while the first delivery could still crash: it goes back to the queue.
    assert dict(responses["second"]) == {"batchItemFailures": [{"itemIdentifier": "message-0"}]}
    assert interruptions.deliver(event) == {"batchItemFailures": []}  # the redelivery finds the workflow
    assert len(interruptions.executions()) == 1
    assert len(_replacements(harness)) == 1
    assert interruptions.metrics.total("InterruptionsInProgress") == 1


def test_a_failed_workflow_is_retried_by_the_next_delivery(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)
    event = for_instance(SPOT_WARNING, instance_id)
    failures = [1]

    def drain_fails_once(step: str, _: dict[str, Any]) -> None:
        if step == "drain" and failures:
            failures.pop()
            raise RuntimeError("the API server said no")

    harness.before_step.append(drain_fails_once)
    assert interruptions.deliver(event) == {"batchItemFailures": []}
    [failed] = interruptions.executions()
    assert harness.wait(failed["executionArn"])["status"] == "FAILED"
    assert harness.instance_state(instance_id) == "running"

    assert interruptions.deliver(event) == {"batchItemFailures": []}

    names = sorted(e["name"] for e in interruptions.executions())
    assert names == [f"{instance_id}-SpotInterruption-1", f"{instance_id}-SpotInterruption-2"]
    retry = next(e for e in interruptions.executions() if e["name"].endswith("-2"))
    assert harness.wait(retry["executionArn"])["status"] == "SUCCEEDED"
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    assert len(_replacements(harness)) == 1  # the first attempt's replacement is reused
    assert interruptions.metrics.total("InterruptionAttemptsRetried") == 1


def test_an_attempt_whose_delivery_died_is_taken_over(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)
    # A delivery claimed attempt 1 long ago (more than the handler's timeout) and never started a workflow.
    _records(interruptions).create(
        InterruptionRecord(
            instance_id=instance_id,
            kind="SpotInterruption",
            status=CLAIMED,
            claimed_at=harness.clock() - 600,
            node=node,
        )
    )

    assert interruptions.deliver(for_instance(SPOT_WARNING, instance_id)) == {"batchItemFailures": []}

    [execution] = interruptions.executions()
    assert execution["name"] == f"{instance_id}-SpotInterruption-2"
    assert harness.wait(execution["executionArn"])["status"] == "SUCCEEDED"
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    record = _records(interruptions).get(instance_id, "SpotInterruption")
    assert record is not None and record.attempt == 2 and record.request["instanceId"] == instance_id


def test_a_fresh_claim_sends_the_message_back_to_the_queue(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)
    _records(interruptions).create(
        InterruptionRecord(
            instance_id=instance_id, kind="SpotInterruption", status=CLAIMED, claimed_at=harness.clock() - 5
        )
    )

    response = interruptions.deliver(for_instance(SPOT_WARNING, instance_id))

    assert response == {"batchItemFailures": [{"itemIdentifier": "message-0"}]}
    assert interruptions.executions() == [] and _replacements(harness) == []
    assert not _cordoned(harness, node)


def test_attempts_are_capped_then_the_node_is_given_back(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness, pods=1)
    interruptions.controller.settings.max_attempts = 2
    event = for_instance(SPOT_WARNING, instance_id)

    def drain_fails(step: str, _: dict[str, Any]) -> None:
        if step == "drain":
            raise RuntimeError("the API server said no")

    harness.before_step.append(drain_fails)
    for _ in range(2):
        assert interruptions.deliver(event) == {"batchItemFailures": []}
        for execution in interruptions.executions():
            harness.wait(execution["executionArn"])

    assert interruptions.deliver(event) == {"batchItemFailures": []}

    assert len(interruptions.executions()) == 2
    assert not _cordoned(harness, node)
    assert harness.instance_state(instance_id) == "running"
    events = harness.world.client.list(EVENTS, "default").items
    assert any(e["reason"] == "InterruptionHandlingFailed" and e["type"] == "Warning" for e in events)
    assert interruptions.metrics.total("InterruptionAttemptsExhausted") == 1
    assert interruptions.deliver(event) == {"batchItemFailures": []}  # later copies change nothing
    assert len(interruptions.executions()) == 2


def test_a_malformed_message_touches_nothing(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node = _node_with_pods(harness)

    response = interruptions.deliver(json.dumps({**for_instance(SPOT_WARNING, instance_id), "detail": []}))

    assert response == {"batchItemFailures": []}  # rejected and deleted
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="InvalidEvent") == 1
    assert interruptions.executions() == [] and _replacements(harness) == []
    assert _records(interruptions).all() == []
    assert harness.pods_on(node) == ["web-0", "web-1"] and not _cordoned(harness, node)


def test_an_answer_that_comes_after_the_launch_deadline_launches_one_replacement(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    instance_id, _ = _node_with_pods(harness)
    ec2 = harness.world.aws.clients.ec2
    slow: list[bool] = []

    def answered_late(event_name: str = "", **_: Any) -> None:
        # The first CreateFleet has been answered (moto answers in ``before-send``, registered before this
        # hook), and its answer took until past the launch deadline.
        scope = current_deadline()
        if event_name.endswith(".CreateFleet") and scope is not None and not slow:
            slow.append(True)
            harness.world.wall.advance(scope.remaining() + 1)

    ec2.meta.events.register("before-send", answered_late)
    try:
        assert interruptions.deliver(for_instance(SPOT_WARNING, instance_id)) == {"batchItemFailures": []}
    finally:
        ec2.meta.events.unregister("before-send", answered_late)

    assert slow
    claims = [
        tag["Value"]
        for instance in harness.world.instances()
        for tag in instance.get("Tags", [])
        if tag["Key"] == NODECLAIM_TAG and tag["Value"] != CLAIM
    ]
    # One instance for the node's pods, and its claim is not given up while the instance runs.
    assert len(claims) == 1
    [replacement] = _replacements(harness)
    assert replacement.id == claims[0] and replacement.status != ClaimStatus.FAILED
