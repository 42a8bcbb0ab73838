"""Fixtures local to the disruption tests: ``make_rig``, the rig of ``tests/support/disruption.py`` on the
provisioning world (moto, the emulator, the state table), and ``lambda_env``, the disruption handler built
from its environment against that world."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleetwright.aws import clients as aws_clients
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.local.apiserver import ApiServer
from fleetwright.model.karpenter import NodePool
from tests.aws.strict import StrictEc2
from tests.support.aws import CLUSTER, node_class
from tests.support.disruption import DOCUMENTS, HANDLER, PASS_THROUGH, Rig, RigFactory, nodepool
from tests.support.provisioning import World
from tests.support.termination import load_module


@pytest.fixture
def make_rig(world: World, strict_ec2: StrictEc2 | None) -> RigFactory:
    """``make_rig(*nodepools)``: the rig with those NodePools (default: one pool, consolidateAfter 30s)."""
    # Instances' launch times are real (moto, to the second): the nodes have been up about a minute.
    world.wall.now = time.time() + 60

    def make(*pools: NodePool, **options: Any) -> Rig:
        config = ProvisionerConfig(
            cluster_name=CLUSTER, nodepools=list(pools) or [nodepool()], nodeclasses=[node_class()], **options
        )
        return Rig(world, config, strict=strict_ec2)

    return make


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
