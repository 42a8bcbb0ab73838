"""The checks of ``fleetwright.interruption.trust`` on parsed events, without AWS: the instance id pattern,
the time bounds at their edges, the AWS Health limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwright.interruption.events import parse_message
from fleetwright.interruption.trust import EventOrigin, RejectedEventError, TrustLimits, check_event
from tests.support.interruption import SCHEDULED_CHANGE, SPOT_WARNING, for_instance

ORIGIN = EventOrigin(account="123456789012", region="us-east-1")
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z, the events' time


def _check(event: dict[str, Any], now: float = NOW) -> None:
    check_event(parse_message(json.dumps(event)), ORIGIN, now, TrustLimits())


@pytest.mark.parametrize("instance_id", ["i-1234abcd", "i-0123456789abcdef0"])
def test_eight_and_seventeen_hex_digit_ids_are_accepted(instance_id: str) -> None:
    _check(for_instance(SPOT_WARNING, instance_id))


@pytest.mark.parametrize(
    "instance_id", ["i-1234abc", "i-1234abcdg", "i-0123456789abcdef01", "i-", "x-1234abcd"]
)
def test_other_ids_are_refused(instance_id: str) -> None:
    with pytest.raises(RejectedEventError) as refused:
        _check(for_instance(SPOT_WARNING, instance_id))
    assert refused.value.kind == "InvalidInstanceId"


def test_the_age_bound_and_the_clock_skew_at_their_edges() -> None:
    event = for_instance(SPOT_WARNING, "i-0123456789abcdef0")
    _check(event, now=NOW + 3600)  # an hour old: still acted on
    _check(event, now=NOW - 30)  # 30 s ahead of the clock: still acted on
    for now, reason in ((NOW + 3601, "Stale"), (NOW - 31, "FromTheFuture")):
        with pytest.raises(RejectedEventError) as refused:
            _check(event, now=now)
        assert refused.value.kind == reason


def test_ten_instances_per_health_event_are_accepted_eleven_refused() -> None:
    ids = [f"i-{n:017x}" for n in range(11)]
    event = for_instance(SCHEDULED_CHANGE, ids[0])
    for count, refused in ((10, False), (11, True)):
        event["resources"] = ids[:count]
        event["detail"]["affectedEntities"] = [{"entityValue": i} for i in ids[:count]]
        if refused:
            with pytest.raises(RejectedEventError, match="11 entities"):
                _check(event)
        else:
            _check(event)


def test_every_health_status_and_type_acted_on_passes() -> None:
    from fleetwright.interruption.trust import HEALTH_EVENT_TYPE_CODES, HEALTH_STATUS_CODES

    for status in sorted(HEALTH_STATUS_CODES):
        for code in sorted(HEALTH_EVENT_TYPE_CODES):
            _check(
                for_instance(SCHEDULED_CHANGE, "i-0123456789abcdef0", statusCode=status, eventTypeCode=code)
            )
