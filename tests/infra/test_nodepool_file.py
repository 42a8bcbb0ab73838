"""A bad NodePool file stops the app at synth with the message ``fleetwright validate`` prints."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

import app as cdk_app
from fleetwright.cli import main as fleetwright_cli
from infra.nodepools import NodePoolFileError, load_nodepool_config
from tests.infra.conftest import EXAMPLE_NODECLASS, EXAMPLE_NODEPOOL, REPO_ROOT


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
