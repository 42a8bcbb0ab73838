"""Disruption Lambda (placeholder while the controller lands; replaced in this session)."""

from __future__ import annotations

from typing import Any

SERVICE = "fleetwright-disruption"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Not wired yet."""
    raise NotImplementedError("the disruption controller is not wired yet")
