"""``FleetwrightAutoscaler.add_interruption_handling`` (called by the construct): the two functions, the
workflow and their wiring, in the stack ``cdk synth`` builds."""

from __future__ import annotations

import json
from typing import Any

from tests.support.infra import REPO_ROOT, Synthesis, function_by_description, only, render


def test_interruption_handler_consumes_the_queue_and_may_start_the_workflow(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    handler_id, handler = function_by_description(stack, "Fleetwright interruption handler")
    machine_id, _ = only(stack.resources("AWS::StepFunctions::StateMachine"))
    env = render(handler["Properties"]["Environment"]["Variables"])
    assert env["FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"] == "${" + machine_id + "}"
    assert env["FLEETWRIGHT_REPLACE_ON_REBALANCE"] == "false"
    _, mapping = only(stack.resources("AWS::Lambda::EventSourceMapping"))
    assert render(mapping["Properties"]["FunctionName"]) == "${" + handler_id + "}"
    assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    _, queue = next(
        (k, q) for k, q in stack.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in q["Properties"]
    )
    # AWS's guidance for Lambda event sources: visibility at least six times the function's timeout.
    assert handler["Properties"]["Timeout"] * 6 <= queue["Properties"]["VisibilityTimeout"]
    statements = [
        s
        for p in stack.resources("AWS::IAM::Policy").values()
        for s in render(p["Properties"]["PolicyDocument"]["Statement"])
        if "states:StartExecution" in json.dumps(s)
    ]
    # The interruption handler's and the disruption function's grants, and the step function's (its
    # Continue step starts the next execution), all on this state machine only.
    assert len(statements) == 3
    assert all(s["Resource"] == "${" + machine_id + "}" for s in statements)


def test_every_task_invokes_the_step_function_and_waits_come_from_the_state(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    steps_id, steps = function_by_description(stack, "Fleetwright termination workflow steps")
    assert steps["Properties"]["Handler"] == "handler.handler"
    _, machine = only(stack.resources("AWS::StepFunctions::StateMachine"))
    definition = json.loads(render(machine["Properties"]["DefinitionString"]))
    states = definition["States"]
    tasks = {name: s for name, s in states.items() if s["Type"] == "Task"}
    assert {s["Parameters"]["step"] for s in tasks.values()} == {
        "cordon",
        "await_replacement",
        "drain",
        "continue",
        "terminate",
        "check_instance",
        "delete_node",
        "finalize_claim",
        "record_failure",
    }
    assert all(s["Resource"] == "${" + steps_id + ".Arn}" for s in tasks.values())
    for task in tasks.values():
        # the execution's name, start time and state machine go with every step (the Continue step)
        assert task["Parameters"]["context"] == {
            "execution.$": "$$.Execution.Name",
            "startTime.$": "$$.Execution.StartTime",
            "stateMachine.$": "$$.StateMachine.Id",
        }
        [retry] = task["Retry"]
        assert set(retry["ErrorEquals"]) >= {
            "Lambda.TooManyRequestsException",
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException",
            "TransientError",
        }
        assert retry["JitterStrategy"] == "FULL" and retry["MaxDelaySeconds"] == 60
        # the documented budget: 5 minutes of outage ridden out by retries alone, even with full jitter
        delays = [
            min(retry["MaxDelaySeconds"], retry["IntervalSeconds"] * retry["BackoffRate"] ** n)
            for n in range(retry["MaxAttempts"])
        ]
        assert sum(delays) / 2 >= 2 * 300
    waits = [s for s in states.values() if s["Type"] == "Wait"]
    assert {w["SecondsPath"] for w in waits} == {
        "$.request.drainIntervalSeconds",
        "$.request.pollSeconds",
        "$.drain.waitSeconds",
        "$.failure.retrySeconds",
    }
    # a continued execution starts at Resumed? and goes back to its loop
    assert definition["StartAt"] == "Resumed?"
    assert states["Continue"]["Next"] == "ContinuedInNewExecution"
    assert states["ContinuedInNewExecution"]["Type"] == "Succeed"
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"


def test_failures_raise_an_alarm_through_the_dashboard(synthesis: Synthesis) -> None:
    stack, parts = synthesis.fleetwright, synthesis.autoscaler.interruption_handling
    assert parts is not None
    alarms = [render(a["Properties"]) for a in stack.resources("AWS::CloudWatch::Alarm").values()]
    [failure] = [a for a in alarms if a.get("MetricName") == "TerminationFailures"]
    assert failure["Namespace"] == "Fleetwright"
    assert failure["Dimensions"] == [{"Name": "service", "Value": "fleetwright-termination"}]
    assert failure["Threshold"] == 1
    # The step handler publishes the metric with that dimension (Powertools' service).
    handler_source = (REPO_ROOT / "functions" / "termination" / "handler.py").read_text()
    assert 'SERVICE = "fleetwright-termination"' in handler_source
    assert parts.workflow.failure_alarm in synthesis.autoscaler.dashboard.alarms


def _queue_statements(synthesis: Synthesis) -> tuple[str, list[dict[str, Any]]]:
    """The interruption queue's logical id and its queue policy's statements."""
    stack = synthesis.fleetwright
    queue_id = next(
        k for k, q in stack.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in q["Properties"]
    )
    policies = [
        p
        for p in stack.resources("AWS::SQS::QueuePolicy").values()
        if render(p["Properties"]["Queues"]) == ["${" + queue_id + "}"]
    ]
    return queue_id, [s for p in policies for s in render(p["Properties"]["PolicyDocument"]["Statement"])]


def test_only_the_stacks_rules_may_send_to_the_interruption_queue(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    queue_id, statements = _queue_statements(synthesis)
    interruption_rules = {
        "${" + k + ".Arn}"
        for k, r in stack.resources("AWS::Events::Rule").items()
        if r["Properties"].get("EventPattern", {}).get("source") in (["aws.ec2"], ["aws.health"])
    }
    assert len(interruption_rules) == 4
    [deny] = [s for s in statements if s["Effect"] == "Deny" and s["Action"] == "sqs:SendMessage"]
    assert deny["Principal"] == {"AWS": "*"} and deny["Resource"] == "${" + queue_id + ".Arn}"
    # Denied unless the request's source is one of the rules: nobody else can post an event.
    assert list(deny["Condition"]) == ["ArnNotEquals"]
    assert list(deny["Condition"]["ArnNotEquals"]) == ["aws:SourceArn"]
    assert set(deny["Condition"]["ArnNotEquals"]["aws:SourceArn"]) == interruption_rules
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert {s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in allows} == interruption_rules
    assert all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in allows)
    # Receiving and deleting (the handler) and the move to the dead-letter queue are untouched.
    denied = {a for s in statements if s["Effect"] == "Deny" for a in [s["Action"]]}
    assert "sqs:ReceiveMessage" not in denied and "sqs:DeleteMessage" not in denied
    assert stack.raw["Resources"][queue_id]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3


def test_the_handler_knows_the_stacks_account(synthesis: Synthesis) -> None:
    _, handler = function_by_description(synthesis.fleetwright, "Fleetwright interruption handler")
    env = render(handler["Properties"]["Environment"]["Variables"])
    assert env["FLEETWRIGHT_ACCOUNT_ID"] == "${AWS::AccountId}"


def test_the_interruption_path_has_a_bounded_blast_radius(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    handler_id, handler = function_by_description(stack, "Fleetwright interruption handler")
    _, steps = function_by_description(stack, "Fleetwright termination workflow steps")
    _, mapping = only(stack.resources("AWS::Lambda::EventSourceMapping"))
    # A flood of messages runs at most 5 handlers and 20 workflow steps at once; the pollers never invoke
    # more handlers than are reserved (a throttled invocation would spend one of a message's receives).
    assert handler["Properties"]["ReservedConcurrentExecutions"] == 5
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}
    assert render(mapping["Properties"]["FunctionName"]) == "${" + handler_id + "}"
    assert steps["Properties"]["ReservedConcurrentExecutions"] == 20


def test_events_eventbridge_cannot_deliver_are_kept_and_alarmed(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    queues = stack.resources("AWS::SQS::Queue")
    [(delivery_id, delivery)] = [
        (k, q)
        for k, q in queues.items()
        if "denyAll" in json.dumps(q["Properties"].get("RedriveAllowPolicy"))
    ]
    # Only EventBridge's failed deliveries land there: no queue may make it its dead-letter queue.
    assert delivery["Properties"]["RedriveAllowPolicy"] == {"redrivePermission": "denyAll"}
    assert delivery["Properties"]["SqsManagedSseEnabled"] is True
    targets = [
        t
        for r in stack.resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern")
        for t in r["Properties"]["Targets"]
    ]
    assert len(targets) == 4
    assert all(render(t["DeadLetterConfig"]["Arn"]) == "${" + delivery_id + ".Arn}" for t in targets)
    # The schedules' targets too: a tick EventBridge could not deliver to the provisioner or the
    # disruption function (the function deleted, its permission removed) is kept and alarmed.
    every_target = [
        t for r in stack.resources("AWS::Events::Rule").values() for t in r["Properties"]["Targets"]
    ]
    assert len(every_target) == 4 + 2
    assert all(render(t["DeadLetterConfig"]["Arn"]) == "${" + delivery_id + ".Arn}" for t in every_target)
    # Retried: interruption events for a day (EventBridge's maximum), a schedule's tick within its minute.
    policies = sorted(
        (t["RetryPolicy"]["MaximumRetryAttempts"], t["RetryPolicy"]["MaximumEventAgeInSeconds"])
        for t in every_target
    )
    assert policies == [(2, 60)] * 2 + [(185, 24 * 3600)] * 4
    # EventBridge may send to it: each rule's statement in the queue's policy names that rule.
    [policy] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in stack.resources("AWS::SQS::QueuePolicy").values()
        if render(p["Properties"]["Queues"]) == ["${" + delivery_id + "}"]
    ]
    senders = [
        render(s["Condition"]["ArnEquals"]["aws:SourceArn"])
        for s in policy
        if "ArnEquals" in s.get("Condition", {})
    ]
    assert sorted(senders) == sorted("${" + k + ".Arn}" for k in stack.resources("AWS::Events::Rule"))
    [dlq_alarm] = [
        a for k, a in stack.resources("AWS::CloudWatch::Alarm").items() if "DeadLetterQueueNotEmpty" in k
    ]
    read = json.dumps(dlq_alarm["Properties"]["Metrics"])
    assert delivery_id in read and "ApproximateNumberOfMessagesVisible" in read


def test_redrive_roles_may_still_send_to_the_queue() -> None:
    import aws_cdk as cdk
    from aws_cdk import assertions

    from infra.interruption_queue import InterruptionQueue

    stack = cdk.Stack(cdk.App(), "Redrive")
    role = "arn:aws:iam::123456789012:role/interruption-redrive"
    InterruptionQueue(stack, "Interruption", redrive_role_arns=[role])
    template = assertions.Template.from_stack(stack).to_json()
    statements = [
        s
        for p in template["Resources"].values()
        if p["Type"] == "AWS::SQS::QueuePolicy"
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    [deny] = [s for s in statements if s["Effect"] == "Deny" and s["Action"] == "sqs:SendMessage"]
    # Denied only when the request comes from none of the rules and from none of the redrive roles.
    assert deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == [role]
    assert len(deny["Condition"]["ArnNotEquals"]["aws:SourceArn"]) == 4
