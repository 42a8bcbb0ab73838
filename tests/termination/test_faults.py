"""The workflow under faults, on virtual time: the Kubernetes API away for minutes (the emulator resets
every connection), the API away for the whole failure path, Lambda throttling the step function."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwright.kube.resources import EVENTS
from tests.support.termination import Harness

OUTAGES = [60, 100, 300]


def _disrupted(harness: Harness, node: str) -> bool:
    spec = (harness.world.kube.get_node(node) or {}).get("spec") or {}
    taints = [t.get("key") for t in spec.get("taints") or []]
    return bool(spec.get("unschedulable")) or "karpenter.sh/disrupted" in taints


def _outage_before(harness: Harness, step: str, seconds: float, *, nth: int = 1) -> list[float]:
    """The API goes away for ``seconds`` of virtual time just before the ``nth`` call of ``step``; the
    list receives the virtual time it went down."""
    seen: list[int] = []
    began: list[float] = []

    def go_down(name: str, payload: dict[str, Any]) -> None:
        if name == step:
            seen.append(1)
            if len(seen) == nth:
                began.append(harness.clock())
                harness.apiserver.faults.outage(seconds, clock=harness.clock)

    harness.before_step.append(go_down)
    return began


def _node_with_pods(harness: Harness) -> tuple[dict[str, Any], str]:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    harness.pod("web-1", node)
    return instance, node


def _terminated(harness: Harness, instance: dict[str, Any], node: str) -> None:
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None  # no node left behind, cordoned or not
    assert harness.pods_on(node) == []


@pytest.mark.parametrize("seconds", OUTAGES)
def test_an_api_outage_during_cordon_is_ridden_out_by_retries(harness: Harness, seconds: int) -> None:
    instance, node = _node_with_pods(harness)
    began = _outage_before(harness, "cordon", seconds)

    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    _terminated(harness, instance, node)
    cordons = [out for name, _, out in harness.calls if name == "cordon"]
    assert [c["errorType"] for c in cordons[:-1]] == ["TransientError"] * (len(cordons) - 1)
    assert len(cordons) > 1 and "request" in cordons[-1]
    assert harness.clock() - began[0] >= seconds  # the retries waited the outage out
    assert harness.apiserver.faults.reset_connections > 0


@pytest.mark.parametrize("seconds", OUTAGES)
def test_an_api_outage_during_the_drain_is_a_pass_that_did_not_finish(harness: Harness, seconds: int) -> None:
    instance, node = _node_with_pods(harness)
    _outage_before(harness, "drain", seconds)

    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    _terminated(harness, instance, node)
    drains = [out["drain"] for out in harness.outputs("drain")]
    refused = [d for d in drains if d.get("apiError")]
    assert refused and all(not d["done"] for d in refused)
    assert drains[-1]["apiErrors"] == len(refused)
    assert sorted(p for d in drains for p in d["evicted"]) == ["default/web-0", "default/web-1"]
    assert harness.metrics.total("DrainApiErrors") == len(refused)
    assert "record_failure" not in harness.step_names()


def test_a_graceful_disruption_whose_deadline_passes_during_an_outage_is_called_off_after_it(
    harness: Harness,
) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pdb("db", {"app": "db"}, min_available=1)
    _outage_before(harness, "drain", 300, nth=2)

    result = harness.run(
        harness.request(instance, node, seconds_to_deadline=120, reason="Underutilized", onDeadline="abandon")
    )

    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["drain"]["abandoned"] is True
    assert not _disrupted(harness, node)
    assert harness.pods_on(node) == ["db-0"]
    assert harness.instance_state(instance["InstanceId"]) == "running"


def _refuse_the_drain(harness: Harness) -> None:
    """The drain's listing of the node's pods is refused for good (403: retrying does not heal it)."""
    harness.apiserver.faults.inject(403, verb="GET", resource="pods", times=1)


def test_the_failure_path_waits_for_the_api_to_record_the_failure_and_give_the_node_back(
    harness: Harness,
) -> None:
    instance, node = _node_with_pods(harness)
    _refuse_the_drain(harness)
    _outage_before(harness, "record_failure", 600)

    # A scheduled change: its node is given back on failure (a spot-interrupted one stays cordoned).
    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600, reason="ScheduledChange"))

    assert result["status"] == "FAILED"
    assert result["error"] == "KubeApiError"  # the original failure, not the failure path's
    attempts = [out["failure"] for out in harness.outputs("record_failure")]
    assert attempts[0]["pending"] is True and attempts[0]["problems"]
    assert attempts[-1]["eventRecorded"] is True and attempts[-1]["uncordoned"] is True
    assert not attempts[-1]["pending"]
    assert not _disrupted(harness, node)
    assert harness.instance_state(instance["InstanceId"]) == "running"
    events = harness.world.client.list(EVENTS, "default").items
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "FailedTermination"] == [node]
    assert harness.metrics.total("TerminationFailures") == 1  # one failure, however many attempts


def test_a_failure_path_the_api_never_answers_still_ends_recorded_in_the_execution(harness: Harness) -> None:
    instance, node = _node_with_pods(harness)
    _refuse_the_drain(harness)

    def api_gone(step: str, payload: dict[str, Any]) -> None:
        if step == "record_failure":
            harness.apiserver.faults.down()

    harness.before_step.append(api_gone)
    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))
    harness.apiserver.faults.up()

    assert result["status"] == "FAILED"
    assert result["error"] == "KubeApiError" and "403" in result["cause"]  # TerminationFailed, recorded
    history = harness.sfn.get_execution_history(executionArn=result["executionArn"], maxResults=1000)
    assert "TerminationFailedUnrecorded" not in json.dumps(history["events"], default=str)
    last = harness.outputs("record_failure")[-1]["failure"]
    assert last["pending"] is False and last["attempts"] == 30
    assert any("read the Node" in p for p in last["problems"])
    # Still cordoned: the disruption pass's sweep gives back cordoned nodes no workflow is working on.
    assert _disrupted(harness, node)
    assert harness.instance_state(instance["InstanceId"]) == "running"


def test_lambda_throttling_is_retried(harness: Harness) -> None:
    instance, node = _node_with_pods(harness)
    harness.throttled = 3

    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    _terminated(harness, instance, node)
    history = harness.sfn.get_execution_history(executionArn=result["executionArn"], maxResults=1000)
    throttled = [
        e
        for e in history["events"]
        if (e.get("lambdaFunctionFailedEventDetails") or {}).get("error") == "Lambda.TooManyRequestsException"
    ]
    assert len(throttled) == 3
    assert harness.step_names()[0] == "cordon"
