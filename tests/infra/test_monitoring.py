"""The dashboard shows every metric the functions publish, and the alarms watch what needs a person."""

from __future__ import annotations

import json
import re
from typing import Any

from fleetwright.disruption.gc import DEFAULT_LIST_EVERY_SECONDS
from tests.support.infra import (
    ALARM_TOPIC,
    CLUSTER,
    REPO_ROOT,
    Synthesis,
    function_by_description,
    only,
    render,
)


def _table_metrics(document: str, heading: str) -> set[str]:
    """The metric names in the first column of the table under ``heading`` in docs/``document``."""
    text = (REPO_ROOT / "docs" / document).read_text()
    table = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`(\w+)`", cell)}


def _documented_metrics() -> set[str]:
    """The metric names docs/provisioner.md and docs/disruption.md (first column of their metrics
    tables) and docs/termination.md (its metrics section) promise."""
    names = _table_metrics("provisioner.md", "## Metrics") | _table_metrics("disruption.md", "### Metrics")
    termination = (REPO_ROOT / "docs" / "termination.md").read_text()
    section = termination.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    body = section.split("(Powertools EMF).", 1)[1]  # after "Namespace `Fleetwright`"
    return names | set(re.findall(r"`([A-Z][A-Za-z]+)(?:\{\w+\})?`", body))


