"""The construct in a user's own stack, with a function added through its extension points."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from tests.support.infra import Synthesis, only, render


def _function(synthesis: Synthesis) -> tuple[str, dict[str, Any]]:
    return only(synthesis.user.resources("AWS::Lambda::Function"))


def test_added_function_runs_on_arm64_with_the_shared_layer(synthesis: Synthesis) -> None:
    _, function = _function(synthesis)
    props = render(function["Properties"])
    layer_id, _ = only(synthesis.user.resources("AWS::Lambda::LayerVersion"))
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == "python3.14"
    assert props["Layers"] == ["${" + layer_id + "}"]


def test_added_function_knows_where_everything_is(synthesis: Synthesis) -> None:
    _, function = _function(synthesis)
    env = render(function["Properties"]["Environment"]["Variables"])
    table_id, _ = only(synthesis.user.resources("AWS::DynamoDB::Table"))
    assert env["FLEETWRIGHT_CLUSTER_NAME"] == "other-cluster"
    assert env["FLEETWRIGHT_STATE_TABLE"] == "${" + table_id + "}"
    assert env["FLEETWRIGHT_INTERRUPTION_QUEUE_URL"].startswith("${")
    assert set(env) == {
        "FLEETWRIGHT_CLUSTER_NAME",
        "FLEETWRIGHT_STATE_TABLE",
        "FLEETWRIGHT_INTERRUPTION_QUEUE_URL",
        "FLEETWRIGHT_NODE_ROLE_NAME",
        "FLEETWRIGHT_NODE_INSTANCE_PROFILE",
        "FLEETWRIGHT_NODEPOOLS_PARAMETER",
        "FLEETWRIGHT_NODEPOOLS_DIGEST",
    }


def test_added_function_gets_the_controller_policy(synthesis: Synthesis) -> None:
    _, function = _function(synthesis)
    policy_id, _ = only(synthesis.user.resources("AWS::IAM::ManagedPolicy"))
    role_ref = render(function["Properties"]["Role"])
    role_id = role_ref.removeprefix("${").removesuffix(".Arn}")
    role = synthesis.user.raw["Resources"][role_id]
    assert "${" + policy_id + "}" in render(role["Properties"]["ManagedPolicyArns"])


def test_interruption_queue_feeds_the_consumer(synthesis: Synthesis) -> None:
    function_id, _ = _function(synthesis)
    _, mapping = only(synthesis.user.resources("AWS::Lambda::EventSourceMapping"))
    props = render(mapping["Properties"])
    assert props["FunctionName"] == "${" + function_id + "}"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queues = synthesis.user.resources("AWS::SQS::Queue")
    main_id = next(k for k, q in queues.items() if "RedrivePolicy" in q["Properties"])
    assert props["EventSourceArn"] == "${" + main_id + ".Arn}"


def test_added_function_has_an_error_alarm_and_a_dashboard_row(synthesis: Synthesis) -> None:
    function_id, _ = _function(synthesis)
    alarms = [render(a["Properties"]) for a in synthesis.user.resources("AWS::CloudWatch::Alarm").values()]
    errors = [a for a in alarms if a.get("Namespace") == "AWS/Lambda"]
    assert [a["MetricName"] for a in errors] == ["Errors"]
    assert errors[0]["Dimensions"] == [{"Name": "FunctionName", "Value": "${" + function_id + "}"}]
    assert len(synthesis.user_autoscaler.dashboard.alarms) == 2  # the dead-letter alarm and this one
    _, dashboard = only(synthesis.user.resources("AWS::CloudWatch::Dashboard"))
    assert "Provisioner: invocations, errors and throttles" in render(
        dashboard["Properties"]["DashboardBody"]
    )


def test_ec2nodeclasses_naming_other_roles_are_warned_about(synthesis: Synthesis) -> None:
    warnings = [text for level, _, text in synthesis.user.messages if "WARNING" in level and "role" in text]
    assert len(warnings) == 2
    assert "'RoleA'" in warnings[0] and "'RoleB'" in warnings[1]
    assert all("iam:PassRole is refused" in w for w in warnings)
    role = next(
        r
        for r in synthesis.user.resources("AWS::IAM::Role").values()
        if "ec2.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])
    )
    assert "RoleName" not in role["Properties"]  # two candidates: CloudFormation names it


def test_consumer_slower_than_the_visibility_timeout_is_refused(synthesis: Synthesis) -> None:
    stack = cdk.Stack(cdk.App(), "Elsewhere")
    slow = lambda_.Function(
        stack,
        "SlowHandler",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        timeout=cdk.Duration.minutes(2),
    )
    with pytest.raises(ValueError, match="timeout 120 s exceeds the interruption queue's visibility timeout"):
        synthesis.user_autoscaler.consume_interruptions(slow)
