"""Parsing queue messages into typed events."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from fleetwright.interruption.events import (
    EventKind,
    HealthEvent,
    MessageError,
    SpotInterruptionEvent,
    StateChangeEvent,
    parse_message,
)
from tests.support.interruption import REBALANCE, SCHEDULED_CHANGE, SPOT_WARNING, STATE_CHANGE


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (SPOT_WARNING, EventKind.SPOT_INTERRUPTION),
        (REBALANCE, EventKind.REBALANCE_RECOMMENDATION),
        (STATE_CHANGE, EventKind.STATE_CHANGE),
        (SCHEDULED_CHANGE, EventKind.SCHEDULED_CHANGE),
    ],
)
def test_each_documented_event_shape_parses(event: dict[str, object], kind: EventKind) -> None:
    parsed = parse_message(json.dumps(event))
    assert parsed.kind is kind
    assert parsed.instance_ids == ["i-1234567890abcdef0"]
    assert parsed.time == datetime(2027, 1, 15, 8, tzinfo=UTC)


def test_details_are_typed() -> None:
    spot = parse_message(json.dumps(SPOT_WARNING))
    assert isinstance(spot, SpotInterruptionEvent) and spot.detail.instance_action == "terminate"
    stopped = parse_message(
        json.dumps({**STATE_CHANGE, "detail": {"instance-id": "i-1", "state": "stopped"}})
    )
    assert isinstance(stopped, StateChangeEvent) and stopped.detail.state == "stopped"
    health = parse_message(json.dumps(SCHEDULED_CHANGE))
    assert isinstance(health, HealthEvent)
    assert health.scheduled_start() == datetime(2027, 1, 15, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "problem", "text"),
    [
        ("not json at all", "NotJson", "not JSON"),
        ("[1, 2, 3]", "NotAnEvent", "not an EventBridge event"),
        (json.dumps({**SPOT_WARNING, "detail-type": "EC2 AMI State Change"}), "UnknownEvent", "AMI State"),
        (
            json.dumps({**SPOT_WARNING, "detail": {"instance-action": "terminate"}}),
            "InvalidEvent",
            "instance-id",
        ),
        (
            json.dumps({**STATE_CHANGE, "detail": {"instance-id": "i-1", "state": "melting"}}),
            "InvalidEvent",
            "state",
        ),
        (
            json.dumps({**SCHEDULED_CHANGE, "detail": {**SCHEDULED_CHANGE["detail"], "service": "RDS"}}),
            "UnknownEvent",
            "RDS",
        ),
    ],
)
def test_bad_messages_say_what_is_wrong(body: str, problem: str, text: str) -> None:
    with pytest.raises(MessageError, match=text) as caught:
        parse_message(body)
    assert caught.value.kind == problem