def _dashboard(synthesis: Synthesis) -> dict[str, Any]:
    _, dashboard = only(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard"))
    return dict(json.loads(render(dashboard["Properties"]["DashboardBody"])))


def _metric_names(widget: dict[str, Any]) -> set[str]:
    """Metric names a widget shows: plain metrics and those named in Metrics Insights queries."""
    names: set[str] = set()
    for line in widget["properties"].get("metrics", []):
        options = line[-1] if isinstance(line[-1], dict) else {}
        if "expression" in options:
            names |= set(re.findall(r"SELECT [A-Z]+\((\w+)\)", options["expression"]))
        else:
            names.add(line[1])
    return names


def test_every_documented_metric_is_on_the_dashboard(synthesis: Synthesis) -> None:
    documented = _documented_metrics()
    assert {
        "PendingPods",
        "NodeClaimsLaunched",
        "InterruptionEvents",
        "TerminationFailures",
        "DisruptionCommands",
        "ClusterHourlyCost",
    } <= documented
    shown = set().union(
        *(_metric_names(w) for w in _dashboard(synthesis)["widgets"] if w["type"] == "metric")
    )
    # The failure alarm's widget shows TerminationFailures; alarm widgets carry no metric list.
    alarm_metrics = {
        render(a["Properties"]).get("MetricName")
        for a in synthesis.fleetwright.resources("AWS::CloudWatch::Alarm").values()
    }
    assert documented - shown - alarm_metrics == set()


def test_dashboard_sections_and_function_rows(synthesis: Synthesis) -> None:
    widgets = _dashboard(synthesis)["widgets"]
    texts = [w["properties"]["markdown"] for w in widgets if w["type"] == "text"]
    assert texts == [
        f"# Fleetwright — cluster `{CLUSTER}`",
        "## Provisioning",
        "## Interruptions and node terminations",
        "## Disruption",
    ]
    titles = {w["properties"].get("title") for w in widgets}
    for name in ("Provisioner", "InterruptionHandler", "TerminationSteps", "Disruption"):
        assert f"{name}: invocations, errors and throttles" in titles
        assert f"{name}: duration" in titles
    assert {"Dead-lettered interruption events", "Termination workflows (executions)"} <= titles


def test_launches_are_broken_down_by_instance_type_and_capacity_type(synthesis: Synthesis) -> None:
    queries = {
        w["properties"]["title"]: [
            line[-1]["expression"]
            for line in w["properties"].get("metrics", [])
            if isinstance(line[-1], dict) and "expression" in line[-1]
        ]
        for w in _dashboard(synthesis)["widgets"]
        if w["type"] == "metric"
    }
    # Every launch, the provisioner's and the replacements the disruption and interruption functions launch.
    assert queries["Nodes launched by instance type"] == [
        "SELECT SUM(NodeClaimsLaunched) FROM Fleetwright GROUP BY InstanceType"
    ]
    assert queries["Nodes launched by capacity type"] == [
        "SELECT SUM(NodeClaimsLaunched) FROM Fleetwright GROUP BY CapacityType"
    ]
    by_code, capacity, recovered = queries[
        "Launch errors by EC2 error code; insufficient capacity, recovered"
    ]
    assert by_code.endswith("GROUP BY ErrorCode")
    assert "ErrorCode IN (" in capacity and "'InsufficientInstanceCapacity'" in capacity
    # Launches that succeeded on another offering after EC2 refused one, next to the refusals.
    assert recovered == "SELECT SUM(InsufficientCapacityRecovered) FROM Fleetwright"


def test_workflow_graph_uses_step_functions_metrics(synthesis: Synthesis) -> None:
    machine_id, _ = only(synthesis.fleetwright.resources("AWS::StepFunctions::StateMachine"))
    [widget] = [
        w
        for w in _dashboard(synthesis)["widgets"]
        if w["properties"].get("title") == "Termination workflows (executions)"
    ]
    plain = [line for line in widget["properties"]["metrics"] if line[0] == "AWS/States"]
    assert [line[1] for line in plain] == [
        "ExecutionsStarted",
        "ExecutionsSucceeded",
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "ExecutionsAborted",
    ]
    assert all(line[2:4] == ["StateMachineArn", "${" + machine_id + "}"] for line in plain)


def _alarms(synthesis: Synthesis) -> list[dict[str, Any]]:
    return [
        render(a["Properties"]) for a in synthesis.fleetwright.resources("AWS::CloudWatch::Alarm").values()
    ]


def test_alarms(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    alarms = _alarms(synthesis)
    by_metric = {a.get("MetricName") or a["Metrics"][0]["Expression"]: a for a in alarms}
    provisioner_id, _ = function_by_description(stack, "Fleetwright provisioner")
    handler_id, _ = function_by_description(stack, "Fleetwright interruption handler")
    disruption_id, _ = function_by_description(stack, "Fleetwright disruption")
    lambda_errors = sorted(a["Dimensions"][0]["Value"] for a in alarms if a.get("Namespace") == "AWS/Lambda")
    # The step function's errors are the workflow's to retry or to report: no alarm of their own.
    assert lambda_errors == sorted(
        ["${" + provisioner_id + "}", "${" + handler_id + "}", "${" + disruption_id + "}"]
    )
    assert "dead + undelivered" in by_metric  # dead letters, and events EventBridge could not deliver
    assert "TerminationFailures" in by_metric

    failing = by_metric["ProvisioningErrors"]
    assert failing["Dimensions"] == [{"Name": "service", "Value": "fleetwright-provisioner"}]
    assert (failing["EvaluationPeriods"], failing["DatapointsToAlarm"], failing["Period"]) == (3, 3, 60)

    [timeouts] = [a for a in alarms if "RegistrationTimeouts" in json.dumps(a.get("Metrics", ""))]
    # One alarm for every NodePool, present and future: a Metrics Insights query needs no dimension list.
    assert timeouts["Metrics"][0]["Expression"] == (
        "SELECT SUM(RegistrationTimeouts) FROM Fleetwright WHERE service = 'fleetwright-provisioner'"
    )
    assert timeouts["Threshold"] == 1
    assert all(a["TreatMissingData"] == "notBreaching" for a in alarms)
    # with the provisioner's and the disruption function's near-limit alarms (test_private_cluster.py)
    assert len(alarms) == len(synthesis.autoscaler.dashboard.alarms) == 14


def test_a_launch_rate_of_half_the_cap_raises_an_alarm(synthesis: Synthesis) -> None:
    alarms = _alarms(synthesis)
    [rate] = [a for a in alarms if "NodeClaimsLaunched" in json.dumps(a.get("Metrics", ""))]
    # Every launcher's launches (the provisioner's and replacements) over the cap's window
    assert rate["Metrics"][0]["Expression"] == "SELECT SUM(NodeClaimsLaunched) FROM Fleetwright"
    assert (rate["Metrics"][0]["Period"], rate["Threshold"]) == (600, 500)
    assert rate["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_any_rejected_interruption_message_raises_an_alarm(synthesis: Synthesis) -> None:
    [rejected] = [
        a for a in _alarms(synthesis) if "InterruptionMessagesRejected" in json.dumps(a.get("Metrics"))
    ]
    # Every reason counts: only the stack's rules may send, so a rejection is a forged or unexpected message.
    assert rejected["Metrics"][0]["Expression"] == (
        "SELECT SUM(InterruptionMessagesRejected) FROM Fleetwright WHERE service = 'fleetwright-interruption'"
    )
    assert (rejected["Threshold"], rejected["EvaluationPeriods"]) == (1, 1)
    assert rejected["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_an_instance_tagged_as_the_clusters_by_hand_raises_an_alarm(synthesis: Synthesis) -> None:
    [impostors] = [a for a in _alarms(synthesis) if "ImpostorsSeen" in json.dumps(a.get("Metrics"))]
    # The garbage collector's count of instances with the cluster tag but not the NodePool tag; it lists
    # instances every 4 minutes, so a 5-minute period keeps the alarm raised while one is there.
    assert impostors["Metrics"][0]["Expression"] == (
        "SELECT SUM(ImpostorsSeen) FROM Fleetwright WHERE service = 'fleetwright-disruption'"
    )
    assert impostors["Metrics"][0]["Period"] == 300 > DEFAULT_LIST_EVERY_SECONDS
    assert (impostors["Threshold"], impostors["EvaluationPeriods"]) == (1, 1)
    assert impostors["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "NodePool tag" in impostors["AlarmDescription"]


def test_workflow_executions_that_fail_time_out_or_are_aborted_raise_an_alarm(synthesis: Synthesis) -> None:
    machine_id, _ = only(synthesis.fleetwright.resources("AWS::StepFunctions::StateMachine"))
    [alarm] = [a for a in _alarms(synthesis) if "Metrics" in a and "aborted" in a["Metrics"][0]["Expression"]]
    assert alarm["Metrics"][0]["Expression"] == "FILL(failed, 0) + FILL(timedOut, 0) + FILL(aborted, 0)"
    used = {m["Id"]: m["MetricStat"]["Metric"] for m in alarm["Metrics"][1:]}
    assert {k: v["MetricName"] for k, v in used.items()} == {
        "failed": "ExecutionsFailed",
        "timedOut": "ExecutionsTimedOut",
        "aborted": "ExecutionsAborted",
    }
    assert all(
        v["Dimensions"] == [{"Name": "StateMachineArn", "Value": "${" + machine_id + "}"}]
        for v in used.values()
    )
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_synth_warns_when_no_alarm_topic_is_set(synthesis: Synthesis) -> None:
    # The user's app sets none: its alarms would notify nobody.
    [warning] = [text for level, _, text in synthesis.user.messages if "no alarm topic" in text]
    assert "alarmTopicArn" in warning
    assert all("WARNING" in level for level, _, text in synthesis.user.messages if text == warning)
    # The app with one: no warning, and every alarm notifies it (on alarm and on recovery).
    assert not [m for m in synthesis.fleetwright.messages if "no alarm topic" in m[2]]
    alarms = _alarms(synthesis)
    assert alarms and all(a["AlarmActions"] == a["OKActions"] == [ALARM_TOPIC] for a in alarms)
