"""What a launch's failures add up to, read from the one ``LaunchError``: capacity ran out only when every
failure is a capacity refusal or "no offering left to try" (the claim's ``InsufficientCapacityError``
event); a node class that cannot be resolved, or any other failure among the refusals, is not that."""

from __future__ import annotations

from fleetwright.cloud.errors import (
    NO_LAUNCHABLE_OFFERING,
    NODE_CLASS_NOT_READY,
    FailureKind,
    LaunchError,
    LaunchFailure,
    Offering,
)

REFUSED = LaunchFailure(
    FailureKind.INSUFFICIENT_CAPACITY,
    "InsufficientInstanceCapacity",
    "",
    Offering("m5.large", "us-east-1a", "spot"),
)
NOTHING_LEFT = LaunchFailure(FailureKind.INSUFFICIENT_CAPACITY, NO_LAUNCHABLE_OFFERING, "no offering left")
NOTHING_LEFT_OTHER_KIND = LaunchFailure(FailureKind.UNKNOWN, NO_LAUNCHABLE_OFFERING, "no offering left")
THROTTLED = LaunchFailure(FailureKind.THROTTLED, "RequestLimitExceeded")
NOT_READY = LaunchFailure(FailureKind.INVALID_REQUEST, NODE_CLASS_NOT_READY, "no subnet matches")


def test_refusals_and_nothing_left_to_try_are_insufficient_capacity() -> None:
    assert LaunchError("c", [REFUSED]).insufficient_capacity
    assert LaunchError("c", [REFUSED, NOTHING_LEFT, NOTHING_LEFT_OTHER_KIND]).insufficient_capacity


def test_any_other_failure_or_no_refusal_at_all_is_not() -> None:
    assert not LaunchError("c", [REFUSED, THROTTLED]).insufficient_capacity
    assert not LaunchError("c", [NOTHING_LEFT_OTHER_KIND]).insufficient_capacity
    assert not LaunchError("c", [NOT_READY]).insufficient_capacity
    assert not LaunchError("c", []).insufficient_capacity
