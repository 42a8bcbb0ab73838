from pathlib import Path
from textwrap import dedent

from tests.support.cli import EXAMPLES, Run

NODEPOOL_V1BETA1 = """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: legacy}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
"""


def test_validate_prints_ok_per_karpenter_document_and_skips_the_rest(run: Run) -> None:
    code, out, err = run("validate", "-f", str(EXAMPLES / "inflate"))
    assert code == 0, err
    lines = out.splitlines()
    assert any("(NodePool default): OK" in line for line in lines)
    assert any("(EC2NodeClass default): OK" in line for line in lines)
    assert any("(Deployment inflate): skipped" in line for line in lines)
    assert err == ""


def test_validate_reports_every_error_and_exits_2(run: Run, tmp_path: Path) -> None:
    nodepool = (EXAMPLES / "inflate" / "nodepool.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(nodepool.replace("operator: In", "operator: Within", 1))
    code, out, err = run("validate", "-f", str(bad), "-f", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert f"{bad}: document 0 (NodePool default)" in err
    assert "Within" in err
    assert "missing.yaml" in err and "no such file or directory" in err
    assert "OK" not in out


def test_validate_needs_the_referenced_nodeclass(run: Run) -> None:
    code, _, err = run("validate", "-f", str(EXAMPLES / "inflate" / "nodepool.yaml"))
    assert code == 2
    assert "EC2NodeClass default" in err


def test_validate_converts_legacy_versions_with_a_warning(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "legacy.yaml"
    path.write_text(dedent(NODEPOOL_V1BETA1))
    code, out, err = run("validate", "-f", str(path), "-f", str(EXAMPLES / "inflate" / "ec2nodeclass.yaml"))
    assert code == 0, err
    assert "(NodePool legacy): OK" in out
    assert "warning" in err and "v1beta1" in err


def test_malformed_yaml_is_an_error_with_its_line(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: NodePool\nmetadata:\n  name: a: b\n")
    code, _, err = run("validate", "-f", str(path))
    assert code == 2
    assert "line 3" in err


def test_usage_errors_exit_2(run: Run) -> None:
    code, _, err = run("validate")
    assert code == 2
    assert "-f" in err
