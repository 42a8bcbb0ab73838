"""What can go wrong when the cloud is asked for something, as types a capability can act on without
knowing the provider's error codes.

``CloudError`` is the root. A launch that produced no instance raises :class:`LaunchError` (or one of its
narrower kinds, chosen by :func:`launch_error` from the failures behind it); each failure is data
(:class:`LaunchFailure`): its kind decides what the provisioner does about it (remember a refused offering,
retry later, fix the configuration) and its code is what metrics are split by.
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


class InsufficientCapacityError(LaunchError):
    """The claim's offerings ran out: each one tried was refused for capacity and none was left to try
    (the refused ones are remembered as unavailable; the pods wait for another claim)."""


class NodeClassNotReadyError(LaunchError):
    """The claim's EC2NodeClass could not be resolved (its subnets, AMIs or placement group): no launch
    can work until the node class is fixed or its resources appear."""


def launch_error(
    nodeclaim: str, failures: Sequence[LaunchFailure], *, may_have_launched: bool = False
) -> LaunchError:
    """The :class:`LaunchError` these failures add up to: :class:`NodeClassNotReadyError` when the node
    class could not be resolved; :class:`InsufficientCapacityError` when capacity was refused and every
    other failure only says no offering was left to try; else the general kind."""
    kind: type[LaunchError] = LaunchError
    ran_out = {
        f.kind == FailureKind.INSUFFICIENT_CAPACITY or f.code == NO_LAUNCHABLE_OFFERING for f in failures
    }
    if any(f.code == NODE_CLASS_NOT_READY for f in failures):
        kind = NodeClassNotReadyError
    elif ran_out == {True} and any(f.kind == FailureKind.INSUFFICIENT_CAPACITY for f in failures):
        kind = InsufficientCapacityError
    return kind(nodeclaim, failures, may_have_launched=may_have_launched)
