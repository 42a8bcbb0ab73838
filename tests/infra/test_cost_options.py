"""What Fleetwright's own bill depends on (docs/cost.md): the provisioner's default memory and the
``monitoring`` levels. By default (watching) the stack deploys every alarm but no dashboard, and the
functions publish only the metrics those alarms read (``monitoring=alarms``); ``monitoring=full`` adds the
dashboard and every metric; in economy mode only the alarms that say nodes or pods are at risk.

One synthesis per mode for the module (the session's ``monitoring=full`` app is in conftest.py)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

import app as cdk_app
from infra import controller_metrics as cm
from infra.settings import FunctionSize, Monitoring, SettingsError, settings_from_context
from tests.infra.conftest import ALARM_TOPIC, REPO_ROOT, Synthesis

sys.path.insert(0, str(REPO_ROOT / "bench"))
import cost  # bench/cost.py

PUBLISHED = "FLEETWRIGHT_PUBLISHED_METRICS"
Template = dict[str, Any]


def _synth(tmp: Any, context: dict[str, str]) -> tuple[Template, list[tuple[str, str]]]:
    cwd = os.getcwd()
    os.chdir(REPO_ROOT)
    try:
        app = cdk.App(outdir=str(tmp), context={"alarmTopicArn": ALARM_TOPIC, **context})
        stack = cdk_app.build_app(app)
        cdk.Aspects.of(stack).add(AwsSolutionsChecks())
        artifact = app.synth().get_stack_by_name(stack.stack_name)
    finally:
        os.chdir(cwd)
    return artifact.template, [(str(m.level), str(m.entry.data)) for m in artifact.messages]


@pytest.fixture(scope="module")
def watching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Template, list[tuple[str, str]]]]:
    yield _synth(
        tmp_path_factory.mktemp("cdk.watching"), {"clusterName": "cost-watching"}
    )  # the defaults: monitoring=alarms


@pytest.fixture(scope="module")
def economy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Template, list[tuple[str, str]]]]:
    yield _synth(
        tmp_path_factory.mktemp("cdk.economy"), {"clusterName": "cost-economy", "economyMode": "true"}
    )


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


def _published(template: Template) -> set[frozenset[str] | None]:
    """What each function may publish (None: everything)."""
    return {
        None
        if PUBLISHED not in f["Environment"]["Variables"]
        else frozenset(f["Environment"]["Variables"][PUBLISHED].split(","))
        for f in _functions(template).values()
    }


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


def test_the_alarms_level_keeps_every_alarm_without_the_dashboard(
    watching: Any, synthesis: Synthesis
) -> None:
    template, messages = watching
    assert _resources(template, "AWS::CloudWatch::Dashboard") == {}
    assert "DashboardName" not in template["Outputs"]
    # The same alarms as with the full monitoring, reading the same metrics.
    assert sorted(_alarms(template).values()) == sorted(_alarms(synthesis.fleetwright.raw).values())
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []


def test_the_alarms_level_publishes_only_what_its_alarms_read(watching: Any) -> None:
    template, _ = watching
    read = _custom_metrics(_alarms(template))
    assert read == set(cm.ALARM_METRICS)
    assert _published(template) == {frozenset(read)}


def test_economy_keeps_the_alarms_that_protect_nodes_and_pods(economy: Any) -> None:
    template, messages = economy
    assert _resources(template, "AWS::CloudWatch::Dashboard") == {}
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
    assert _published(template) == {frozenset(cm.ESSENTIAL_ALARM_METRICS)}
    assert _custom_metrics(alarms) == set(cm.ESSENTIAL_ALARM_METRICS)
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []


def test_full_monitoring_is_the_dashboard_and_every_metric(synthesis: Synthesis) -> None:
    assert len(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard")) == 1
    assert "DashboardName" in synthesis.fleetwright.raw["Outputs"]
    assert _published(synthesis.fleetwright.raw) == {None}


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
