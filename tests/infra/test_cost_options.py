"""What Fleetwright's own bill depends on (docs/cost.md): the provisioner's default memory and the
``monitoring`` levels. Every level deploys the dashboard; by default (watching, ``monitoring=alarms``) its
overview alone, every alarm, and every metric but two diagnostics of the disruption pass;
``monitoring=full`` adds the detailed sections and those two; in economy mode (``essential``) only the
alarms that say nodes or pods are at risk, and the functions leave out the series an idle cluster would
pay for beyond the node count, its cost and the pending pods.

One synthesis per mode for the session (conftest.py)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

from infra import controller_metrics as cm
from infra.settings import FunctionSize, Monitoring, SettingsError, settings_from_context
from tests.support.infra import REPO_ROOT, Synthesis, Template, render

sys.path.insert(0, str(REPO_ROOT / "bench"))
import cost  # bench/cost.py

WITHHELD = "FLEETWRIGHT_WITHHELD_METRICS"


def _resources(template: Template, kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _functions(template: Template) -> dict[str, dict[str, Any]]:
    """Function properties by the start of their description (``Fleetwright provisioner``...)."""
    return {
        f["Properties"]["Description"].split(" (")[0]: f["Properties"]
        for f in _resources(template, "AWS::Lambda::Function").values()
    }


def _alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, metric name) of every metric an alarm reads: its metric, the metrics of its math
    expression, or those a Metrics Insights query selects."""
    props = alarm["Properties"]
    if "MetricName" in props:
        return [(props["Namespace"], props["MetricName"])]
    read: list[tuple[str, str]] = []
    for query in props["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            read.append((metric["Namespace"], metric["MetricName"]))
        elif query.get("Expression", "").startswith("SELECT"):
            name = re.findall(r"SELECT [A-Z]+\((\w+)\)", query["Expression"])[0]
            read.append((cm.NAMESPACE, name))
    return read


def _alarms(template: Template) -> dict[str, list[tuple[str, str]]]:
    return {k: _alarm_metrics(a) for k, a in _resources(template, "AWS::CloudWatch::Alarm").items()}


def _withheld(template: Template) -> set[frozenset[str]]:
    """What each function leaves out (empty: nothing)."""
    return {
        frozenset(f["Environment"]["Variables"].get(WITHHELD, "").split(",")) - {""}
        for f in _functions(template).values()
    }


def _dashboard_metrics(template: Template) -> int:
    """Metric lines of the dashboard (expressions and the metrics they read)."""
    [dashboard] = _resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    return sum(len(w["properties"].get("metrics", [])) for w in body["widgets"])


def _custom_metrics(alarms: dict[str, list[tuple[str, str]]]) -> set[str]:
    return {name for metrics in alarms.values() for namespace, name in metrics if namespace == cm.NAMESPACE}


def test_the_provisioner_has_512_mb_watching_or_not_and_functionsizes_sets_it(
    watching: Any, economy: Any
) -> None:
    # Watching, the pass's CPU at 512 MB is modelled within the pending → CreateFleet target (docs/cost.md).
    assert _functions(watching[0])["Fleetwright provisioner"]["MemorySize"] == 512
    assert _functions(economy[0])["Fleetwright provisioner"]["MemorySize"] == 512
    assert _functions(watching[0])["Fleetwright disruption"]["MemorySize"] == 1024
    assert _functions(economy[0])["Fleetwright disruption"]["MemorySize"] == 1024
    settings = settings_from_context(
        {"clusterName": "c", "economyMode": "true", "functionSizes": '{"provisioner": {"memoryMB": 1024}}'}
    )
    assert settings.function_sizes == {"provisioner": FunctionSize(memory_mb=1024)}


def test_the_alarms_level_keeps_every_alarm_and_the_overview(watching: Any, synthesis: Synthesis) -> None:
    template, messages = watching
    assert len(_resources(template, "AWS::CloudWatch::Dashboard")) == 1
    assert "DashboardName" in template["Outputs"]
    # The same alarms as with the full monitoring, reading the same metrics.
    assert sorted(_alarms(template).values()) == sorted(_alarms(synthesis.fleetwright.raw).values())
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []


def test_the_alarms_level_leaves_out_only_two_diagnostics(watching: Any) -> None:
    template, _ = watching
    assert _withheld(template) == {frozenset({cm.DECISION_DURATION, cm.DISRUPTION_CANDIDATES})}
    # Every metric an alarm reads is published.
    assert all(cm.published("alarms", name) for name in _custom_metrics(_alarms(template)))


def test_the_default_dashboards_fit_the_free_tier(watching: Any, economy: Any, synthesis: Synthesis) -> None:
    """CloudWatch's free tier covers 3 dashboards of up to 50 metrics each (docs/cost.md): the overview
    fits, the full dashboard with its detailed sections does not."""
    assert 20 <= _dashboard_metrics(economy[0]) <= _dashboard_metrics(watching[0]) <= 50
    assert _dashboard_metrics(synthesis.fleetwright.raw) > 50


def _titles(template: Template) -> list[str]:
    [dashboard] = _resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    return [w["properties"].get("title", "") for w in body["widgets"]]


@pytest.mark.parametrize("mode", ["watching", "economy"])
def test_the_default_dashboard_answers_what_a_karpenter_user_watches(
    mode: str, request: pytest.FixtureRequest
) -> None:
    titles = " | ".join(_titles(request.getfixturevalue(mode)[0]))
    for subject in (
        "Pending pods",
        "node startup",
        "$/h",
        "Nodes launched",
        "launch errors",
        "Nodes terminated by reason",
        "Disruption decisions by reason",
        "blocked by why",
        "Interruption events by kind",
        "Termination workflows by outcome",
        "Errors",
        "timeout",
        "peak memory",
    ):
        assert subject in titles, subject
    # Both levels split the nodes by NodePool and capacity type only where they pay for it.
    assert ("Nodes by NodePool; their $/h (right)" in titles) is (mode == "watching")


def test_economy_keeps_the_alarms_that_protect_nodes_and_pods(economy: Any) -> None:
    template, messages = economy
    assert len(_resources(template, "AWS::CloudWatch::Dashboard")) == 1
    alarms = _alarms(template)
    assert not [k for k in alarms if "NearLimits" in k]
    kept = {
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),  # dead letters
        ("AWS/Lambda", "Errors"),
        ("AWS/States", "ExecutionsFailed"),
        (cm.NAMESPACE, cm.PROVISIONING_ERRORS),
        (cm.NAMESPACE, cm.REGISTRATION_TIMEOUTS),
        (cm.NAMESPACE, cm.TERMINATION_FAILURES),
        (cm.NAMESPACE, cm.DISRUPTION_ERRORS),
        (cm.NAMESPACE, cm.MESSAGES_REJECTED),  # a forged or unexpected interruption message
    }
    assert kept <= {metric for metrics in alarms.values() for metric in metrics}
    lambda_errors = [k for k, metrics in alarms.items() if ("AWS/Lambda", "Errors") in metrics]
    assert len(lambda_errors) == 3  # provisioner, interruption handler, disruption
    assert _custom_metrics(alarms) == set(cm.ESSENTIAL_ALARM_METRICS)
    # What an idle cluster would write every minute is left out, but the totals of nodes and their cost.
    assert _withheld(template) == {
        frozenset(
            {
                cm.DECISION_DURATION,
                cm.DISRUPTION_CANDIDATES,
                cm.DURATION_OF_TIMEOUT,
                cm.MEMORY_OF_LIMIT,
                "NodeCount{NodePool}",
                "NodeCount{CapacityType}",
                "ClusterHourlyCost{NodePool}",
                "ClusterHourlyCost{CapacityType}",
            }
        )
    }
    assert cm.idle_series("essential") == [
        "fleetwright-provisioner/PendingPods{}",
        "fleetwright-disruption/NodeCount{}",
        "fleetwright-disruption/ClusterHourlyCost{}",
    ]
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []


