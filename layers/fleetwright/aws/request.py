"""What a launch template targets besides the request (``fleetwright.cloud.launch``)."""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright.cloud.errors import LaunchError
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest

# The request, the launched instance and the error belong to the cloud contract (``fleetwright.cloud``);
# they stay importable from here for the launch code.
__all__ = ["LaunchError", "LaunchRequest", "LaunchedInstance", "ReservationTarget"]


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The capacity reservation a launch template targets: its id, type (``default`` or
    ``capacity-block``) and whether it is interruptible."""

    id: str
    reservation_type: str = "default"
    interruptible: bool = False
