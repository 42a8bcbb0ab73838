"""Which EC2 error codes stand for which kind of launch failure
(:class:`~fleetwright.cloud.errors.FailureKind`): the kind decides what the provisioner does about it, the
code is what metrics are split by."""

from __future__ import annotations

from fleetwright.aws.clients import THROTTLING_CODES
from fleetwright.cloud.errors import DEADLINE_EXCEEDED, FailureKind, LaunchFailure, Offering

# Errors that say "not this offering, not now": remember it and try the others.
UNAVAILABLE_OFFERING_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "InsufficientFreeAddressesInSubnet",
        "Unsupported",
        "SpotMaxPriceTooLow",
        "ReservationCapacityExceeded",
        "InsufficientHostCapacity",
    }
)
MISSING_TEMPLATE_CODES = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.NotFoundException",
    }
)
INVALID_REQUEST_CODES = frozenset(
    {"MissingParameter", "UnauthorizedOperation", "OptInRequired", "Blocked", "InvalidRequest"}
)


def classify(code: str, message: str = "", offering: Offering | None = None) -> LaunchFailure:
    """The failure an EC2 error code stands for."""
    if code in UNAVAILABLE_OFFERING_CODES:
        kind = FailureKind.INSUFFICIENT_CAPACITY
    elif code in MISSING_TEMPLATE_CODES:
        kind = FailureKind.LAUNCH_TEMPLATE_MISSING
    elif code in THROTTLING_CODES:
        kind = FailureKind.THROTTLED
    elif code == DEADLINE_EXCEEDED:
        kind = FailureKind.DEADLINE_EXCEEDED
    elif code.startswith("Invalid") or code in INVALID_REQUEST_CODES:
        kind = FailureKind.INVALID_REQUEST
    else:
        kind = FailureKind.UNKNOWN
    return LaunchFailure(kind, code or "Unknown", message, offering)
