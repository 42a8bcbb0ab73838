"""`fleetwright plan` on pods selecting a label no NodePool defines (Karpenter leaves them pending)."""

from pathlib import Path
from textwrap import dedent

from tests.cli.test_plan import plan_json
from tests.support.cli import EXAMPLES, Run

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
{expressions}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def pod_file(tmp_path: Path, name: str, *expressions: str) -> Path:
    lines = "\n".join(f"              - {e}" for e in expressions)
    path = tmp_path / f"{name}.yaml"
    path.write_text(dedent(POD.format(name=name, expressions=lines)).lstrip())
    return path


def test_plan_leaves_a_pod_requiring_an_undefined_label_pending_and_says_why(
    tmp_path: Path, run: Run
) -> None:
    lenient = pod_file(tmp_path, "lenient", "{key: example.com/team, operator: NotIn, values: [x]}")
    strict = pod_file(
        tmp_path,
        "strict",
        "{key: example.com/team, operator: Exists}",
        "{key: example.com/team, operator: NotIn, values: [x]}",
    )
    exists = pod_file(tmp_path, "exists", "{key: example.com/team, operator: Exists}")
    inflate = EXAMPLES / "inflate"
    doc = plan_json(run, inflate / "nodepool.yaml", inflate / "ec2nodeclass.yaml", lenient, strict, exists)
    assert [p for claim in doc["nodeClaims"] for p in claim["pods"]] == ["default/lenient"]
    pending = {entry["pod"]: entry["reason"] for entry in doc["unschedulable"]}
    assert set(pending) == {"default/strict", "default/exists"}
    assert all('label "example.com/team" is not set by the NodePool' in r for r in pending.values())
