"""A Fleetwright node's life on the sandbox, whose kubelet sets only what a real one does: registration
labels it as Karpenter would (so a pod selecting an instance-type label fits it without another launch),
and ``kubectl delete node`` drains it, terminates its instance and only then lets the Node go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.claims.registration import (
    INITIALIZED_LABEL,
    NODECLASS_LABEL,
    REGISTERED_LABEL,
    TERMINATION_FINALIZER,
)
from fleetwright.kube.resources import NODES, PODS
from fleetwright.local.inprocess.disruption import run_disruption
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.sandbox import FAKE_CREDENTIALS, SYSTEM_NODE, Sandbox, SandboxOptions, sandbox
from fleetwright.model import labels as wk
from tests.support.waiting import wait_for

# Left out of `make quick` (tests/conftest.py); waits for other threads on the real clock.
pytestmark = [pytest.mark.slow, pytest.mark.real_time]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    options = SandboxOptions(
        manifests=(os.path.join(ROOT, "examples", "inflate"),),
        node_start=NodeStart.fast(0.1),
        provisioner_window=2.0,
    )
    with sandbox(options) as running:
        files = [arg for path in running.nodepool_files() for arg in ("-f", str(path))]
        applied = running.kubectl("apply", *files)
        assert applied.returncode == 0, applied.stderr
        running.start_provisioner()
        yield running


def _ours(box: Sandbox) -> list[dict[str, Any]]:
    return [n for n in box.client.list(NODES).items if n["metadata"]["name"] != SYSTEM_NODE]


def _running(box: Sandbox, prefix: str) -> list[dict[str, Any]]:
    return [
        p
        for p in box.client.list(PODS, "default").items
        if p["metadata"]["name"].startswith(prefix) and p.get("status", {}).get("phase") == "Running"
    ]


def _live_instances(box: Sandbox) -> list[str]:
    return [i["InstanceId"] for i in box.instances() if i["State"]["Name"] in ("pending", "running")]


def test_registered_nodes_carry_karpenters_labels_and_deletion_retires_them(box: Sandbox) -> None:
    box.scale("inflate", 5)
    wait_for(lambda: len(_running(box, "inflate")) == 5, timeout=60)
    node = wait_for(
        lambda: next((n for n in _ours(box) if INITIALIZED_LABEL in n["metadata"]["labels"]), None),
        timeout=30,
    )
    labels = node["metadata"]["labels"]
    instance_type = labels[wk.INSTANCE_TYPE]
    family = instance_type.split(".")[0]
    assert labels[wk.NODEPOOL] == "default"
    assert labels[NODECLASS_LABEL] == "default"
    assert labels[wk.CAPACITY_TYPE] == "on-demand"
    assert labels[wk.INSTANCE_FAMILY] == family
    assert labels[wk.INSTANCE_CPU] and labels[wk.INSTANCE_MEMORY]
    assert labels[REGISTERED_LABEL] == "true" and labels[INITIALIZED_LABEL] == "true"
    assert node["metadata"]["finalizers"] == [TERMINATION_FINALIZER]

    # A pod that selects the instance family fits the node there is: no second launch.
    instances = _live_instances(box)
    box.client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "picky", "namespace": "default"},
            "spec": {
                "nodeSelector": {wk.INSTANCE_FAMILY: family},
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "c",
                        "image": "pause",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }
                ],
            },
        },
        "default",
    )
    picky = wait_for(lambda: _running(box, "picky"), timeout=30)
    assert picky[0]["spec"]["nodeName"] == node["metadata"]["name"]
    assert _live_instances(box) == instances

    # kubectl delete node: Terminating until the workflow has drained it and terminated its instance.
    name = node["metadata"]["name"]
    instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
    box.client.delete(NODES, name)
    held = box.kube.get_node(name)
    assert held is not None and held["metadata"].get("deletionTimestamp")
    run = run_disruption(
        kube=box.kube,
        cloud=box.cloud,
        state=box.state,
        config=box.provisioner.config,
        sleep=lambda _s: None,
        collect_garbage=False,
    )

    assert run.report.retired is not None and name in run.report.retired.started
    assert [e.status for e in run.executions] == ["SUCCEEDED"]
    assert box.kube.get_node(name) is None
    assert instance_id not in _live_instances(box)
