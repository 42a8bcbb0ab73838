"""``fleetwright validate`` notes a NodePool without ``spec.limits``: a report line, not a warning, so the
valid corpus (Karpenter's own examples, many without limits) still validates without a warning."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from fleetwright.validation import validate
from tests.model.test_corpus import BASE_NODECLASS, VALID

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
{extra}"""


def _write(tmp_path: Path, name: str, extra: str = "") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(dedent(NODEPOOL).format(name=name, extra=extra))
    return str(path)


def test_a_nodepool_without_limits_gets_a_note_not_a_warning(tmp_path: Path) -> None:
    report, warnings, errors = validate([str(BASE_NODECLASS), _write(tmp_path, "unbounded")])
    assert errors == [] and warnings == []
    [note] = [line for line in report if ": note: " in line]
    assert "(NodePool unbounded)" in note
    assert "NodePool unbounded has no spec.limits" in note and "launch-rate cap" in note


def test_a_nodepool_with_limits_or_replicas_gets_no_note(tmp_path: Path) -> None:
    limited = _write(tmp_path, "limited", "  limits: {cpu: '100'}\n")
    static = _write(tmp_path, "static", "  replicas: 2\n")
    report, warnings, errors = validate([str(BASE_NODECLASS), limited, static])
    assert errors == [] and warnings == []
    assert [line for line in report if line.endswith(": OK")]
    assert not [line for line in report if ": note: " in line]


def test_the_corpus_notes_its_unbounded_nodepools_and_still_warns_of_nothing() -> None:
    report, warnings, _ = validate([str(path) for path in VALID])
    assert warnings == []
    noted = [line for line in report if ": note: " in line]
    assert noted and all("has no spec.limits" in line for line in noted)
