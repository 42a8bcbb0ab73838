import json
import shutil
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.model.instancetype import InstanceType
from tests.support.cli import EXAMPLES, Run

INFLATE = EXAMPLES / "inflate"
INFLATE_SPOT = EXAMPLES / "inflate-spot"

UNRESTRICTED_NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"""


def catalog_type(name: str) -> InstanceType:
    return next(it for it in builtin_catalog("us-east-1") if it.name == name)


def plan_json(run: Run, *paths: Path | str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    args = ["plan", "-o", "json", *extra]
    for path in paths:
        args += ["-f", str(path)]
    code, out, err = run(*args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


BILL_PARTS = {"instance", "volumes", "publicIPv4", "cpuCredits", "total"}


def write(path: Path, text: str) -> Path:
    path.write_text(dedent(text).lstrip())
    return path


def test_json_contract_keys_and_types(run: Run) -> None:
    doc = plan_json(run, INFLATE)
    assert set(doc) == {"nodeClaims", "existingNodes", "unschedulable", "summary"}
    for claim in doc["nodeClaims"]:
        assert set(claim) == {
            "name",
            "nodePool",
            "instanceTypes",
            "zones",
            "capacityTypes",
            "labels",
            "taints",
            "pods",
            "price",
            "bill",
        }
        assert isinstance(claim["name"], str) and isinstance(claim["nodePool"], str)
        for key in ("instanceTypes", "zones", "capacityTypes", "taints", "pods"):
            assert isinstance(claim[key], list) and all(isinstance(v, str) for v in claim[key])
        assert isinstance(claim["labels"], dict)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in claim["labels"].items())
        assert isinstance(claim["price"], float)
        assert set(claim["bill"]) == BILL_PARTS
        assert all(isinstance(v, float) for v in claim["bill"].values())
    summary = doc["summary"]
    assert set(summary) == {"pods", "scheduled", "newNodeClaims", "hourlyCost", "hourlyBill"}
    assert all(isinstance(summary[k], int) for k in ("pods", "scheduled", "newNodeClaims"))
    assert isinstance(summary["hourlyCost"], float)
    assert set(summary["hourlyBill"]) == BILL_PARTS


def test_inflate_example_plans_one_m5_large(run: Run) -> None:
    doc = plan_json(run, INFLATE)
    (claim,) = doc["nodeClaims"]
    assert claim["nodePool"] == "default"
    assert claim["instanceTypes"][0] == "m5.large"
    # Only the NodePool's types that hold 5Gi of pods are candidates: never c5.large (4 GiB).
    assert set(claim["instanceTypes"]) <= {"m5.large", "r5.large", "m5.xlarge"}
    assert claim["capacityTypes"] == ["on-demand"]
    assert sorted(claim["pods"]) == [f"default/inflate-{i}" for i in range(5)]
    expected = catalog_type("m5.large").cheapest(capacity_types=frozenset({"on-demand"}))
    assert expected is not None
    assert claim["price"] == pytest.approx(expected.price)
    assert doc["unschedulable"] == [] and doc["existingNodes"] == []
    # The EC2NodeClass gives no blockDeviceMappings: AL2023's 20 GiB gp3 root volume at $0.08/GB-month.
    volume = 20 * 0.08 / 730
    bill = {
        "instance": pytest.approx(expected.price),
        "volumes": pytest.approx(volume, abs=1e-6),
        "publicIPv4": 0.0,
        "cpuCredits": 0.0,
        "total": pytest.approx(expected.price + volume, abs=1e-6),
    }
    assert claim["bill"] == bill
    assert doc["summary"] == {
        "pods": 5,
        "scheduled": 5,
        "newNodeClaims": 1,
        "hourlyCost": pytest.approx(expected.price),
        "hourlyBill": bill,
    }


def test_inflate_spot_example_plans_one_eight_vcpu_spot_node(run: Run) -> None:
    doc = plan_json(run, INFLATE_SPOT)
    (claim,) = doc["nodeClaims"]
    assert claim["capacityTypes"] == ["spot"]
    assert len(claim["pods"]) == 5
    cheapest = catalog_type(claim["instanceTypes"][0])
    assert cheapest.capacity["cpu"] == 8000
    offering = cheapest.cheapest(frozenset(claim["zones"]), frozenset({"spot"}))
    assert offering is not None and claim["price"] == pytest.approx(offering.price)


def test_inflate_spot_without_fewer_nodes_plans_cheaper_spot_nodes(run: Run, tmp_path: Path) -> None:
    for name in ("deployment.yaml", "ec2nodeclass.yaml", "nodepool.yaml"):
        shutil.copy(INFLATE_SPOT / name, tmp_path / name)
    pool = tmp_path / "nodepool.yaml"
    text = pool.read_text()
    start, end = text.index("  annotations:"), text.index("FewerNodes\n") + len("FewerNodes\n")
    pool.write_text(text[:start] + text[end:])  # the default packing
    doc = plan_json(run, tmp_path)
    claims = doc["nodeClaims"]
    assert sum(len(claim["pods"]) for claim in claims) == 5
    for claim in claims:
        assert claim["capacityTypes"] == ["spot"]
        cheapest = catalog_type(claim["instanceTypes"][0])
        offering = cheapest.cheapest(frozenset(claim["zones"]), frozenset({"spot"}))
        assert offering is not None and claim["price"] == pytest.approx(offering.price)
    fewer_nodes = plan_json(run, INFLATE_SPOT)["summary"]["hourlyBill"]["total"]
    assert doc["summary"]["hourlyBill"]["total"] < fewer_nodes


def test_table_output_for_people(run: Run) -> None:
    doc = plan_json(run, INFLATE)
    code, out, err = run("plan", "-f", str(INFLATE))
    assert code == 0, err
    (claim,) = doc["nodeClaims"]
    more = len(claim["instanceTypes"]) - 1
    assert f"m5.large (+{more} more)" in out
    assert "default" in out and "on-demand" in out
    bill = claim["bill"]
    header = next(line for line in out.splitlines() if line.startswith("NODEPOOL"))
    assert header.split()[-5:] == ["INSTANCE", "VOLUMES", "IPV4", "CREDITS", "$/HOUR"]
    row = next(line for line in out.splitlines() if line.startswith("default "))
    parts = ("instance", "volumes", "publicIPv4", "cpuCredits", "total")
    assert row.split()[-5:] == [f"{bill[part]:.4f}" for part in parts]
    assert "5 pending, 5 scheduled" in out
    total = bill["total"]
    assert f"${total:.4f}/hour (${total * 730:.2f}/month) for 1 node" in out
    assert f"instances ${bill['instance']:.4f}, volumes ${bill['volumes']:.4f}, public IPv4 $0.0000" in out
    # Prose fits 100 columns; the node table is as wide as its columns (a bill part each).
    assert all(len(line) <= 100 for line in out.splitlines() if line not in (header, row))


def test_unschedulable_pods_are_listed_with_a_reason(run: Run, tmp_path: Path) -> None:
    for name in ("nodepool.yaml", "ec2nodeclass.yaml"):
        shutil.copy(INFLATE / name, tmp_path / name)
    write(
        tmp_path / "huge.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: huge, namespace: batch}
        spec:
          containers: [{name: c, image: pause, resources: {requests: {cpu: "1000"}}}]
        """,
    )
    doc = plan_json(run, tmp_path)
    assert doc["nodeClaims"] == []
    (error,) = doc["unschedulable"]
    assert error["pod"] == "batch/huge" and error["reason"]
    assert doc["summary"]["scheduled"] == 0
    code, out, _ = run("plan", "-f", str(tmp_path))
    assert code == 0
    assert "batch/huge" in out and "0 scheduled" in out and "1 unschedulable" in out
    assert all(len(line) <= 100 for line in out.splitlines())


