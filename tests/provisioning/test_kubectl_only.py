"""A deployment with no NodePool documents (NodePools managed with kubectl, Helm or Argo CD): the
functions start, read the cluster only, launch nothing while it holds no NodePool (saying so), and launch
for the first one applied."""

from __future__ import annotations

import logging

import pytest

from fleetwright.config.settings import ConfigError, ProvisionerConfig, settings_from_env
from fleetwright.local.apiserver import ApiServer
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning.nodepool_source import NO_NODEPOOLS, SOURCE_CLUSTER, NodePoolSource
from tests.provisioning.test_nodepools_from_cluster import NODECLASS, Kubectl, kubectl, nodepool_doc
from tests.support.aws import CLUSTER
from tests.support.provisioning import World

__all__ = ["kubectl"]  # the fixture, used here by name

ENV = {"FLEETWRIGHT_CLUSTER_NAME": "demo", "FLEETWRIGHT_STATE_TABLE": "t", "AWS_REGION": "us-east-1"}


def test_no_file_and_no_parameter_configure_no_documents() -> None:
    settings = settings_from_env(ENV)

    assert settings.config.nodepools == [] and settings.config.nodeclasses == []
    assert settings.sources == []


def test_a_parameter_without_documents_configures_none() -> None:
    text = "# NodePools come from the cluster\n---\n"
    settings = settings_from_env(
        {**ENV, "FLEETWRIGHT_NODEPOOLS_PARAMETER": "/fleetwright/demo/nodepools"},
        read_parameter=lambda _name: text,
    )

    assert settings.config.nodepools == []
    assert settings.sources == ["/fleetwright/demo/nodepools"]


def test_a_file_without_a_nodepool_is_still_refused(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "empty.yaml"  # type: ignore[operator]
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no NodePool found"):
        settings_from_env({**ENV, "FLEETWRIGHT_NODEPOOLS_FILE": str(path)})


def test_nothing_launches_until_a_nodepool_is_applied(
    world: World, kubectl: Kubectl, apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = RecordingMetrics()
    config = ProvisionerConfig(cluster_name=CLUSTER)
    source = NodePoolSource(world.kube, config, metrics=metrics)
    provisioner = world.provisioner(config, metrics=metrics, nodepool_source=source)
    world.pending(1)

    with caplog.at_level(logging.ERROR, logger="fleetwright.nodepools"):
        assert provisioner.run_once().launched == []
        assert provisioner.run_once().launched == []
    assert world.instances() == []
    assert metrics.total(NO_NODEPOOLS) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "no NodePool" in errors[0] and "kubectl apply" in errors[0]

    kubectl.apply(NODECLASS, nodepool_doc("general", "m5.large"))

    assert [(c.nodepool, c.instance_type) for c in provisioner.run_once().launched] == [
        ("general", "m5.large")
    ]
    assert source.source == SOURCE_CLUSTER
    assert len(world.instances()) == 1
    assert metrics.total(NO_NODEPOOLS) == 2
