"""``FLEETWRIGHT_PUBLISHED_METRICS``: the handlers publish only the metrics the stack's alarms read."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools import Metrics

from fleetwright.observability import metrics as obs


def test_unset_publishes_every_metric() -> None:
    assert obs.published_metrics({}) is None


def test_the_list_names_what_is_published() -> None:
    assert obs.published_metrics({obs.ENV_PUBLISHED_METRICS: " ProvisioningErrors, MemoryOfLimit ,"}) == {
        "ProvisioningErrors",
        "MemoryOfLimit",
    }
    assert obs.published_metrics({obs.ENV_PUBLISHED_METRICS: ""}) == frozenset()


def test_metrics_left_out_are_not_written(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics(namespace="Fleetwright", service="fleetwright-provisioner")
    sink = obs.PowertoolsMetrics(metrics, published={obs.PASS_ERRORS})
    sink.add(obs.PENDING_PODS, 3)
    sink.add(obs.PASS_ERRORS, 1)
    sink.add(obs.CLAIMS_LAUNCHED, 1, dimensions={"InstanceType": "m7g.large"})
    assert set(metrics.metric_set) == {obs.PASS_ERRORS}
    assert capsys.readouterr().out == ""  # the dimensioned point was not written either
    metrics.clear_metrics()


def test_environment_decides_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(obs.ENV_PUBLISHED_METRICS, obs.CLAIMS_LAUNCHED)
    metrics = Metrics(namespace="Fleetwright", service="fleetwright-provisioner")
    sink = obs.PowertoolsMetrics(metrics)
    sink.add(obs.PENDING_PODS, 3)
    sink.add(obs.CLAIMS_LAUNCHED, 1, dimensions={"InstanceType": "m7g.large"})
    assert not metrics.metric_set
    (line,) = capsys.readouterr().out.splitlines()
    assert obs.CLAIMS_LAUNCHED in json.loads(line)