def test_pending_pods_fill_existing_nodes_first(run: Run, tmp_path: Path) -> None:
    for name in ("nodepool.yaml", "ec2nodeclass.yaml"):
        shutil.copy(INFLATE / name, tmp_path / name)
    write(
        tmp_path / "cluster.yaml",
        """
        apiVersion: v1
        kind: Node
        metadata:
          name: ip-10-0-0-1.ec2.internal
          labels:
            kubernetes.io/hostname: ip-10-0-0-1.ec2.internal
            topology.kubernetes.io/zone: us-east-1a
            node.kubernetes.io/instance-type: m5.2xlarge
        status:
          allocatable: {cpu: 7910m, memory: 29Gi, pods: "58"}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: web}
        spec:
          containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
        """,
    )
    doc = plan_json(run, tmp_path)
    assert doc["existingNodes"] == [{"name": "ip-10-0-0-1.ec2.internal", "pods": ["default/web"]}]
    assert doc["nodeClaims"] == []
    assert doc["summary"]["scheduled"] == 1 and doc["summary"]["hourlyCost"] == 0.0


def test_instance_types_file_replaces_the_builtin_catalog(run: Run, tmp_path: Path) -> None:
    catalog = {
        "instanceTypes": [
            {
                "name": name,
                "capacity": {"cpu": cpu, "memory": memory},
                "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": price}],
                "eniLimits": {"interfaces": 4, "ipv4PerInterface": 15},
            }
            for name, cpu, memory, price in (("m5.large", "2", "8Gi", 0.5), ("c5.xlarge", "4", "8Gi", 0.25))
        ]
    }
    catalog_file = tmp_path / "catalog.json"
    catalog_file.write_text(json.dumps(catalog))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    shutil.copy(INFLATE / "ec2nodeclass.yaml", manifests)
    shutil.copy(INFLATE / "deployment.yaml", manifests)
    write(manifests / "nodepool.yaml", UNRESTRICTED_NODEPOOL)
    doc = plan_json(run, manifests, extra=("--instance-types", str(catalog_file)))
    (claim,) = doc["nodeClaims"]
    assert claim["instanceTypes"] == ["c5.xlarge", "m5.large"]
    assert claim["zones"] == ["us-east-1a"]
    assert claim["price"] == 0.25


