"""The sweep against the shipped termination workflow (moto's Step Functions, the emulator): nodes left
cordoned and tainted by a workflow that failed, was aborted or never started are given back after the
grace period and not before; a running workflow's node is left alone; an interruption that still applies
is re-driven; and a NodePool's budget is no longer held by such nodes."""

from __future__ import annotations

import threading
from typing import Any

from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption import metrics as m
from fleetwright.disruption.sweep import DisruptionSweep, Sightings
from fleetwright.kube.resources import EVENTS, NODES
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.state.interruptions import STARTED, InterruptionRecord, InterruptionRecords
from fleetwright.workflow.starter import StepFunctionsStarter
from tests.support.aws import CLUSTER, node_class
from tests.support.disruption import Rig, nodepool
from tests.support.termination import Harness

GRACE = 300.0


def _sweep(harness: Harness, metrics: RecordingMetrics) -> DisruptionSweep:
    """A sweep as one disruption invocation builds it (state in the table, nothing in memory)."""
    w = harness.world
    return DisruptionSweep(
        w.kube,
        w.cloud,
        StepFunctionsStarter(harness.sfn, harness.machine_arn),
        InterruptionRecords(w.state.table, w.state.cluster),
        Sightings(w.state.table, w.state.cluster),
        grace_seconds=GRACE,
        metrics=metrics,
        clock=w.wall,
    )


def _pool_node(harness: Harness, name: str = "node-a") -> tuple[str, str]:
    """An instance and its Node, labelled with its NodePool as the provisioner leaves it."""
    instance = harness.launch_instance()
    node = harness.node_for(instance, name)
    harness.world.client.patch(NODES, node, {"metadata": {"labels": {wk.NODEPOOL: "default"}}})
    harness.world.kube.clock = harness.world.wall  # marks are stamped on the harness's clock
    return str(instance["InstanceId"]), node


def _cordoned(harness: Harness, node: str) -> bool:
    obj = harness.world.kube.get_node(node)
    assert obj is not None
    return bool((obj.get("spec") or {}).get("unschedulable"))


def _warnings(harness: Harness, node: str, reason: str) -> list[dict[str, Any]]:
    events = harness.world.client.list(EVENTS, "default").items
    return [e for e in events if e["involvedObject"].get("name") == node and e["reason"] == reason]


def _fails_without_giving_back(harness: Harness) -> None:
    """The drain fails, and so does the failure path that would give the node back."""

    def broken(step: str, _: dict[str, Any]) -> None:
        if step in ("drain", "record_failure"):
            raise RuntimeError("the API server said no")

    harness.before_step.append(broken)


def test_a_node_left_cordoned_by_a_failed_workflow_is_given_back_after_the_grace(harness: Harness) -> None:
    instance_id, node = _pool_node(harness)
    harness.pod("web-0", node)
    _fails_without_giving_back(harness)
    result = harness.run(harness.request({"InstanceId": instance_id}, node), name=f"{instance_id}-Drifted-1")
    assert result["status"] == "FAILED" and _cordoned(harness, node)
    harness.before_step.clear()
    metrics = RecordingMetrics()

    harness.world.wall.advance(GRACE - 30)
    early = _sweep(harness, metrics).sweep()
    assert _cordoned(harness, node) and node in early.waiting

    harness.world.wall.advance(60)
    report = _sweep(harness, metrics).sweep()

    assert report.uncordoned == [node]
    assert not _cordoned(harness, node)
    obj = harness.world.kube.get_node(node)
    assert obj is not None and not [
        t for t in obj["spec"].get("taints") or [] if t["key"] == wk.DISRUPTED_TAINT_KEY
    ]
    assert _warnings(harness, node, "DisruptionAbandoned")[0]["type"] == "Warning"
    assert metrics.total(m.NODES_UNCORDONED_BY_SWEEP) == 1
    assert harness.instance_state(instance_id) == "running"
    assert harness.pods_on(node) == ["web-0"]


def test_a_node_cordoned_by_hand_keeps_its_cordon_when_the_sweep_gives_it_back(harness: Harness) -> None:
    instance_id, node = _pool_node(harness)
    harness.world.client.patch(NODES, node, {"spec": {"unschedulable": True}})  # kubectl cordon, first
    harness.pod("web-0", node)
    _fails_without_giving_back(harness)
    result = harness.run(harness.request({"InstanceId": instance_id}, node), name=f"{instance_id}-Drifted-1")
    assert result["status"] == "FAILED"
    harness.before_step.clear()
    metrics = RecordingMetrics()

    harness.world.wall.advance(GRACE + 30)
    report = _sweep(harness, metrics).sweep()

    assert report.uncordoned == [node]
    assert _cordoned(harness, node)  # the person's cordon stays...
    obj = harness.world.kube.get_node(node)
    assert obj is not None and not [  # ...and Fleetwright's taint is gone: the sweep will not see it again
        t for t in obj["spec"].get("taints") or [] if t["key"] == wk.DISRUPTED_TAINT_KEY
    ]
    [event] = _warnings(harness, node, "DisruptionAbandoned")
    assert "its own cordon stays" in event["message"]
    assert _sweep(harness, metrics).sweep().uncordoned == []


