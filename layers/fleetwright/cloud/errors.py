"""What can go wrong when the cloud is asked for something, as types a capability can act on without
knowing the provider's error codes.

``CloudError`` is the root. A launch that produced no instance raises :class:`LaunchError`; each failure
behind it is data (:class:`LaunchFailure`): its kind decides what the provisioner does about it (remember a
refused offering, retry later, fix the configuration) and its code is what metrics are split by. What the
failures add up to is read from them (:attr:`LaunchError.insufficient_capacity`; a node class that could
not be resolved is the failure code ``NodeClassNotReady``), not from subclasses, so there is one way to
say each.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

# Codes of launch failures Fleetwright itself decides (no provider call answered them).
NO_OFFERING_LEFT = "NoOfferingLeft"
NO_LAUNCHABLE_OFFERING = "NoLaunchableOffering"
NOTHING_LAUNCHED = "NothingLaunched"
DEADLINE_EXCEEDED = "DeadlineExceeded"
NODE_CLASS_NOT_READY = "NodeClassNotReady"  # its subnets, AMIs or placement group could not be resolved


class CloudError(Exception):
    """Root of the errors the cloud provider raises on purpose."""


class NotOwnedError(CloudError):
    """An instance does not carry this cluster's ownership tag, so Fleetwright refuses to touch it."""


class InstanceNotFoundError(CloudError):
    """The instance is gone (terminated and forgotten, or never existed) or is not this cluster's."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(f"instance {instance_id} not found")


class TransientCloudError(CloudError):
    """The provider failed on its side (5xx, a dropped connection): asking again later may work.
    ``code`` is the provider's error code ("" when the call never got an answer)."""

    def __init__(self, message: str, code: str = "") -> None:
        self.code = code
        super().__init__(message)


class ThrottledError(TransientCloudError):
    """The provider refused the call for its rate, beyond the client's own retries."""


class FailureKind(enum.StrEnum):
    """What kind of trouble a launch ran into."""

    INSUFFICIENT_CAPACITY = "InsufficientCapacity"  # an offering (or all of them) refused: try others
    THROTTLED = "Throttled"  # the provider throttled us beyond the retries
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
    """One reason a launch did not produce an instance. ``offering`` is set when the provider refused that
    one."""

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


class LaunchError(CloudError):
    """No instance was launched for a NodeClaim; ``failures`` say why.

    ``may_have_launched`` is True when a launch request may have taken effect without an answer (it timed
    out, or the provider failed internally): the claim must then be settled by finding its instance by
    tag, not failed at once.
    """

    def __init__(
        self, nodeclaim: str, failures: Sequence[LaunchFailure], *, may_have_launched: bool = False
    ) -> None:
        self.nodeclaim = nodeclaim
        self.failures = list(dict.fromkeys(failures))
        self.may_have_launched = may_have_launched
        summary = "; ".join(self.reasons) if self.failures else "no reason given"
        super().__init__(f"cannot launch nodeclaim {nodeclaim}: {summary}")

    @property
    def reasons(self) -> list[str]:
        """The failures as readable lines."""
        return [f.render() for f in self.failures]

    @property
    def codes(self) -> list[str]:
        """The distinct failure codes (metric dimensions)."""
        return list(dict.fromkeys(f.code for f in self.failures))

    @property
    def insufficient_capacity(self) -> bool:
        """The claim's offerings ran out: capacity was refused, and every other failure only says no
        offering was left to try (the refused ones are remembered as unavailable; the pods wait for
        another claim). Karpenter's ``InsufficientCapacityError`` event is published for such a claim."""
        refused = [f for f in self.failures if f.kind == FailureKind.INSUFFICIENT_CAPACITY]
        others = [f for f in self.failures if f.kind != FailureKind.INSUFFICIENT_CAPACITY]
        return bool(refused) and all(f.code == NO_LAUNCHABLE_OFFERING for f in others)
