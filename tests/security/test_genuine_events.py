"""Genuine events still work behind the checks, and no event, genuine or replayed, sets a drain deadline
sooner than its minimum window (pods left at the deadline are deleted past their PDBs)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.security.test_hostile_events import CLAIM, NOW, _health, _iso, _rfc1123, assert_untouched
from tests.support.interruption import REBALANCE, SPOT_WARNING, Interruptions, claimed_node, for_instance
from tests.support.termination import Harness


def _node(harness: Harness, claim: str = CLAIM, name: str = "node-a", pods: int = 2) -> str:
    instance = claimed_node(harness, claim, name)
    for i in range(pods):
        harness.pod(f"{name}-web-{i}", name)
    return str(instance["InstanceId"])


def _replacements_register(harness: Harness) -> None:
    """The replacements' kubelets register their Nodes once a workflow waits for them."""

    def register(step: str, _payload: dict[str, Any]) -> None:
        if step != "await_replacement":
            return
        for n, claim in enumerate(harness.world.state.nodeclaims.list()):
            if claim.id != CLAIM and claim.instance_id:
                harness.world.register_node(
                    f"aws:///{claim.zone}/{claim.instance_id}", f"new-{n}", ready=True
                )

    harness.before_step.append(register)


def _requests(interruptions: Interruptions) -> dict[str, dict[str, Any]]:
    """Each started workflow's request (as its execution's input), by instance id; waits for each to end."""
    requests = {}
    for execution in interruptions.executions():
        result = interruptions.harness.wait(execution["executionArn"])
        assert result["status"] == "SUCCEEDED", result
        request = json.loads(result["input"])
        requests[request["instanceId"]] = request
    return requests


def _at(offset: timedelta) -> str:
    return _iso(NOW + offset)


def test_a_genuine_spot_warning_still_drains_within_its_notice(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)

    assert interruptions.deliver(for_instance(SPOT_WARNING, instance_id)) == {"batchItemFailures": []}

    assert _requests(interruptions)[instance_id]["deadline"] == _at(timedelta(seconds=105))
    assert interruptions.metrics.total("InterruptionMessagesRejected") == 0
    assert interruptions.harness.instance_state(instance_id) in ("shutting-down", "terminated")


def test_a_late_spot_warning_keeps_the_spot_minimum_window(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)
    late = for_instance(SPOT_WARNING, instance_id)
    late["time"] = _at(-timedelta(seconds=100))  # its deadline (+105 s) is 5 s away

    assert interruptions.deliver(late) == {"batchItemFailures": []}

    assert _requests(interruptions)[instance_id]["deadline"] == _at(timedelta(seconds=30))


def test_a_spot_warning_older_than_its_notice_gets_the_minimum_window(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)
    retried = for_instance(SPOT_WARNING, instance_id)
    retried["time"] = _at(-timedelta(minutes=10))  # a retry after a failed receive; the instance still runs

    assert interruptions.deliver(retried) == {"batchItemFailures": []}

    assert _requests(interruptions)[instance_id]["deadline"] == _at(timedelta(seconds=120))


def test_a_spot_warning_within_the_clock_skew_is_accepted(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)
    ahead = for_instance(SPOT_WARNING, instance_id)
    ahead["time"] = _at(timedelta(seconds=20))

    assert interruptions.deliver(ahead) == {"batchItemFailures": []}

    assert _requests(interruptions)[instance_id]["deadline"] == _at(timedelta(seconds=105))


def test_a_health_event_whose_start_has_passed_gives_every_instance_the_minimum_window(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    ids = [_node(harness, f"default-claim{n}", f"node-{n}") for n in range(3)]
    passed = _health(ids, startTime=_rfc1123(NOW - timedelta(days=300)))

    assert interruptions.deliver(passed) == {"batchItemFailures": []}

    requests = _requests(interruptions)
    assert sorted(requests) == sorted(ids)
    # Each gets two minutes from when its workflow starts (the virtual clock moves while the batch's
    # replacements launch): none is at the past start, none sooner than the window.
    deadlines = sorted(r["deadline"] for r in requests.values())
    assert _at(timedelta(seconds=120)) <= deadlines[0] and deadlines[-1] <= _at(timedelta(seconds=180))


def test_a_health_event_far_ahead_is_clamped_to_the_scheduled_change_maximum(
    interruptions: Interruptions,
) -> None:
    instance_id = _node(interruptions.harness)
    _replacements_register(interruptions.harness)
    far = _health([instance_id], startTime=_rfc1123(NOW + timedelta(days=60)))

    assert interruptions.deliver(far) == {"batchItemFailures": []}

    assert _requests(interruptions)[instance_id]["deadline"] == _at(timedelta(days=14))


def test_a_health_event_redriven_from_the_dead_letter_queue_days_later_is_dropped_as_stale(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    instance_id = _node(harness, pods=0)
    for i in range(2):
        harness.pod(f"web-{i}", "node-a")
    redriven = _health([instance_id], startTime=_rfc1123(NOW - timedelta(days=1)))
    redriven["time"] = _at(-timedelta(days=2))

    assert interruptions.deliver(redriven) == {"batchItemFailures": []}

    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="Stale") == 1
    zone = harness.world.cloud.describe([instance_id])[instance_id].zone
    assert_untouched(interruptions, instance_id, "node-a", zone)


def test_a_rebalance_recommendation_still_records(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)

    assert interruptions.deliver(for_instance(REBALANCE, instance_id)) == {"batchItemFailures": []}

    assert interruptions.metrics.total("RebalanceRecommendations") == 1
    assert interruptions.metrics.total("InterruptionMessagesRejected") == 0


def test_describing_a_wildcard_id_finds_no_instance(interruptions: Interruptions) -> None:
    instance_id = _node(interruptions.harness)

    # EC2 refuses the id; the instance-id filter it falls back to treats ``*`` as a wildcard.
    assert interruptions.harness.world.cloud.describe(["i-*"]) == {}
    assert list(interruptions.harness.world.cloud.describe(["i-*", instance_id])) == [instance_id]
    assert datetime.fromtimestamp(interruptions.harness.clock(), tz=UTC) == NOW
