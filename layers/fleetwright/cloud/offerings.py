"""Offerings the cloud recently refused (instance type, zone, capacity type).

After an insufficient-capacity answer (or a quota error) for an offering, asking again within a few
minutes only fails again; every launch and every scheduling pass skips it until the entry expires. The
store sits behind :class:`UnavailableOfferings` so a shared one (the state table) can replace the
provider's in-memory one when many Lambdas must agree, and so the interruption handler can mark the
offering of a spot interruption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

DEFAULT_TTL_SECONDS = 180.0


@dataclass(frozen=True, slots=True)
class UnavailableOffering:
    """One refused offering and why."""

    instance_type: str
    zone: str
    capacity_type: str
    reason: str
    expires_at: float


class UnavailableOfferings(Protocol):
    """Where refused offerings are remembered."""

    def mark(
        self, instance_type: str, zone: str, capacity_type: str, reason: str, ttl: float = DEFAULT_TTL_SECONDS
    ) -> None:
        """Remember that the offering is unavailable for ``ttl`` seconds."""
        ...

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """True while the offering is remembered as unavailable."""
        ...

    def entries(self) -> list[UnavailableOffering]:
        """The offerings currently remembered (expired ones are dropped)."""
        ...