def test_bad_manifest_exits_2_with_the_field_path(run: Run, tmp_path: Path) -> None:
    shutil.copytree(INFLATE, tmp_path / "inflate")
    deployment = tmp_path / "inflate" / "deployment.yaml"
    deployment.write_text(deployment.read_text().replace("memory: 1Gi", "memory: 1 gig"))
    code, out, err = run("plan", "-f", str(tmp_path / "inflate"))
    assert code == 2
    assert out == ""
    assert f"{deployment}: document 0 (Deployment inflate)" in err
    assert "spec.template.spec.containers[0].resources.requests.memory" in err


def test_missing_nodeclass_exits_2(run: Run, tmp_path: Path) -> None:
    shutil.copy(INFLATE / "nodepool.yaml", tmp_path)
    code, _, err = run("plan", "-f", str(tmp_path))
    assert code == 2
    assert "EC2NodeClass default" in err


def test_unknown_region_exits_2(run: Run) -> None:
    code, _, err = run("plan", "-f", str(INFLATE), "--region", "mars-north-1")
    assert code == 2
    assert "mars-north-1" in err


def test_bad_catalog_file_exits_2(run: Run, tmp_path: Path) -> None:
    catalog_file = tmp_path / "catalog.json"
    catalog_file.write_text('{"instanceTypes": [{"name": "x"}]}')
    code, _, err = run("plan", "-f", str(INFLATE), "--instance-types", str(catalog_file))
    assert code == 2
    assert str(catalog_file) in err


def test_legacy_nodepool_warns_on_stderr_and_plans(run: Run, tmp_path: Path) -> None:
    shutil.copy(INFLATE / "ec2nodeclass.yaml", tmp_path)
    shutil.copy(INFLATE / "deployment.yaml", tmp_path)
    write(
        tmp_path / "nodepool.yaml",
        UNRESTRICTED_NODEPOOL.replace("karpenter.sh/v1", "karpenter.sh/v1beta1").replace(
            "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", "{name: default}"
        ),
    )
    code, out, err = run("plan", "-o", "json", "-f", str(tmp_path))
    assert code == 0, err
    assert "warning" in err
    assert json.loads(out)["summary"]["scheduled"] == 5


def test_json_output_is_the_document_indented_by_two_spaces(run: Run, tmp_path: Path) -> None:
    # Many instance types per claim, labels, taints, an unschedulable pod and a price: every kind of value.
    shutil.copy(INFLATE / "ec2nodeclass.yaml", tmp_path)
    shutil.copy(INFLATE / "deployment.yaml", tmp_path)
    write(
        tmp_path / "nodepool.yaml",
        UNRESTRICTED_NODEPOOL
        + "      taints: [{key: team, value: blue, effect: NoSchedule}]\n"
        + "    metadata: {labels: {team: a}}\n",
    )
    write(
        tmp_path / "stray.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: stray, namespace: default}
        spec:
          tolerations: [{key: team, operator: Exists}]
          containers: [{name: c, image: x, resources: {requests: {cpu: "500"}}}]
        """,
    )
    code, out, err = run("plan", "-o", "json", "-f", str(tmp_path))
    assert code == 0, err
    document = json.loads(out)
    assert document["nodeClaims"] and document["unschedulable"]
    assert len(document["nodeClaims"][0]["instanceTypes"]) > 1
    assert out == json.dumps(document, indent=2) + "\n"
