"""Short replays whose figures can be counted by hand: launches, node start, pending time, billing,
emptiness after consolidateAfter, disruption budgets, evictions, reproducibility."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleetwright.local.apiserver.resources import PODS as STORED_PODS
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.simulate.cloud import node_name
from fleetwright.local.simulate.engine import Outcome
from fleetwright.local.simulate.report import figures, render_table
from fleetwright.local.simulate.runner import MOTO, replay
from fleetwright.local.simulate.trace import TracePod
from fleetwright.local.simulate.world import START_EPOCH, WorldSpec
from tests.support.simulate import nodepool, pods, trace

M5_LARGE = 0.096  # on-demand $/h in the built-in us-east-1 catalog

SpecFor = Callable[..., WorldSpec]


def ends(outcome: Outcome) -> list[float]:
    return sorted((i.ended_at or 0) - START_EPOCH for i in outcome.instances)


def test_three_one_cpu_pods_on_m5_large_cost_what_a_hand_count_gives(spec_for: SpecFor) -> None:
    # Pods at t=5 s: the batch closes after 1 s idle, one pass launches 3 m5.large (1930m allocatable:
    # one 1-CPU pod each) at t=6; with the default node start they run at 16, register at 36, are Ready
    # at 51, and the pods start then. The pods
    # end at 605; the nodes are empty from then, consolidateAfter is 5 min, so the first disruption
    # pass after 905 (they run every 60 s: 960) removes one node, the next passes the others (the
    # default budget, 10% of 3 nodes, rounds up to one node at a time).
    outcome = replay(spec_for(nodepool()), trace(pods(3, 5.0, 605.0), 3600.0))
    assert [i.launched.instance_type for i in outcome.instances] == ["m5.large"] * 3
    assert [i.launched_at - START_EPOCH for i in outcome.instances] == [6.0] * 3
    assert ends(outcome) == [960.0, 1020.0, 1080.0]
    result = figures("default", outcome, START_EPOCH)
    running = (960 - 16) + (1020 - 16) + (1080 - 16)
    assert result.instance_dollars == pytest.approx(M5_LARGE * running / 3600)
    assert result.node_hours == pytest.approx(running / 3600)
    assert result.peak_nodes == 3
    assert result.launches == 3
    assert result.unused == 0
    assert result.pending == {"p50": 46.0, "p95": 46.0, "p99": 46.0, "max": 46.0}
    assert result.disruptions == {"Empty": 3}
    assert result.evicted == 0
    assert outcome.errors == []


def test_pending_time_includes_every_phase_of_the_node_start(spec_for: SpecFor) -> None:
    start = NodeStart(boot_seconds=40.0, register_seconds=5.0, ready_seconds=15.0, startup_taint_seconds=10.0)
    outcome = replay(spec_for(nodepool(), start=start), trace(pods(1, 5.0, 300.0), 600.0))
    # Launched at 6, running at 46, registered at 51, Ready at 66; no startup taint on this NodePool: the
    # pod starts at 66.
    assert figures("default", outcome, START_EPOCH).pending["max"] == 66.0 - 5.0


def test_a_budget_of_all_nodes_removes_every_empty_node_in_one_pass(spec_for: SpecFor) -> None:
    outcome = replay(spec_for(nodepool(budget="100%")), trace(pods(3, 5.0, 605.0), 3600.0))
    assert ends(outcome) == [960.0, 960.0, 960.0]


def test_empty_nodes_wait_for_consolidate_after(spec_for: SpecFor) -> None:
    outcome = replay(spec_for(nodepool(consolidate_after="20m")), trace(pods(1, 5.0, 605.0), 3600.0))
    # Empty from 605; eligible from 605 + 1200 = 1805; the next pass runs at 1860.
    assert ends(outcome) == [1860.0]


def test_pods_on_a_consolidated_node_are_evicted_and_run_again(spec_for: SpecFor) -> None:
    # a (700m) and c (1200m) share one m5.large from t=5; b (700m) arrives at 100 and needs a second
    # one. When c ends at 300 each node holds 700m: consolidation deletes one node, and its pod,
    # evicted, runs again on the other.
    items = [
        TracePod("a", 5.0, None, "700m", "1Gi"),
        TracePod("c", 5.0, 300.0, "1200m", "1Gi"),
        TracePod("b", 100.0, None, "700m", "1Gi"),
    ]
    outcome = replay(spec_for(nodepool(consolidate_after="1m")), trace(items, 1800.0))
    result = figures("default", outcome, START_EPOCH)
    assert result.launches == 2
    assert result.evicted == 1
    assert sum(1 for i in outcome.instances if i.ended_at is None) == 1
    moved = next(life for life in outcome.lives.values() if life.evictions)
    assert len(moved.created) == 2
    assert all(started is not None for life in outcome.lives.values() for started in life.started)


def test_a_replay_is_the_same_for_the_same_seed(spec_for: SpecFor) -> None:
    items = [*pods(4, 5.0, 400.0, cpu="700m"), *pods(3, 200.0, 900.0, cpu="1500m")]
    items = [p.__class__(f"{p.name}-{p.start:g}", p.start, p.end, p.cpu, p.memory) for p in items]
    spec = spec_for(nodepool(types=("m5.large", "m5.xlarge", "c5.large"), consolidate_after="1m"))
    first = figures("default", replay(spec, trace(items, 1800.0), seed=3), START_EPOCH)
    second = figures("default", replay(spec, trace(items, 1800.0), seed=3), START_EPOCH)
    assert first == second


def test_the_state_table_in_memory_and_in_moto_give_the_same_replay(spec_for: SpecFor) -> None:
    spec = spec_for(nodepool(budget="100%"))
    items = trace(pods(3, 5.0, 605.0), 1200.0)
    assert figures("m", replay(spec, items), START_EPOCH) == figures(
        "m", replay(spec, items, backend=MOTO), START_EPOCH
    )


def test_a_node_whose_pod_left_before_it_was_ready_is_a_launch_never_used(spec_for: SpecFor) -> None:
    # Launched at 6 for the pod of 5 s; the pod is gone at 20, the node is Ready at 51 and stays empty.
    outcome = replay(spec_for(nodepool()), trace(pods(1, 5.0, 20.0), 1800.0))
    result = figures("default", outcome, START_EPOCH)
    assert result.launches == 1
    assert result.unused == 1
    assert result.as_json()["launchesNeverUsed"] == 1
    assert "launches never used" in render_table([result], 1800.0)


def test_pods_waiting_for_a_registered_node_get_no_second_node(spec_for: SpecFor) -> None:
    # Launched at 26, registered at 56, Ready at 76: the invocation starting at 60 sees the pods
    # still unschedulable.
    outcome = replay(spec_for(nodepool()), trace(pods(3, 25.0, 605.0), 1200.0))
    assert len(outcome.instances) == 3


DAEMONSET = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "agent", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
            },
        },
    },
}


def test_daemonsets_of_the_manifests_run_on_every_node_and_count_in_its_size(spec_for: SpecFor) -> None:
    # A 1-CPU agent on every node: a 1-CPU pod no longer fits an m5.large (1930m) beside it.
    spec = spec_for(nodepool(types=("m5.large", "m5.xlarge")), daemonsets=[DAEMONSET])
    seen: dict[str, Any] = {}
    outcome = replay(spec, trace(pods(1, 5.0, None), 300.0), keep=lambda w: seen.setdefault("world", w))
    assert [i.launched.instance_type for i in outcome.instances] == ["m5.xlarge"]
    agents = [
        p
        for p in seen["world"].store.list(STORED_PODS, "kube-system")[0]
        if p["metadata"]["name"].startswith("agent-")
    ]
    assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in agents] == [
        (node_name(outcome.instances[0].id), "Running")
    ]


def test_spot_interruptions_go_through_the_interruption_handler(spec_for: SpecFor) -> None:
    spec = spec_for(nodepool(capacity_types=("spot",), consolidate_after="1h"), spot_interruptions=4.0)
    outcome = replay(spec, trace(pods(2, 5.0, None), 3600.0), seed=7)
    result = figures("default", outcome, START_EPOCH)
    assert result.interruptions > 0
    interrupted = [i for i in outcome.instances if i.interrupted or i.ended_at is not None]
    assert interrupted
    # Each warning launches a replacement and drains the node before EC2 reclaims it.
    assert result.launches > 2
    assert result.evicted > 0
    assert all(started is not None for life in outcome.lives.values() for started in life.started[:-1])
    assert sum(result.disruptions.values()) >= result.interruptions
    assert outcome.errors == []


def test_two_trace_pods_with_one_name_are_refused(spec_for: SpecFor) -> None:
    items = [TracePod("web", 5.0, 100.0, "1", "1Gi"), TracePod("web", 50.0, 200.0, "1", "1Gi")]
    with pytest.raises(ValueError, match="have the same name"):
        replay(spec_for(nodepool()), trace(items, 300.0))
