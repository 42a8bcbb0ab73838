"""Fixtures local to the disruption tests: ``lambda_env``, the disruption handler built from its environment
against the provisioning world (``make_rig``, ``tests/fixtures/disruption.py``)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleetwright.aws import clients as aws_clients
from fleetwright.local.apiserver import ApiServer
from tests.support.disruption import DOCUMENTS, HANDLER, PASS_THROUGH, Rig, RigFactory, nodepool
from tests.support.termination import load_module


@pytest.fixture
def lambda_env(
    make_rig: RigFactory, apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Rig, ModuleType, Any]]:
    rig = make_rig(
        nodepool(consolidate_after="0s", policy="WhenEmpty", instance_types=["m5.large", "m5.xlarge"])
    )
    world = rig.world
    documents = tmp_path / "nodepools.yaml"
    documents.write_text(DOCUMENTS)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    world.aws.clients.eks.create_cluster(
        name="demo",
        version=world.aws.cluster.version,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(world.aws.subnets.values())[:2]},
    )
    sfn = world.aws.clients.client("stepfunctions")
    machine = sfn.create_state_machine(
        name="fleetwright-termination",
        definition=json.dumps(PASS_THROUGH),
        roleArn="arn:aws:iam::123456789012:role/fleetwright-termination",
    )["stateMachineArn"]
    monkeypatch.setitem(aws_clients._CACHE, ("us-east-1", "adaptive"), world.aws.clients)
    for key, value in {
        "AWS_REGION": "us-east-1",
        "FLEETWRIGHT_CLUSTER_NAME": "demo",
        "FLEETWRIGHT_STATE_TABLE": "fleetwright-state",
        "FLEETWRIGHT_NODEPOOLS_FILE": str(documents),
        "FLEETWRIGHT_KUBECONFIG": str(kubeconfig),
        "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN": machine,
        "FLEETWRIGHT_DISRUPTION_MIN_NODE_AGE_SECONDS": "0",
        "POWERTOOLS_METRICS_NAMESPACE": "FleetwrightTest",
    }.items():
        monkeypatch.setenv(key, value)
    module = load_module("disruption_handler_under_test", HANDLER)
    module.logger.registered_handler.setStream(io.StringIO())
    yield rig, module, sfn
    module.runtime.reset()
