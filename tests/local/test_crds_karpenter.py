"""The Karpenter CRDs of docs/crds in the emulator: kubectl shows NodePools, NodeClaims and EC2NodeClasses
with Karpenter's columns, and what the API server stores still reads as the same NodePool."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.apiserver.resources import CUSTOM_RESOURCE_DEFINITIONS, ResourceType
from fleetwright.model.errors import DocumentRef
from fleetwright.model.karpenter import parse_karpenter_document
from tests.support.local import KUBECTL, REPO, Kubectl

DOCUMENTS = [
    REPO / "examples" / "inflate" / "nodepool.yaml",
    REPO / "tests" / "model" / "fixtures" / "nodepools-v1.yaml",
    REPO / "tests" / "model" / "fixtures" / "ec2nodeclasses-v1.yaml",
]


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    with ApiServer(port=0) as server:
        install_karpenter_crds(server.store)
        yield server


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()[1:]]


def served(apiserver: ApiServer, plural: str, group: str) -> ResourceType:
    rt = apiserver.store.registry.lookup(group, "v1", plural)
    assert rt is not None
    return rt


def test_kubectl_lists_the_karpenter_kinds(kubectl: Kubectl) -> None:
    resources = {r[0]: r for r in rows(kubectl("api-resources", "--api-group=karpenter.sh"))}
    aws = {r[0]: r for r in rows(kubectl("api-resources", "--api-group=karpenter.k8s.aws"))}

    assert resources["nodepools"][1:] == ["karpenter.sh/v1", "false", "NodePool"]
    assert resources["nodeclaims"][1:] == ["karpenter.sh/v1", "false", "NodeClaim"]
    assert aws["ec2nodeclasses"][1:] == ["ec2nc,ec2ncs", "karpenter.k8s.aws/v1", "false", "EC2NodeClass"]


def test_applied_nodepool_shows_karpenters_columns(apiserver: ApiServer, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(DOCUMENTS[0]))
    nodepools = served(apiserver, "nodepools", "karpenter.sh")
    apiserver.store.mutate(
        nodepools,
        None,
        "default",
        lambda o: {
            **o,
            "status": {
                "resources": {"cpu": "4", "memory": "16Gi", "nodes": "2"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Ready",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        },
        "status",
    )

    table = kubectl("get", "nodepools")
    wide = kubectl("get", "nodepools", "-o", "wide")

    assert table.splitlines()[0].split() == ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    assert rows(table)[0][:4] == ["default", "default", "2", "True"]
    assert wide.splitlines()[0].split()[-3:] == ["WEIGHT", "CPU", "MEMORY"]
    assert rows(wide)[0][-2:] == ["4", "16Gi"]
    assert "nodepool.karpenter.sh/default" in {r[0] for r in rows(kubectl("get", "karpenter"))}


def test_nodeclaim_columns_read_its_labels(apiserver: ApiServer, kubectl: Kubectl) -> None:
    nodeclaims = served(apiserver, "nodeclaims", "karpenter.sh")
    apiserver.store.create(
        nodeclaims,
        {
            "metadata": {
                "name": "default-x7k2p",
                "labels": {
                    "node.kubernetes.io/instance-type": "m5.large",
                    "karpenter.sh/capacity-type": "spot",
                    "topology.kubernetes.io/zone": "us-east-1a",
                    "karpenter.sh/nodepool": "default",
                },
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            },
        },
    )

    table = kubectl("get", "nodeclaims")

    assert table.splitlines()[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    assert rows(table)[0][:4] == ["default-x7k2p", "m5.large", "spot", "us-east-1a"]
    wide = rows(kubectl("get", "nodeclaims", "-o", "wide"))[0]
    assert "default" in wide


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_stored_objects_read_as_the_same_karpenter_objects(apiserver: ApiServer, path: Path) -> None:
    """The schema keeps every field Fleetwright reads: what the server stores (pruned and defaulted)
    parses to the same model as the file."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, f"{path} holds no document"
    for index, doc in enumerate(docs):
        plural = "nodepools" if doc["kind"] == "NodePool" else "ec2nodeclasses"
        group = doc["apiVersion"].split("/")[0]
        rt = served(apiserver, plural, group)
        name = f"{doc['metadata']['name']}-{path.stem}-{index}".lower()
        renamed: dict[str, Any] = {**doc, "metadata": {**doc["metadata"], "name": name}}
        stored = apiserver.store.create(rt, renamed)

        ref = DocumentRef(str(path), index)
        expected = parse_karpenter_document(renamed, ref)
        actual = parse_karpenter_document(stored, ref)

        assert [m.spec for m in actual.nodepools] == [m.spec for m in expected.nodepools]
        assert [m.spec for m in actual.nodeclasses] == [m.spec for m in expected.nodeclasses]


def test_installing_twice_keeps_the_objects(apiserver: ApiServer) -> None:
    before = apiserver.store.get(CUSTOM_RESOURCE_DEFINITIONS, None, "nodepools.karpenter.sh")

    install_karpenter_crds(apiserver.store)

    after = apiserver.store.get(CUSTOM_RESOURCE_DEFINITIONS, None, "nodepools.karpenter.sh")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert served(apiserver, "nodepools", "karpenter.sh").printer_columns


def test_cli_installs_the_crds(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwright.cli",
            "local",
            "apiserver",
            "--port",
            "0",
            "--karpenter-crds",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        installed = process.stdout.readline()
        assert installed.strip() == (
            "installed ec2nodeclasses.karpenter.k8s.aws, nodeclaims.karpenter.sh, nodepools.karpenter.sh"
        )
        process.stdout.readline()  # listening on ...
        process.stdout.readline()  # kubeconfig written to ...
        listed = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "nodepools,nodeclaims,ec2nodeclasses"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert "No resources found" in listed.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
