"""Big ``fleetwright plan`` inputs: ``kubectl get pods -o json`` lists, and YAML read by the fast loader
with the same objects and the same located errors as PyYAML's own loader."""

import datetime
import json
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
import yaml

from fleetwright.manifests import load_manifests, manifest_files
from fleetwright.model.errors import DocumentError
from fleetwright.yamlload import load_all
from tests.support.cli import Run
from tests.test_manifests import NODECLASS, NODEPOOL


def kubectl_pod(name: str, cpu: str, node: str | None = None) -> dict[str, Any]:
    """A pod as the API server returns it (``kubectl get pods -o json``'s items)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": "2026-11-24T10:00:01Z",
            "labels": {"app": "web"},
            "name": name,
            "namespace": "shop",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "controller": True,
                    "kind": "ReplicaSet",
                    "name": "web-6f9",
                    "uid": "u1",
                }
            ],
            "resourceVersion": "4211",
            "uid": f"uid-{name}",
        },
        "spec": {
            "containers": [{"image": "nginx", "name": "web", "resources": {"requests": {"cpu": cpu}}}],
            "tolerations": [
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
    return pod


def pod_list(*pods: dict[str, Any]) -> str:
    return json.dumps(
        {"apiVersion": "v1", "items": list(pods), "kind": "List", "metadata": {"resourceVersion": ""}},
        indent=4,
    )


@pytest.fixture
def nodepool_file(tmp_path: Path) -> Path:
    path = tmp_path / "nodepool.yaml"
    path.write_text(dedent(NODEPOOL) + "---\n" + dedent(NODECLASS))
    return path


def test_kubectl_json_pod_list_plans_its_pending_pods(run: Run, tmp_path: Path, nodepool_file: Path) -> None:
    pods = tmp_path / "pods.json"
    pods.write_text(pod_list(kubectl_pod("web-1", "1500m"), kubectl_pod("web-2", "1500m")))
    code, out, err = run("plan", "-o", "json", "-f", str(nodepool_file), "-f", str(pods))
    assert code == 0, err
    plan = json.loads(out)
    assert plan["summary"]["pods"] == 2 and plan["summary"]["scheduled"] == 2
    assert sorted(p for claim in plan["nodeClaims"] for p in claim["pods"]) == ["shop/web-1", "shop/web-2"]


def test_json_files_in_a_directory_are_read(tmp_path: Path, nodepool_file: Path) -> None:
    (tmp_path / "pods.json").write_text(pod_list(kubectl_pod("web-1", "1")))
    (tmp_path / "package-notes.txt").write_text("{}")
    assert [f.name for f in manifest_files([str(tmp_path)])] == ["nodepool.yaml", "pods.json"]
    manifests = load_manifests([str(tmp_path)])
    assert [p.name for p in manifests.pods] == ["web-1"] and [np.name for np in manifests.nodepools] == [
        "default"
    ]


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    text = pod_list(kubectl_pod("web-1", "1")).replace('"name": "web-1",', '"name": "web-1"', 1)
    path.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if '"name": "web-1"' in ln) + 1
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    message = str(err.value)
    assert message.startswith(f"{path}: document 0")
    assert f"invalid JSON at line {line}, column" in message and "delimiter" in message


def test_flow_style_yaml_starting_with_a_brace_is_still_yaml(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(
        "{apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: x}]}}\n"
    )
    assert [p.name for p in load_manifests([str(path)]).pods] == ["a"]


def test_kubectl_yaml_list_and_json_list_give_the_same_pods(tmp_path: Path) -> None:
    pods = [kubectl_pod(f"web-{i}", f"{100 * (i + 1)}m") for i in range(5)] + [
        kubectl_pod("bound", "1", "n1")
    ]
    listing = json.loads(pod_list(*pods))
    (tmp_path / "pods.json").write_text(json.dumps(listing))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump(listing))
    from_json = load_manifests([str(tmp_path / "pods.json")])
    from_yaml = load_manifests([str(tmp_path / "pods.yaml")])
    assert [(p.name, p.requests) for p in from_json.pods] == [(p.name, p.requests) for p in from_yaml.pods]
    assert len(from_json.pods) == 5  # the bound pod's node is not in the input
    assert any("node 'n1' is not in the manifests" in w.render() for w in from_yaml.warnings)


TRICKY = """\
plain: text
quoted: "123"
int: 0x1F
octal: 012
float: 1.5e3
bool: yes
null_value: ~
empty:
date: 2026-11-24
stamp: 2026-11-24T10:00:01Z
explicit: !!str 42
forced_int: !!int "7"
list: [1, "2", three, {a: b}]
nested:
- key: value
  other: [x, y]
'quoted key': 1
? 3
: three
---
---
# only a comment
---
second: document
"""

WITH_ANCHORS = """\
first: plain
---
base: &base {cpu: "1", memory: 1Gi}
pod:
  <<: *base
  memory: 2Gi
again: *base
---
after: anchors
"""


def test_fast_loader_builds_what_pyyaml_builds() -> None:
    for text in (TRICKY, WITH_ANCHORS):
        assert list(load_all(text)) == list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    documents = list(load_all(TRICKY))
    assert documents[0]["int"] == 31 and documents[0]["bool"] is True and documents[0]["explicit"] == "42"
    assert documents[0]["stamp"] == datetime.datetime(2026, 11, 24, 10, 0, 1, tzinfo=datetime.UTC)
    assert documents[1:] == [None, None, {"second": "document"}]
    merged = list(load_all(WITH_ANCHORS))[1]
    assert merged["pod"] == {"cpu": "1", "memory": "2Gi"} and merged["again"] is merged["base"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a: 1\n---\nkind: Pod\nmetadata:\n  name: a: b\n", "mapping values are not allowed"),
        ("a: !!python/object:os.system x\n", "could not determine a constructor"),
        ("items:\n- [1, 2\n- 3\n", "expected ',' or ']'"),
    ],
)
def test_fast_loader_errors_are_pyyaml_errors_with_their_place(text: str, error: str) -> None:
    with pytest.raises(yaml.MarkedYAMLError) as fast:
        list(load_all(text))
    with pytest.raises(yaml.MarkedYAMLError) as slow:
        list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    assert error in str(fast.value)
    assert fast.value.problem_mark is not None and slow.value.problem_mark is not None
    assert (fast.value.problem_mark.line, fast.value.problem_mark.column) == (
        slow.value.problem_mark.line,
        slow.value.problem_mark.column,
    )


def test_malformed_yaml_deep_in_a_big_list_names_its_line(tmp_path: Path) -> None:
    listing = json.loads(pod_list(*(kubectl_pod(f"web-{i}", "100m") for i in range(300))))
    text = yaml.safe_dump(listing)
    lines = text.splitlines()
    broken = next(i for i, ln in enumerate(lines) if "name: web-250" in ln)
    lines[broken] = lines[broken] + ": oops"
    path = tmp_path / "pods.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    assert f"invalid YAML at line {broken + 1}, column" in str(err.value)
