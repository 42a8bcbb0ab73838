"""``karpenter.sh/do-not-disrupt`` with a duration: a pod is protected until that long after it started;
a node only by "true"; a value that is neither is ignored and reported."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.disruption.notices import invalid_do_not_disrupt
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT
from fleetwright.kube.resources import EVENTS
from fleetwright.model.donotdisrupt import parse_go_duration, pod_protection
from fleetwright.model.kube import pod_from_object
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.termination.drain import is_do_not_disrupt
from tests.disruption.plan_builders import NOW, busy, node, planner_input, pod
from tests.support.disruption import RigFactory, nodepool

GUARD = DO_NOT_DISRUPT_ANNOTATION


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800.0), ("1h30m", 5400.0), ("90s", 90.0), ("1.5h", 5400.0), ("500ms", 0.5), ("0", 0.0)],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "true1", "5", "1d", "forever", "m5"])
def test_values_that_are_not_go_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_a_duration_protects_from_the_pod_start_for_that_long() -> None:
    annotations = {GUARD: "1h"}
    assert pod_protection(annotations, NOW - 600, NOW).active
    assert pod_protection(annotations, NOW - 600, NOW).until == NOW + 3000
    assert not pod_protection(annotations, NOW - 3600, NOW).active
    assert pod_protection(annotations, None, NOW).active  # not started yet: still protected
    assert pod_protection({GUARD: "true"}, NOW - 10 * 86400, NOW).active
    for value in ("-5m", "0s", "false", "always"):
        found = pod_protection({GUARD: value}, NOW - 600, NOW)
        assert not found.active and found.invalid


def _drifted(annotations: dict[str, str], started_ago: float | None) -> Any:
    guarded = pod("batch-0", "500m", annotations=annotations)
    guarded.started_at = None if started_ago is None else NOW - started_ago
    nodes = [node("n", "m5.xlarge", pods=[guarded, *busy("w", 4)], nodepool_hash="old")]
    return plan(planner_input(nodes, nodepool_hashes={"default": "new"}))


def test_a_pod_protected_for_a_duration_holds_its_node_until_it_elapses() -> None:
    held = _drifted({GUARD: "1h"}, started_ago=600)
    assert held.command is None
    assert held.skipped["n"].endswith(f"pod default/batch-0 is annotated {GUARD} until 2025-06-15T15:56:40Z")
    released = _drifted({GUARD: "1h"}, started_ago=3601)
    assert released.command is not None and released.command.method == DRIFT
    assert _drifted({GUARD: "1h"}, started_ago=None).command is None


def test_an_invalid_value_is_ignored_and_reported() -> None:
    result = _drifted({GUARD: "forever"}, started_ago=600)
    assert result.command is not None and result.command.node_names == ["n"]
    guarded = pod("batch-0", annotations={GUARD: "forever"})
    inp = planner_input([node("n", pods=[guarded])])
    [(found, why)] = invalid_do_not_disrupt(inp)
    assert found.key == "default/batch-0" and "forever" in why


def test_on_a_node_only_true_protects() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 4), nodepool_hash="old", annotations={GUARD: "1h"})]
    command = plan(planner_input(nodes, nodepool_hashes={"default": "new"})).command
    assert command is not None and command.node_names == ["n"]


def test_the_pod_start_time_is_read_from_the_pod_object() -> None:
    obj = {
        "metadata": {"name": "p", "namespace": "default", "annotations": {GUARD: "10m"}},
        "spec": {"containers": [{"name": "c"}], "nodeName": "n"},
        "status": {"phase": "Running", "startTime": "2025-06-15T15:00:00Z"},
    }
    assert pod_from_object(obj).started_at == 1749999600.0
    # The drain waits for the pod while its protection lasts, and evicts it afterwards.
    assert is_do_not_disrupt(obj, now=1749999600.0 + 599)
    assert not is_do_not_disrupt(obj, now=1749999600.0 + 601)
    assert is_do_not_disrupt({"metadata": {"annotations": {GUARD: "true"}}}, now=NOW)
    assert not is_do_not_disrupt({"metadata": {"annotations": {GUARD: "soon"}}}, now=NOW)


def test_the_pass_warns_on_the_pod_about_an_invalid_value(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    name = rig.node("m5.large")
    rig.pod("batch-0", name, annotations={GUARD: "forever"})

    rig.controller().run_once()

    listed = rig.world.client.list(EVENTS, field_selector="involvedObject.name=batch-0").items
    found = [(e["type"], e["reason"], e["message"]) for e in listed if e["involvedObject"]["kind"] == "Pod"]
    assert found == [
        (
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: failed to parse "forever" as a duration: '
            "time: invalid duration 'forever', ignoring annotation",
        )
    ]


def test_the_pass_says_until_when_a_duration_protects_a_pod_and_when_it_ran_out(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    name = rig.node("m5.large")
    rig.pod("batch-0", name, annotations={GUARD: "10m"})

    def pod_events() -> list[tuple[str, str]]:
        listed = rig.world.client.list(EVENTS, field_selector="involvedObject.name=batch-0").items
        return sorted((e["reason"], e["message"]) for e in listed)

    rig.controller().run_once()
    [(reason, message)] = pod_events()
    assert reason == "DoNotDisruptUntil"
    assert message.startswith("The karpenter.sh/do-not-disrupt grace period will elapse at ")

    rig.world.wall.advance(601)
    rig.controller().run_once()
    assert (
        "DoNotDisruptGracePeriodElapsed",
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
    ) in pod_events()
