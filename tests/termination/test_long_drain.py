"""Drains of any length: a drain a PodDisruptionBudget holds for two weeks runs on virtual time through a
chain of executions, each far inside Step Functions' 25,000-event history and the 24 h timeout."""

from __future__ import annotations

import json
import time
from itertools import groupby
from typing import Any

from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.termination import Harness

DAY = 86400
STATE_MACHINE_TIMEOUT = DAY
HISTORY_LIMIT = 25_000


def _blocked_node(harness: Harness) -> tuple[dict[str, Any], str]:
    """A node whose only pod a PodDisruptionBudget never lets go."""
    instance = harness.launch_instance()
    harness.world.state.nodeclaims.create(
        NodeClaimRecord(
            id="default-abcd1234",
            nodepool="default",
            status=str(ClaimStatus.INITIALIZED),
            created_at=harness.clock(),
            instance_id=instance["InstanceId"],
        )
    )
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pdb("db", {"app": "db"}, min_available=1)
    return instance, node


def _history_size(harness: Harness, execution_arn: str) -> int:
    events, token = 0, None
    while True:
        page = harness.sfn.get_execution_history(
            executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
        )
        events += len(page["events"])
        token = page.get("nextToken")
        if not token:
            return events


def _one_execution_at_a_time(harness: Harness) -> list[str]:
    """Every continue step finds only its own execution running (checked as it starts the next)."""
    seen: list[str] = []

    def look(step: str, payload: dict[str, Any]) -> None:
        if step == "continue":
            running = [e["name"] for e in harness.executions() if e["status"] == "RUNNING"]
            seen.append(",".join(running))
            assert running == [payload["context"]["execution"]], running

    harness.before_step.append(look)
    return seen


def _check_chain(harness: Harness, executions: list[dict[str, Any]], instance_id: str) -> list[str]:
    """The chain's executions each stayed small and young, ran one after another; their names."""
    assert len(executions) >= 3
    for description in executions:
        assert description["name"].startswith(f"{instance_id}-")
        assert len(description["name"]) <= 80
        assert _history_size(harness, description["executionArn"]) < HISTORY_LIMIT / 5
        age = description["stopDate"].timestamp() - description["startDate"].timestamp()
        assert 0 <= age < STATE_MACHINE_TIMEOUT
    continued = executions[:-1]
    for description in continued:
        assert description["status"] == "SUCCEEDED"
        assert json.loads(description["output"])["continuation"]["execution"]
    # the drain passes of one execution all come before the next execution's: never two at once
    order = [payload["context"]["execution"] for name, payload, _ in harness.calls if name == "drain"]
    blocks = [name for name, _ in groupby(order)]
    assert len(blocks) == len(set(blocks)) == len(executions)
    assert blocks == [d["name"] for d in executions]
    return [d["name"] for d in executions]


def test_a_budget_blocked_drain_two_weeks_long_continues_across_executions_and_ends_at_the_deadline(
    harness: Harness,
) -> None:
    instance, node = _blocked_node(harness)
    _one_execution_at_a_time(harness)
    request = harness.request(
        instance,
        node,
        seconds_to_deadline=14 * DAY,
        reason="ScheduledChange",
        drainIntervalSeconds=5,
        maxDrainIntervalSeconds=1200,
        passesPerExecution=100,
    )
    started = time.monotonic()
    first = harness.start(request, name=f"{instance['InstanceId']}-ScheduledChange")
    executions = harness.wait_for_chain(first, timeout=900)
    wall = time.monotonic() - started

    names = _check_chain(harness, executions, instance["InstanceId"])
    assert names[1] == f"{instance['InstanceId']}-ScheduledChange-c1"
    drains = harness.outputs("drain")
    assert len(drains) > 1000  # two weeks of passes at most 20 minutes apart
    assert executions[-1]["status"] == "SUCCEEDED"
    # at the deadline the pod the budget protected is deleted, the instance terminated, the Node deleted
    assert drains[-1]["drain"]["deleted"] == ["default/db-0"]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    claim = harness.world.state.nodeclaims.get("default-abcd1234")
    assert claim is not None and claim.status == ClaimStatus.TERMINATED
    assert harness.metrics.total("WorkflowContinuations") == len(executions) - 1
    print(f"{len(drains)} drain passes in {len(executions)} executions: {wall:.1f} s wall time")


def test_a_graceful_disruption_days_long_is_called_off_at_its_deadline_in_its_last_execution(
    harness: Harness,
) -> None:
    instance, node = _blocked_node(harness)
    _one_execution_at_a_time(harness)
    request = harness.request(
        instance,
        node,
        seconds_to_deadline=3 * DAY,
        reason="Underutilized",
        onDeadline="abandon",
        drainIntervalSeconds=5,
        maxDrainIntervalSeconds=3600,
        passesPerExecution=20,
    )
    first = harness.start(request, name=f"{instance['InstanceId']}-Underutilized-1")
    executions = harness.wait_for_chain(first, timeout=600)

    _check_chain(harness, executions, instance["InstanceId"])
    output = json.loads(executions[-1]["output"])
    assert output["drain"]["abandoned"] is True
    # the budget held: the pod stays, the node is back in service, the instance runs
    assert harness.pods_on(node) == ["db-0"]
    spec = (harness.world.kube.get_node(node) or {}).get("spec") or {}
    assert not spec.get("unschedulable")
    assert harness.instance_state(instance["InstanceId"]) == "running"
    assert harness.metrics.total("DisruptionsCalledOff", Reason="Underutilized") == 1
