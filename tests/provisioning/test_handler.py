"""The Lambda handler with a fake context: configuration at cold start, the run, idempotency, logs and EMF."""

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

from fleetwright.aws import clients as aws_clients
from fleetwright.config.settings import ConfigError
from fleetwright.local.apiserver import ApiServer
from tests.support.provisioning import World

HANDLER = Path(__file__).resolve().parents[2] / "functions" / "provisioner" / "handler.py"

DOCUMENTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  instanceProfile: demo-node-profile
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


class FakeContext:
    function_name = "fleetwright-provisioner"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:fleetwright-provisioner"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def _event(event_id: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "time": "2026-11-22T10:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/fleetwright-provisioner"],
        "detail": {},
    }


@pytest.fixture
def handler_module(
    world: World,
    apiserver: ApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[ModuleType]:
    documents = tmp_path / "nodepools.yaml"
    documents.write_text(DOCUMENTS)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    world.aws.clients.eks.create_cluster(
        name="demo",
        version=world.aws.cluster.version,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(world.aws.subnets.values())[:2]},
    )
    # The handler's module-scope clients are the fixture's (with its spot market and capacity fakes).
    monkeypatch.setitem(aws_clients._CACHE, ("us-east-1", "adaptive"), world.aws.clients)
    for key, value in {
        "AWS_REGION": "us-east-1",
        "FLEETWRIGHT_CLUSTER_NAME": "demo",
        "FLEETWRIGHT_STATE_TABLE": "fleetwright-state",
        "FLEETWRIGHT_NODEPOOLS_FILE": str(documents),
        "FLEETWRIGHT_KUBECONFIG": str(kubeconfig),
        # The invocations here watch for a couple of seconds and leave the launches the rest of the
        # invocation (the margin) to finish in, however slow the machine running the tests is.
        "FLEETWRIGHT_DEADLINE_MARGIN_SECONDS": "30",
        "FLEETWRIGHT_LAUNCH_MARGIN_SECONDS": "0",
        "FLEETWRIGHT_BATCH_IDLE_SECONDS": "0.2",
        "POWERTOOLS_METRICS_NAMESPACE": "FleetwrightTest",
    }.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("provisioner_handler_under_test", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # Powertools' Logger keeps the stream it was built with; read the JSON lines from our own.
    module.logger.registered_handler.setStream(io.StringIO())
    yield module
    module.runtime.reset()
    sys.modules.pop(spec.name, None)


def _logs(module: ModuleType) -> list[dict[str, Any]]:
    stream = module.logger.registered_handler.stream
    text = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    return _json_lines(text)


def _json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def test_the_handler_launches_for_pending_pods_and_reports(
    world: World, handler_module: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    world.pending(2)
    # 8 s past the 30 s margin: the first invocation also builds the Kubernetes client and reads the
    # catalogs and NodePools, which takes seconds on a loaded machine.
    result = handler_module.handler(_event("event-1"), FakeContext(38.0))
    assert result["leaseAcquired"] and len(result["launched"]) == 1
    assert len(world.instances()) == 1
    records = _json_lines(capsys.readouterr().out) + _logs(handler_module)
    decisions = [r for r in records if r.get("message") == "nodeclaim launched"]
    assert len(decisions) == 1
    decision = decisions[0]
    assert decision["pods"] == ["default/app-0", "default/app-1"]
    assert decision["instanceType"] in ("m5.large", "m5.xlarge")
    assert decision["capacityType"] == "on-demand" and decision["pricePerHour"] > 0
    assert decision["function_request_id"] == FakeContext.aws_request_id
    emf = [r for r in records if "_aws" in r]
    names = {m["Name"] for r in emf for d in r["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert {"NodeClaimsLaunched", "PendingPods", "SchedulingDuration", "HourlyCostLaunched"} <= names
    assert all(d["Namespace"] == "FleetwrightTest" for r in emf for d in r["_aws"]["CloudWatchMetrics"])


def test_a_repeated_event_is_not_run_again(world: World, handler_module: ModuleType) -> None:
    world.pending(1)
    # As above: a first invocation gets room to build its clients and read the catalogs when loaded.
    first = handler_module.handler(_event("event-7"), FakeContext(38.0))
    _logs(handler_module)
    again = handler_module.handler(_event("event-7"), FakeContext(38.0))
    assert again == first
    finished = [r for r in _logs(handler_module) if r.get("message") == "provisioner finished"]
    assert finished == []  # answered from the idempotency record
    assert world.create_fleet_calls() == 1


def test_bad_configuration_fails_the_cold_start_with_the_validate_message(
    handler_module: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(DOCUMENTS.replace("operator: In", "operator: Within", 1))
    monkeypatch.setenv("FLEETWRIGHT_NODEPOOLS_FILE", str(broken))
    with pytest.raises(ConfigError) as raised:
        handler_module.handler(_event("event-9"), FakeContext(5.0))
    assert f"{broken}: document 0 (NodePool default)" in str(raised.value)
    assert "Within" in str(raised.value)
    [logged] = [r for r in _logs(handler_module) if r.get("message") == "provisioner cannot start"]
    assert logged["level"] == "ERROR" and "Within" in logged["error"]