def test_full_monitoring_is_the_detailed_dashboard_and_every_metric(synthesis: Synthesis) -> None:
    assert len(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard")) == 1
    assert "DashboardName" in synthesis.fleetwright.raw["Outputs"]
    assert _withheld(synthesis.fleetwright.raw) == {frozenset()}


def test_the_cost_model_counts_the_alarm_metrics_each_level_deploys(
    watching: Any, economy: Any, synthesis: Synthesis
) -> None:
    """bench/cost.py prices what the templates hold."""
    counted = {
        level: sum(len(metrics) for metrics in _alarms(template).values())
        for level, template in (
            (Monitoring.FULL, synthesis.fleetwright.raw),
            (Monitoring.ALARMS, watching[0]),
            (Monitoring.ESSENTIAL, economy[0]),
        )
    }
    assert counted == {level: cost.MONITORING[level].alarm_metrics for level in Monitoring}
    dashboards = {
        level: len(_resources(template, "AWS::CloudWatch::Dashboard"))
        for level, template in (
            (Monitoring.FULL, synthesis.fleetwright.raw),
            (Monitoring.ALARMS, watching[0]),
            (Monitoring.ESSENTIAL, economy[0]),
        )
    }
    assert dashboards == {level: cost.MONITORING[level].dashboards for level in Monitoring}
    # The series an idle cluster writes, as the functions are told to publish them.
    assert {level: len(cm.idle_series(level)) for level in Monitoring} == {
        level: cost.MONITORING[level].idle_metrics for level in Monitoring
    }
    assert {level: cm.published(level, cm.NODE_COUNT, ("NodePool",)) for level in Monitoring} == {
        level: cost.MONITORING[level].node_splits for level in Monitoring
    }


def test_the_idle_bill_stays_within_its_targets() -> None:
    """docs/cost.md: at most $20 a month watching and $3 in economy mode, the dashboard included (one of
    the account's three free ones); $3 more where those are used up."""
    idle = cost.CLUSTERS[0]
    watching = sum(cost.monthly(cost.WATCHING, idle).values())
    economy = sum(cost.monthly(cost.ECONOMY, idle).values())
    assert watching <= 20 and economy <= 3
    paid = cost.monthly(replace(cost.ECONOMY, free_dashboard=False), idle)
    assert paid["dashboard"] == cost.DASHBOARD_MONTH and abs(sum(paid.values()) - economy - 3) < 1e-9


@pytest.mark.parametrize(
    ("context", "level"),
    [
        ({}, Monitoring.ALARMS),
        ({"economyMode": "true"}, Monitoring.ESSENTIAL),
        ({"economyMode": "true", "monitoring": "full"}, Monitoring.FULL),
        ({"monitoring": " Essential "}, Monitoring.ESSENTIAL),
    ],
)
def test_monitoring_setting(context: dict[str, str], level: Monitoring) -> None:
    assert settings_from_context({"clusterName": "c", **context}).monitoring is level


@pytest.mark.parametrize("mode", ["watching", "economy"])
def test_cdk_nag_and_cfn_lint_pass(mode: str, request: pytest.FixtureRequest) -> None:
    template, messages = request.getfixturevalue(mode)
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


def test_a_bad_monitoring_level_names_the_choices() -> None:
    with pytest.raises(SettingsError, match="must be one of full, alarms, essential, got 'dashboard'"):
        settings_from_context({"clusterName": "c", "monitoring": "dashboard"})
