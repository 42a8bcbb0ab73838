from pathlib import Path
from textwrap import dedent

import pytest

from fleetwright.manifests import load_manifests, manifest_files
from fleetwright.model.errors import DocumentError

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: c, image: pause, resources: {{requests: {{cpu: "1"}}}}}}]
"""

NODE = """
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{topology.kubernetes.io/zone: us-east-1a}}}}
status:
  allocatable: {{cpu: "2", memory: 8Gi, pods: "29"}}
"""

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"""

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
"""


def write(path: Path, *docs: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n".join(dedent(d).strip("\n") + "\n" for d in docs))
    return path


def test_directory_is_searched_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b" / "deep" / "two.yml", POD.format(name="two"))
    write(tmp_path / "a.yaml", POD.format(name="one"))
    write(tmp_path / "c" / "three.yaml", POD.format(name="three"))
    (tmp_path / "notes.txt").write_text("kind: Nonsense")
    write(tmp_path / ".hidden" / "x.yaml", "kind: Nonsense")
    manifests = load_manifests([str(tmp_path)])
    assert [p.name for p in manifests.pods] == ["one", "two", "three"]
    assert [f.name for f in manifest_files([str(tmp_path)])] == ["a.yaml", "two.yml", "three.yaml"]


def test_multi_document_file_skips_empty_documents(tmp_path: Path) -> None:
    path = write(tmp_path / "all.yaml", POD.format(name="a"), "", "# only a comment\n", POD.format(name="b"))
    assert [p.name for p in load_manifests([str(path)]).pods] == ["a", "b"]


def test_several_paths(tmp_path: Path) -> None:
    one = write(tmp_path / "one.yaml", POD.format(name="a"))
    two = write(tmp_path / "dir" / "two.yaml", POD.format(name="b"))
    assert [p.name for p in load_manifests([str(one), str(two.parent)]).pods] == ["a", "b"]


def test_list_kind_items(tmp_path: Path) -> None:
    path = write(
        tmp_path / "list.yaml",
        """
        apiVersion: v1
        kind: List
        items:
          - apiVersion: v1
            kind: Pod
            metadata: {name: x}
            spec: {containers: [{name: c}]}
          - apiVersion: policy/v1
            kind: PodDisruptionBudget
            metadata: {name: pdb}
            spec: {maxUnavailable: 1}
        """,
    )
    manifests = load_manifests([str(path)])
    assert [p.name for p in manifests.pods] == ["x"]
    assert [pdb["metadata"]["name"] for pdb in manifests.pdbs] == ["pdb"]


def test_list_item_errors_name_the_item(tmp_path: Path) -> None:
    path = write(
        tmp_path / "list.yaml",
        """
        kind: List
        items:
          - {kind: Pod, metadata: {name: ok}, spec: {containers: [{name: c}]}}
          - kind: Pod
            metadata: {name: bad}
            spec: {containers: [{name: c, resources: {requests: {cpu: x}}}]}
        """,
    )
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    assert "items[1].spec.containers[0].resources.requests.cpu" in str(err.value)


def test_pods_with_node_name_run_on_their_node(tmp_path: Path) -> None:
    bound = dedent(POD.format(name="running")) + "  nodeName: node-1\n"
    path = write(tmp_path / "cluster.yaml", bound, NODE.format(name="node-1"), POD.format(name="pending"))
    manifests = load_manifests([str(path)])
    assert [p.name for p in manifests.pods] == ["pending"]
    (node,) = manifests.nodes
    assert [p.name for p in node.pods] == ["running"]
    assert node.allocatable["cpu"] == 2000


def test_pod_on_a_node_not_in_the_manifests_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.yaml", dedent(POD.format(name="orphan")) + "  nodeName: gone\n")
    manifests = load_manifests([str(path)])
    assert manifests.pods == []
    assert any("gone" in w.message for w in manifests.warnings)


def test_finished_pods_are_dropped(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.yaml", dedent(POD.format(name="done")) + "status: {phase: Succeeded}\n")
    assert load_manifests([str(path)]).pods == []


def test_workloads_daemonsets_and_storage_objects(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          replicas: 2
          template:
            metadata: {labels: {app: web}}
            spec: {containers: [{name: c, resources: {requests: {memory: 1Gi}}}]}
        """,
        """
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: agent, namespace: kube-system}
        spec:
          template:
            spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
        """,
        "{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data}, spec: {}}",
        "{apiVersion: v1, kind: PersistentVolume, metadata: {name: pv1}, spec: {}}",
        "{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: gp3}, provisioner: ebs}",
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {}}",
    )
    manifests = load_manifests([str(path)])
    assert [p.key for p in manifests.pods] == ["default/web-0", "default/web-1"]
    assert [p.key for p in manifests.daemonsets] == ["kube-system/agent"]
    assert [o["metadata"]["name"] for o in manifests.pvcs + manifests.pvs + manifests.storageclasses] == [
        "data",
        "pv1",
        "gp3",
    ]
    assert any("Service" in w.message for w in manifests.warnings)


def test_unknown_kind_suggests_the_closest(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.yaml",
        POD.format(name="a"),
        "{apiVersion: apps/v1, kind: Deploymnet, metadata: {name: w}}",
    )
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    message = str(err.value)
    assert "document 1 (Deploymnet w)" in message
    assert "unknown kind 'Deploymnet'" in message and 'did you mean "Deployment"' in message


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(dedent(POD.format(name="a")).lstrip() + "---\nkind: Pod\nmetadata:\n  name: a: b\n")
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    message = str(err.value)
    assert message.startswith(f"{path}: document 1")
    # Line 9 of the file: the second document's "name: a: b".
    assert "line 9, column" in message and "mapping values are not allowed" in message


def test_problems_in_several_documents_are_all_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.yaml",
        "{kind: Pod, metadata: {name: a}, spec: {}}",
        "{kind: Widget, metadata: {name: w}}",
    )
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    lines = str(err.value).splitlines()
    assert any("document 0" in line and "spec.containers" in line for line in lines)
    assert any("document 1" in line and "Widget" in line for line in lines)


def test_duplicate_pods_are_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "x.yaml", POD.format(name="a"), POD.format(name="a"))
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    assert "duplicate Pod default/a" in str(err.value)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as err:
        load_manifests([str(tmp_path / "nope.yaml")])
    assert "no such file or directory" in str(err.value)


def test_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path / "x.yaml", "- just\n- a list\n")
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    assert "expected a Kubernetes object" in str(err.value)


def test_nodepools_and_nodeclasses(tmp_path: Path) -> None:
    path = write(tmp_path / "karpenter.yaml", NODEPOOL, NODECLASS)
    manifests = load_manifests([str(path)])
    assert [np.name for np in manifests.nodepools] == ["default"]
    assert [nc.name for nc in manifests.nodeclasses] == ["default"]
    assert manifests.nodepools[0].node_class_name() == "default"


def test_invalid_nodepool_is_reported_with_its_file(tmp_path: Path) -> None:
    path = write(tmp_path / "karpenter.yaml", NODEPOOL.replace("operator: In", "operator: Within"))
    with pytest.raises(DocumentError) as err:
        load_manifests([str(path)])
    assert str(err.value).startswith(f"{path}: document 0 (NodePool default)")
