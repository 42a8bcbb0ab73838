"""``FLEETWRIGHT_WITHHELD_METRICS``: the handlers leave out the metrics, or the series of a metric, that the
stack's monitoring level does not pay for (docs/cost.md)."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools import Metrics

from fleetwright.observability import metrics as obs


def test_unset_withholds_nothing() -> None:
    assert obs.withheld_metrics({}) == frozenset()
    assert obs.withheld_metrics({obs.ENV_WITHHELD_METRICS: ""}) == frozenset()


def test_the_list_names_metrics_and_series() -> None:
    assert obs.withheld_metrics({obs.ENV_WITHHELD_METRICS: " MemoryOfLimit, NodeCount{NodePool} ,"}) == {
        "MemoryOfLimit",
        "NodeCount{NodePool}",
    }
    assert obs.series_key("NodeClaimsLaunched", ["NodePool", "CapacityType"]) == (
        "NodeClaimsLaunched{CapacityType+NodePool}"
    )
    assert obs.series_key("NodeCount") == "NodeCount{}"


def test_withheld_metrics_are_not_written(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics(namespace="Fleetwright", service="fleetwright-provisioner")
    metrics.clear_metrics()  # Powertools' Metrics instances share one metric set: start from an empty one
    sink = obs.PowertoolsMetrics(metrics, withheld={obs.PENDING_PODS, obs.CLAIMS_LAUNCHED})
    sink.add(obs.PENDING_PODS, 3)
    sink.add(obs.PASS_ERRORS, 1)
    sink.add(obs.CLAIMS_LAUNCHED, 1, dimensions={"InstanceType": "m7g.large"})
    assert set(metrics.metric_set) == {obs.PASS_ERRORS}
    assert capsys.readouterr().out == ""  # the dimensioned point was not written either
    metrics.clear_metrics()


def test_a_withheld_series_leaves_the_metrics_other_series(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics(namespace="Fleetwright", service="fleetwright-disruption")
    metrics.clear_metrics()
    sink = obs.PowertoolsMetrics(metrics, withheld={"NodeCount{NodePool}"})
    sink.add("NodeCount", 5)
    sink.add("NodeCount", 5, dimensions={"NodePool": "default"})
    sink.add("NodeCount", 5, dimensions={"NodePool": "default", "CapacityType": "spot"})
    assert set(metrics.metric_set) == {"NodeCount"}  # the total
    (line,) = capsys.readouterr().out.splitlines()  # only the NodePool × CapacityType series
    assert json.loads(line)["CapacityType"] == "spot"
    metrics.clear_metrics()


def test_environment_decides_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(obs.ENV_WITHHELD_METRICS, obs.PENDING_PODS)
    metrics = Metrics(namespace="Fleetwright", service="fleetwright-provisioner")
    sink = obs.PowertoolsMetrics(metrics)
    sink.add(obs.PENDING_PODS, 3)
    sink.add(obs.CLAIMS_LAUNCHED, 1, dimensions={"InstanceType": "m7g.large"})
    assert not metrics.metric_set
    (line,) = capsys.readouterr().out.splitlines()
    assert obs.CLAIMS_LAUNCHED in json.loads(line)
