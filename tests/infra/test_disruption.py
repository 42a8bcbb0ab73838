"""``FleetwrightAutoscaler.add_disruption`` (called by the construct): the disruption function, its schedule,
what it may do, its alarm and its dashboard row; and the settings that reach its environment."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwright.config.settings import settings_from_env
from fleetwright.disruption import metrics as disruption_metrics
from fleetwright.disruption.config import options_from_env
from fleetwright.disruption.types import DisruptionSettings
from infra.settings import DisruptionOptions, SettingsError, settings_from_context
from tests.support.infra import (
    CLUSTER,
    REPO_ROOT,
    Synthesis,
    function_by_description,
    logical_id,
    only,
    render,
)

DESCRIPTION = "Fleetwright disruption"
CLUSTER_TAG = {"StringEquals": {"aws:ResourceTag/fleetwright.io/cluster": CLUSTER}}
# Each deletion also needs the second tag the controller writes on what it deletes.
OWNED_CONDITIONS = {
    "ec2:TerminateInstances": {**CLUSTER_TAG, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "?*"}},
    "ec2:DeleteLaunchTemplate": {
        **CLUSTER_TAG,
        "StringLike": {"aws:ResourceTag/fleetwright.io/ec2nodeclass": "?*"},
    },
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_id(synthesis: Synthesis) -> str:
    _, function = function_by_description(synthesis.fleetwright, DESCRIPTION)
    return logical_id(render(function["Properties"]["Role"]))


def _effective_statements(synthesis: Synthesis) -> list[dict[str, Any]]:
    """Every statement the disruption function's role gets: its managed policies and its inline ones."""
    stack = synthesis.fleetwright
    role_id = _role_id(synthesis)
    role = stack.raw["Resources"][role_id]["Properties"]
    managed = {logical_id(ref) for ref in render(role["ManagedPolicyArns"])}
    statements = [
        s
        for policy_id in managed
        for s in render(stack.raw["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"])
    ]
    statements += [
        s
        for policy in stack.resources("AWS::IAM::Policy").values()
        if "${" + role_id + "}" in render(policy["Properties"]["Roles"])
        for s in render(policy["Properties"]["PolicyDocument"]["Statement"])
    ]
    return statements


def _granting(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in _as_list(s["Action"])]


