"""A deployment without a NodePool file: NodePools are applied to the cluster with kubectl, Helm or Argo CD,
and the functions read them there only."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest

import app as cdk_app
from fleetwright.config.settings import settings_from_env
from infra.nodepool_parameter import CLUSTER_ONLY_TEXT, nodepools_yaml
from infra.nodepools import load_nodepool_config
from tests.support.infra import REPO_ROOT


@pytest.mark.parametrize("paths", [[], ["none"], ["None"], [""]])
def test_no_file_deploys_no_documents(paths: list[str]) -> None:
    config = load_nodepool_config(paths)

    assert config.cluster_only
    assert config.nodepools == [] and config.nodeclasses == [] and config.node_roles() == set()


def test_the_parameter_of_a_cluster_only_deployment_configures_no_nodepool() -> None:
    text = nodepools_yaml(load_nodepool_config(["none"]))
    assert text == CLUSTER_ONLY_TEXT

    env = {
        "FLEETWRIGHT_CLUSTER_NAME": "prod",
        "FLEETWRIGHT_STATE_TABLE": "t",
        "AWS_REGION": "us-east-1",
        "FLEETWRIGHT_NODEPOOLS_PARAMETER": "/fleetwright/prod/nodepools",
    }
    settings = settings_from_env(env, read_parameter=lambda _name: text)
    assert settings.config.nodepools == [] and settings.config.nodeclasses == []


def test_the_app_deploys_without_a_nodepool_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO_ROOT)
    outdir = tmp_path / "cdk.out"
    context = {"clusterName": "prod", "nodePoolsFile": "none"}
    assert cdk_app.main(cdk.App(outdir=str(outdir), context=context)) == 0

    template = json.loads((outdir / "Fleetwright-prod.template.json").read_text())
    resources = template["Resources"].values()
    parameters = [r for r in resources if r["Type"] == "AWS::SSM::Parameter"]
    assert [p["Properties"]["Value"] for p in parameters] == [CLUSTER_ONLY_TEXT]
    assert parameters[0]["Properties"]["Name"] == "/fleetwright/prod/nodepools"
    functions = [r for r in resources if r["Type"] == "AWS::Lambda::Function"]
    assert functions
    for function in functions:
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        assert "FLEETWRIGHT_NODEPOOLS_FILE" not in variables
        assert "FLEETWRIGHT_NODEPOOLS_PARAMETER" in variables
