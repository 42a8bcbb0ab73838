"""A bad NodePool file stops the app at synth with the message ``fleetwright validate`` prints."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml

import app as cdk_app
from fleetwright.cli import main as fleetwright_cli
from infra.nodepool_parameter import nodepools_yaml
from infra.nodepools import NodePoolFileError, load_nodepool_config
from tests.support.infra import EXAMPLE_NODECLASS, EXAMPLE_NODEPOOL, REPO_ROOT


@pytest.fixture
def bad_nodepool(tmp_path: Path) -> Path:
    """The example NodePool with a misspelt operator and a duration that is not one."""
    text = EXAMPLE_NODEPOOL.read_text(encoding="utf-8")
    text = text.replace(
        'operator: In\n          values: ["on-demand"]', 'operator: Inn\n          values: ["on-demand"]'
    )
    text = text.replace("consolidateAfter: 1m", "consolidateAfter: soon")
    path = tmp_path / "nodepool.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _run_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, context: dict[str, str]) -> int:
    """``app.py``'s entry point with ``context`` (as ``-c`` gives it), from the project directory."""
    monkeypatch.chdir(REPO_ROOT)
    return cdk_app.main(cdk.App(outdir=str(tmp_path / "cdk.out"), context=context))


def test_bad_file_fails_with_the_validate_message(
    bad_nodepool: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert fleetwright_cli(["validate", "-f", str(bad_nodepool)]) == 2
    validate_stderr = capsys.readouterr().err
    assert "operator" in validate_stderr and "consolidateAfter" in validate_stderr

    with pytest.raises(NodePoolFileError) as raised:
        load_nodepool_config([str(bad_nodepool)])
    assert str(raised.value) + "\n" == validate_stderr

    code = _run_app(monkeypatch, tmp_path, {"clusterName": "prod", "nodePoolsFile": str(bad_nodepool)})
    assert code == 2
    assert capsys.readouterr().err == validate_stderr
    assert not list((tmp_path / "cdk.out").glob("*.template.json"))  # nothing was synthesized


def test_reference_to_a_missing_nodeclass_fails(tmp_path: Path) -> None:
    (tmp_path / "nodepool.yaml").write_text(EXAMPLE_NODEPOOL.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(NodePoolFileError, match="nodeClassRef EC2NodeClass default not found"):
        load_nodepool_config([str(tmp_path)])


def test_file_without_nodepools_fails(tmp_path: Path) -> None:
    (tmp_path / "nodeclass.yaml").write_text(EXAMPLE_NODECLASS.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(NodePoolFileError, match="no NodePool found"):
        load_nodepool_config([str(tmp_path)])


def test_missing_file_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(NodePoolFileError, match="no such file"):
        load_nodepool_config([str(tmp_path / "absent.yaml")])


def test_other_documents_next_to_nodepools_are_skipped() -> None:
    config = load_nodepool_config([str(REPO_ROOT / "examples" / "inflate")])  # has a Deployment too
    assert [n.name for n in config.nodepools] == ["default"]
    assert [n.name for n in config.nodeclasses] == ["default"]
    assert sorted(d["kind"] for d in config.documents) == ["EC2NodeClass", "NodePool"]


def test_cluster_name_is_required(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert _run_app(monkeypatch, tmp_path, {}) == 2
    assert "clusterName" in capsys.readouterr().err


KUBECTL_EXPORT = """\
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata:
    name: default
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion": "karpenter.sh/v1"}'
      fleetwright.io/packing: LowestCost
    creationTimestamp: "2026-01-01T00:00:00Z"
    generation: 3
    resourceVersion: "1234"
    uid: 0b7e0a0e-0000-4000-8000-000000000000
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  status:
    conditions: [{type: Ready, status: "True", reason: Ready, message: "",
                  lastTransitionTime: "2026-01-01T00:00:00Z"}]
    resources: {cpu: "4", nodes: "1"}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata:
    name: default
    finalizers: [karpenter.k8s.aws/termination]
    resourceVersion: "99"
  spec:
    amiSelectorTerms: [{alias: al2023@latest}]
    role: FleetwrightNodeRole-prod
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  status:
    instanceProfile: prod_123
"""


def test_kubectl_export_of_karpenter_objects_deploys_without_their_server_state(tmp_path: Path) -> None:
    # Migrating from Karpenter: `kubectl get nodepools,ec2nodeclasses -o yaml` is a deployable file.
    (tmp_path / "karpenter.yaml").write_text(KUBECTL_EXPORT, encoding="utf-8")
    config = load_nodepool_config([str(tmp_path)])
    text = nodepools_yaml(config)
    for server_set in ("status", "resourceVersion", "uid", "creationTimestamp", "finalizers", "last-applied"):
        assert server_set not in text, server_set
    documents = list(yaml.safe_load_all(text))
    assert documents[0]["metadata"] == {
        "name": "default",
        "annotations": {"fleetwright.io/packing": "LowestCost"},
    }
    assert [d["spec"] for d in documents] == [d["spec"] for d in yaml.safe_load(KUBECTL_EXPORT)["items"]]
    # what the functions read back is the same configuration
    (tmp_path / "karpenter.yaml").write_text(text, encoding="utf-8")
    again = load_nodepool_config([str(tmp_path)])
    assert [n.spec for n in again.nodepools] == [n.spec for n in config.nodepools]
    assert [n.spec for n in again.nodeclasses] == [n.spec for n in config.nodeclasses]
