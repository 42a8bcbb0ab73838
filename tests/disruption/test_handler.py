"""The disruption Lambda handler with a fake context: built from its environment at the first invocation,
one pass per invocation against moto (EC2, DynamoDB, Step Functions) and the Kubernetes API emulator."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleetwright.config.settings import ConfigError
from tests.support.disruption import DOCUMENTS, Rig
from tests.support.termination import FakeContext


def _logs(module: ModuleType) -> list[dict[str, Any]]:
    stream = module.logger.registered_handler.stream
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    stream.seek(0)
    stream.truncate()
    return lines


def test_the_handler_builds_from_its_environment_and_removes_an_empty_node(
    lambda_env: tuple[Rig, ModuleType, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rig, module, sfn = lambda_env
    empty = rig.node("m5.large")
    busy = rig.node("m5.large")
    rig.pod("web-0", busy, cpu="1500m")
    instance_id = rig.instance_id(empty)

    summary = module.handler(
        {"id": "event-1", "detail-type": "Scheduled Event"}, FakeContext("fleetwright-disruption")
    )

    assert summary["nodes"] == 2 and not summary.get("error")
    [command] = summary["commands"]
    assert command["reason"] == "Empty" and command["nodes"] == [empty] and command["status"] == "executed"
    machine = module.runtime.get().controller.workflow.state_machine_arn
    [execution] = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert re.fullmatch(rf"{instance_id}-Empty-\d+", execution["name"]), execution["name"]
    request = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert request["node"] == empty and request["waitForReplacement"] is False
    # No terminationGracePeriod on the NodePool: at the deadline the disruption is called off.
    assert request["onDeadline"] == "abandon"

    records = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    records += _logs(module)
    [decision] = [r for r in records if r.get("message") == "disruption decision"]
    assert decision["nodes"] == [empty] and decision["instanceTypes"] == ["m5.large"]
    assert decision["pricePerHour"] > 0
    names = {
        metric["Name"]
        for r in records
        if "_aws" in r
        for d in r["_aws"]["CloudWatchMetrics"]
        for metric in d["Metrics"]
    }
    assert {"NodeCount", "ClusterHourlyCost", "DisruptionDecisionDuration", "NodesDisrupted"} <= names


def test_dry_run_from_the_environment_starts_nothing(
    lambda_env: tuple[Rig, ModuleType, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig, module, sfn = lambda_env
    empty = rig.node("m5.large")
    monkeypatch.setenv("FLEETWRIGHT_DISRUPTION_DRY_RUN", "true")

    summary = module.handler({"id": "event-2"}, FakeContext("fleetwright-disruption"))

    assert summary["dryRun"] is True
    assert [(c["nodes"], c["status"]) for c in summary["commands"]] == [([empty], "dry-run")]
    machine = module.runtime.get().controller.workflow.state_machine_arn
    assert sfn.list_executions(stateMachineArn=machine)["executions"] == []


def test_bad_nodepool_documents_fail_the_first_invocation_with_the_validate_message(
    lambda_env: tuple[Rig, ModuleType, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, module, _ = lambda_env
    broken = tmp_path / "broken.yaml"
    broken.write_text(DOCUMENTS.replace("operator: In", "operator: Within", 1))
    monkeypatch.setenv("FLEETWRIGHT_NODEPOOLS_FILE", str(broken))

    with pytest.raises(ConfigError) as raised:
        module.handler({"id": "event-3"}, FakeContext("fleetwright-disruption"))

    assert f"{broken}: document 0 (NodePool default)" in str(raised.value) and "Within" in str(raised.value)
    [logged] = [r for r in _logs(module) if r.get("message") == "disruption cannot start"]
    assert logged["level"] == "ERROR" and "Within" in logged["error"]


def test_a_bad_disruption_variable_is_named(
    lambda_env: tuple[Rig, ModuleType, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, module, _ = lambda_env
    monkeypatch.setenv("FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION", "1.5")

    with pytest.raises(ConfigError, match="FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION"):
        module.handler({"id": "event-4"}, FakeContext("fleetwright-disruption"))
