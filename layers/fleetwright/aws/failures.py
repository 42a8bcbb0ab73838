"""Why a launch failed, as data: the kind decides what the provisioner does about it (remember a refused
offering, retry later, fix the configuration) and the code is what metrics are split by."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fleetwright.aws.clients import THROTTLING_CODES

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

# Codes of failures Fleetwright itself decides (no EC2 call answered them).
NO_OFFERING_LEFT = "NoOfferingLeft"
NO_LAUNCHABLE_OFFERING = "NoLaunchableOffering"
NOTHING_LAUNCHED = "NothingLaunched"
DEADLINE_EXCEEDED = "DeadlineExceeded"
NODE_CLASS_NOT_READY = "NodeClassNotReady"  # its subnets, AMIs or placement group could not be resolved


class FailureKind(enum.StrEnum):
    """What kind of trouble a launch ran into."""

    INSUFFICIENT_CAPACITY = "InsufficientCapacity"  # an offering (or all of them) refused: try others
    THROTTLED = "Throttled"  # EC2 throttled us beyond the retries
    DEADLINE_EXCEEDED = "DeadlineExceeded"  # the launch ran out of time
    LAUNCH_TEMPLATE_MISSING = "LaunchTemplateMissing"
    INVALID_REQUEST = "InvalidRequest"  # the request (or the node class behind it) is wrong
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Offering:
    """One instance type in one zone with one capacity type."""

    instance_type: str
    zone: str
    capacity_type: str


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """One reason a launch did not produce an instance. ``offering`` is set when EC2 refused that one."""

    kind: FailureKind
    code: str
    message: str = ""
    offering: Offering | None = None

    def render(self) -> str:
        """A readable line (``InsufficientInstanceCapacity for c5.large (spot) in us-east-1a``)."""
        if self.offering is not None and self.kind == FailureKind.INSUFFICIENT_CAPACITY:
            o = self.offering
            return f"{self.code} for {o.instance_type} ({o.capacity_type}) in {o.zone}"
        where = f" ({self.offering.instance_type} in {self.offering.zone})" if self.offering else ""
        return f"{self.code}{where}: {self.message}" if self.message else f"{self.code}{where}"


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
