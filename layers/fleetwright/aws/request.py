"""What a launch template targets besides the launch request (``fleetwright.cloud.launch.LaunchRequest``):
the capacity reservation, which only the AWS launch code knows about."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The capacity reservation a launch template targets: its id, type (``default`` or
    ``capacity-block``) and whether it is interruptible."""

    id: str
    reservation_type: str = "default"
    interruptible: bool = False
