"""The scheduled handlers report how close each invocation came to its Lambda timeout and memory."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleetwright.config.settings import ProvisionerConfig
from fleetwright.observability.limits import DURATION_OF_TIMEOUT, MEMORY_OF_LIMIT, report_limits
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.runtime.provisioner import limit_budget

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def test_duration_is_the_share_of_the_budget_used_and_memory_the_share_of_the_configured_size() -> None:
    metrics = RecordingMetrics()
    published = report_limits(
        metrics, budget_ms=60_000, left_ms=9_000, environ={"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "100000"}
    )
    assert published[DURATION_OF_TIMEOUT] == 0.85
    # This process holds more than 1 MB and much less than 100 GB.
    assert 0.00001 < published[MEMORY_OF_LIMIT] < 0.1
    assert {(p.name, p.unit) for p in metrics.points} == {
        (DURATION_OF_TIMEOUT, "None"),
        (MEMORY_OF_LIMIT, "None"),
    }


def test_nothing_is_made_up_when_the_limits_are_unknown() -> None:
    metrics = RecordingMetrics()
    assert report_limits(metrics, budget_ms=None, left_ms=1_000, environ={}) == {}
    assert (
        report_limits(
            metrics, budget_ms=1_000, left_ms=None, environ={"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "x"}
        )
        == {}
    )
    assert metrics.points == []


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "FleetwrightTest")
    spec = importlib.util.spec_from_file_location(f"{name}_handler_limits", FUNCTIONS / name / "handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.logger.registered_handler.setStream(io.StringIO())
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture
def provisioner(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield from _load("provisioner", monkeypatch)


@pytest.fixture
def disruption(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield from _load("disruption", monkeypatch)


def _emf_and_logs(
    module: ModuleType, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    module.metrics.flush_metrics()
    lines = capsys.readouterr().out + module.logger.registered_handler.stream.getvalue()
    records = [json.loads(line) for line in lines.splitlines() if line.startswith("{")]
    values = {
        m["Name"]: r[m["Name"]][-1] if isinstance(r[m["Name"]], list) else r[m["Name"]]
        for r in records
        if "_aws" in r
        for d in r["_aws"]["CloudWatchMetrics"]
        for m in d["Metrics"]
    }
    return values, [r for r in records if "message" in r]


def test_the_watching_provisioner_measures_the_margin_it_keeps(
    provisioner: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "10240")
    config = ProvisionerConfig(cluster_name="demo", deadline_margin_seconds=10.0)
    # Started with 60 s, ended with 2 s left: 8 of the 10 s margin used by a pass past the deadline.
    assert (
        provisioner.runtime.report_limits(limit_budget(config, 60_000.0), 2_000.0)[DURATION_OF_TIMEOUT] == 0.8
    )
    values, logs = _emf_and_logs(provisioner, capsys)
    assert values[DURATION_OF_TIMEOUT] == 0.8 and 0 < values[MEMORY_OF_LIMIT] < 0.8
    assert [
        r["limits"][DURATION_OF_TIMEOUT] for r in logs if "close to its Lambda limits" in r["message"]
    ] == [0.8]
    # Ending at the deadline, as it does when passes are short, uses none of the margin.
    assert (
        provisioner.runtime.report_limits(limit_budget(config, 60_000.0), 10_000.0)[DURATION_OF_TIMEOUT]
        == 0.0
    )


def test_the_economy_provisioner_measures_its_whole_invocation(provisioner: ModuleType) -> None:
    config = ProvisionerConfig(cluster_name="demo", economy=True)
    assert (
        provisioner.runtime.report_limits(limit_budget(config, 60_000.0), 45_000.0)[DURATION_OF_TIMEOUT]
        == 0.25
    )


def test_a_disruption_pass_near_its_memory_is_reported_and_logged(
    disruption: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16 MB configured: this test process has used more, as a pass that outgrew its function would.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "16")
    published = disruption.runtime.report_limits(60_000.0, 30_000.0)
    assert published[DURATION_OF_TIMEOUT] == 0.5 and published[MEMORY_OF_LIMIT] > 1.0
    values, logs = _emf_and_logs(disruption, capsys)
    assert values[MEMORY_OF_LIMIT] == published[MEMORY_OF_LIMIT]
    assert any("close to its Lambda limits" in r["message"] and r["level"] == "WARNING" for r in logs)