def test_disruption_runs_its_handler_every_minute_one_pass_at_a_time(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    function_id, function = function_by_description(stack, DESCRIPTION)
    props = function["Properties"]
    layer_id, _ = only(stack.resources("AWS::Lambda::LayerVersion"))
    assert (props["Architectures"], props["Runtime"]) == (["arm64"], "python3.14")
    assert render(props["Layers"]) == ["${" + layer_id + "}"]
    assert props["ReservedConcurrentExecutions"] == 1  # no lease: this is what keeps passes apart
    asset = synthesis.outdir / f"asset.{props['Code']['S3Key'].removesuffix('.zip')}"
    source = REPO_ROOT / "functions" / "disruption" / "handler.py"
    assert (asset / "handler.py").read_text() == source.read_text()
    schedules = [
        r["Properties"]
        for r in stack.resources("AWS::Events::Rule").values()
        if "${" + function_id + ".Arn}" in render([t["Arn"] for t in r["Properties"]["Targets"]])
    ]
    assert [s["ScheduleExpression"] for s in schedules] == ["rate(1 minute)"]
    assert schedules[0]["State"] == "ENABLED"


def test_disruption_environment_names_everything_it_reads(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    _, function = function_by_description(stack, DESCRIPTION)
    env = render(function["Properties"]["Environment"]["Variables"])
    machine_id, _ = only(stack.resources("AWS::StepFunctions::StateMachine"))
    table_id, _ = only(stack.resources("AWS::DynamoDB::Table"))
    parameter_id, _ = only(stack.resources("AWS::SSM::Parameter"))
    assert env["FLEETWRIGHT_CLUSTER_NAME"] == CLUSTER
    assert env["FLEETWRIGHT_STATE_TABLE"] == "${" + table_id + "}"
    assert env["FLEETWRIGHT_NODEPOOLS_PARAMETER"] == "${" + parameter_id + "}"
    assert env["FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"] == "${" + machine_id + "}"
    assert env["POWERTOOLS_SERVICE_NAME"] == disruption_metrics.SERVICE
    # Nothing set in the context: the function's own defaults apply.
    assert not [name for name in env if name.startswith("FLEETWRIGHT_DISRUPTION_")]
    assert options_from_env(env).settings == DisruptionSettings()
    # The handler builds its configuration from this environment and the parameter it names.
    _, parameter = only(stack.resources("AWS::SSM::Parameter"))
    values = {env["FLEETWRIGHT_NODEPOOLS_PARAMETER"]: parameter["Properties"]["Value"]}
    settings = settings_from_env({**env, "AWS_REGION": "eu-west-1"}, read_parameter=values.__getitem__)
    assert settings.config.cluster_name == CLUSTER
    assert [pool.name for pool in settings.config.nodepools] == ["default"]


def test_disruption_may_start_and_look_up_only_termination_workflows(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    machine_id, _ = only(stack.resources("AWS::StepFunctions::StateMachine"))
    statements = _effective_statements(synthesis)
    [start] = _granting(statements, "states:StartExecution")
    assert _as_list(start["Resource"]) == ["${" + machine_id + "}"]
    [describe] = _granting(statements, "states:DescribeExecution")
    [executions] = _as_list(describe["Resource"])
    assert ":execution:" in executions and machine_id in executions and executions.endswith(":*")
    # The sweep lists the running executions of this state machine, and of no other.
    [listing] = _granting(statements, "states:ListExecutions")
    assert _as_list(listing["Resource"]) == ["${" + machine_id + "}"]
    allowed = ("states:StartExecution", "states:DescribeExecution", "states:ListExecutions")
    assert not [
        s
        for s in statements
        if any(a.startswith("states:") and a not in allowed for a in _as_list(s["Action"]))
    ]


@pytest.mark.parametrize("action", ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"])
def test_disruption_deletes_only_resources_tagged_for_its_cluster(synthesis: Synthesis, action: str) -> None:
    granting = _granting(_effective_statements(synthesis), action)
    assert granting
    assert all(s.get("Condition") == OWNED_CONDITIONS[action] for s in granting)


def test_disruption_launches_only_cluster_tagged_replacements(synthesis: Synthesis) -> None:
    statements = _effective_statements(synthesis)
    # Creating a fleet or instance requires the tag in the request; launch templates used must carry it.
    created = [
        s
        for s in _granting(statements, "ec2:CreateFleet")
        if any(r.endswith((":instance/*", ":fleet/*")) for r in _as_list(s["Resource"]))
    ]
    assert created
    assert all(
        s["Condition"] == {"StringEquals": {"aws:RequestTag/fleetwright.io/cluster": CLUSTER}}
        for s in created
    )


def test_disruption_reads_and_writes_the_state_table_and_joins_its_kubernetes_group(
    synthesis: Synthesis,
) -> None:
    stack = synthesis.fleetwright
    table_id, _ = only(stack.resources("AWS::DynamoDB::Table"))
    [state] = _granting(_effective_statements(synthesis), "dynamodb:UpdateItem")
    assert _as_list(state["Resource"]) == ["${" + table_id + ".Arn}"]
    [entry] = [
        e["Properties"]
        for e in stack.resources("AWS::EKS::AccessEntry").values()
        if render(e["Properties"]["PrincipalArn"]) == "${" + _role_id(synthesis) + ".Arn}"
    ]
    assert entry["ClusterName"] == CLUSTER
    assert entry["KubernetesGroups"] == ["fleetwright-disruption"]


def test_failing_disruption_raises_alarms(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    function_id, _ = function_by_description(stack, DESCRIPTION)
    alarms = [render(a["Properties"]) for a in stack.resources("AWS::CloudWatch::Alarm").values()]
    [lambda_errors] = [
        a
        for a in alarms
        if a.get("MetricName") == "Errors" and a["Dimensions"][0]["Value"] == "${" + function_id + "}"
    ]
    assert lambda_errors["Threshold"] == 1
    [failing] = [a for a in alarms if "DisruptionErrors" in json.dumps(a.get("Metrics", ""))]
    assert failing["Metrics"][0]["Expression"] == (
        "SELECT SUM(DisruptionErrors) FROM Fleetwright WHERE service = 'fleetwright-disruption'"
    )
    assert failing["Metrics"][0]["Period"] == 60
    assert (failing["EvaluationPeriods"], failing["DatapointsToAlarm"], failing["Threshold"]) == (3, 3, 1)
    assert synthesis.autoscaler.disruption is not None
    assert set(synthesis.autoscaler.disruption.alarms) <= set(synthesis.autoscaler.dashboard.alarms)


def test_dashboard_disruption_row_shows_what_the_function_publishes(synthesis: Synthesis) -> None:
    _, dashboard = only(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard"))
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    widgets = body["widgets"]
    start = next(i for i, w in enumerate(widgets) if w["properties"].get("markdown") == "## Disruption")
    row = json.dumps(widgets[start:])
    service = "WHERE service = 'fleetwright-disruption'"
    for name, group in [
        (disruption_metrics.DISRUPTION_COMMANDS, "Method"),
        (disruption_metrics.NODES_DISRUPTED, "Reason"),
        (disruption_metrics.DISRUPTION_SAVINGS, "Method"),
        (disruption_metrics.GARBAGE_COLLECTED, "Kind"),
        (disruption_metrics.DISRUPTION_BLOCKED, "Why"),
        (disruption_metrics.DISRUPTION_ERRORS, "Stage"),
    ]:
        assert f"({name}) FROM Fleetwright {service} GROUP BY {group}" in row, name
    # NodeCount is also published as a total (no NodePool): only the per-NodePool series are stacked.
    assert f"MAX(NodeCount) FROM SCHEMA(Fleetwright, NodePool, service) {service} GROUP BY NodePool" in row
    plain = {
        line[1]
        for w in widgets[start:]
        for line in w["properties"].get("metrics", [])
        if line[0] == "Fleetwright" and line[2:4] == ["service", "fleetwright-disruption"]
    }
    assert {
        disruption_metrics.NODE_COUNT,
        disruption_metrics.CLUSTER_HOURLY_COST,
        disruption_metrics.DECISION_DURATION,
    } <= plain


def test_disruption_settings_reach_the_function_as_the_handler_reads_them() -> None:
    settings = settings_from_context(
        {
            "clusterName": "prod",
            "disruptionMinSavingFraction": "0.25",
            "disruptionMinSavingDollars": 0.05,
            "disruptionMinNodeAgeSeconds": "600",
            "disruptionSpotToSpot": "true",
        }
    )
    assert settings.disruption is True
    env = settings.disruption_options.environment()
    assert env == {
        "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION": "0.25",
        "FLEETWRIGHT_DISRUPTION_MIN_SAVING_DOLLARS": "0.05",
        "FLEETWRIGHT_DISRUPTION_MIN_NODE_AGE_SECONDS": "600",
        "FLEETWRIGHT_DISRUPTION_SPOT_TO_SPOT": "true",
    }
    read = options_from_env(env).settings
    assert (read.min_saving_fraction, read.min_saving_dollars, read.min_node_age_seconds) == (0.25, 0.05, 600)
    assert read.spot_to_spot is True
    # Unset settings leave the handler's defaults.
    assert options_from_env(DisruptionOptions().environment()).settings == DisruptionSettings()


def test_disruption_can_be_left_out_or_dry_run() -> None:
    assert settings_from_context({"clusterName": "prod", "disruption": "false"}).disruption is False
    dry = settings_from_context({"clusterName": "prod", "disruptionDryRun": True}).disruption_options
    assert options_from_env(dry.environment()).dry_run is True


def test_node_repair_is_off_unless_the_context_turns_it_on() -> None:
    plain = settings_from_context({"clusterName": "prod"}).disruption_options
    assert options_from_env(plain.environment()).settings.node_repair is False
    on = settings_from_context({"clusterName": "prod", "disruptionNodeRepair": "true"}).disruption_options
    assert on.environment() == {"FLEETWRIGHT_DISRUPTION_NODE_REPAIR": "true"}
    assert options_from_env(on.environment()).settings.node_repair is True


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("disruptionMinSavingFraction", "1.5"),
        ("disruptionMinSavingFraction", "half"),
        ("disruptionMinSavingDollars", "-1"),
        ("disruptionMinNodeAgeSeconds", "inf"),
        ("disruptionSpotToSpot", "maybe"),
        ("disruptionNodeRepair", "sometimes"),
        ("disruption", "off-ish"),
    ],
)
def test_bad_disruption_setting_is_refused_naming_it(key: str, value: str) -> None:
    with pytest.raises(SettingsError, match=key):
        settings_from_context({"clusterName": "prod", key: value})