def test_a_node_marked_by_a_workflow_that_never_started_is_given_back(harness: Harness) -> None:
    _, node = _pool_node(harness)
    # Cordoned and tainted, as by a workflow's first step, but without the mark's time (an older version).
    harness.world.client.patch(
        NODES,
        node,
        {
            "spec": {
                "unschedulable": True,
                "taints": [{"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}],
            }
        },
    )
    metrics = RecordingMetrics()

    first = _sweep(harness, metrics).sweep()  # the first sighting starts the clock, in the state table
    harness.world.wall.advance(GRACE - 30)
    second = _sweep(harness, metrics).sweep()
    assert node in first.waiting and node in second.waiting and _cordoned(harness, node)

    harness.world.wall.advance(60)
    third = _sweep(harness, metrics).sweep()

    assert third.uncordoned == [node] and not _cordoned(harness, node)


def test_a_node_being_deleted_is_never_given_back(harness: Harness) -> None:
    _, node = _pool_node(harness)
    harness.world.client.patch(
        NODES,
        node,
        {
            "metadata": {"finalizers": ["karpenter.sh/termination"]},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}],
            },
        },
    )
    harness.world.client.delete(NODES, node)  # kubectl delete node: the deletion retirer's from now on
    metrics = RecordingMetrics()

    _sweep(harness, metrics).sweep()
    harness.world.wall.advance(GRACE + 60)
    report = _sweep(harness, metrics).sweep()

    assert report.uncordoned == [] and node in report.waiting
    assert _cordoned(harness, node)


def test_a_running_workflows_node_is_left_alone(harness: Harness) -> None:
    instance_id, node = _pool_node(harness)
    harness.pod("web-0", node)
    cordoned = threading.Event()
    release = threading.Event()

    def hold(step: str, _: dict[str, Any]) -> None:
        if step == "drain":
            cordoned.set()
            release.wait(30)

    harness.before_step.append(hold)
    execution = harness.start(
        harness.request({"InstanceId": instance_id}, node), name=f"{instance_id}-Drifted-7"
    )
    assert cordoned.wait(30)
    metrics = RecordingMetrics()
    harness.world.wall.advance(10 * GRACE)

    report = _sweep(harness, metrics).sweep()

    release.set()
    assert report.uncordoned == [] and report.redriven == {} and node in report.waiting
    assert metrics.total(m.NODES_UNCORDONED_BY_SWEEP) == 0
    harness.wait(execution)


def test_an_interruption_that_still_applies_is_driven_again(harness: Harness) -> None:
    instance_id, node = _pool_node(harness)
    harness.pod("web-0", node)
    request = harness.request(
        {"InstanceId": instance_id}, node, reason="ScheduledChange", seconds_to_deadline=3000
    )
    records = InterruptionRecords(harness.world.state.table, harness.world.state.cluster)
    first = f"{instance_id}-ScheduledChange-1"
    records.create(
        InterruptionRecord(
            instance_id=instance_id,
            kind="ScheduledChange",
            status=STARTED,
            claimed_at=harness.clock(),
            execution=first,
            request=request,
            deadline=harness.clock() + 3000,
            node=node,
        )
    )
    _fails_without_giving_back(harness)
    assert harness.run(request, name=first)["status"] == "FAILED"
    harness.before_step.clear()
    harness.world.wall.advance(GRACE + 1)
    metrics = RecordingMetrics()

    report = _sweep(harness, metrics).sweep()

    second = f"{instance_id}-ScheduledChange-2"
    assert report.redriven == {node: second} and report.uncordoned == []
    result = harness.wait(StepFunctionsStarter(harness.sfn, harness.machine_arn).execution_arn(second))
    assert result["status"] == "SUCCEEDED", result
    assert harness.instance_state(instance_id) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    record = records.get(instance_id, "ScheduledChange")
    assert record is not None and record.attempt == 2 and record.status == STARTED
    assert metrics.total(m.INTERRUPTIONS_REDRIVEN, Kind="ScheduledChange") == 1


def test_nodes_left_marked_no_longer_hold_the_budget(harness: Harness) -> None:
    w = harness.world
    w.kube.clock = w.wall
    config = ProvisionerConfig(
        cluster_name=CLUSTER,
        nodepools=[nodepool(consolidate_after="0s", policy="WhenEmpty", budgets=[{"nodes": "1"}])],
        nodeclasses=[node_class()],
    )
    workflows = StepFunctionsStarter(harness.sfn, harness.machine_arn)
    rig = Rig(w, config, workflows=workflows, strict=harness.strict)  # type: ignore[arg-type]
    nodes = [rig.node("m5.large") for _ in range(3)]
    instances = [rig.instance_id(n) for n in nodes]
    for node in nodes:  # three workflows cordoned their nodes and then died
        w.kube.mark_disrupted(node)
    controller = rig.controller()

    controller.run_once()
    assert harness.sfn.list_executions(stateMachineArn=harness.machine_arn)["executions"] == []

    for _ in range(8):
        w.wall.advance(GRACE + 1)
        controller.run_once()
        for execution in harness.sfn.list_executions(stateMachineArn=harness.machine_arn)["executions"]:
            harness.wait(execution["executionArn"])
        if all(w.kube.get_node(n) is None for n in nodes):
            break

    assert [w.kube.get_node(n) for n in nodes] == [None, None, None]
    assert all(harness.instance_state(i) in ("shutting-down", "terminated") for i in instances)
    assert rig.metrics.total(m.NODES_UNCORDONED_BY_SWEEP) == 3
