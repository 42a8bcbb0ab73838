"""Taints and tolerations, with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (``key=value:effect``)."""

    key: str
    effect: str
    value: str = ""

    def render(self) -> str:
        """``key=value:Effect`` (``key:Effect`` without a value)."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. Empty ``key`` with ``Exists`` tolerates everything; empty effect matches all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            # An empty key matches every taint, but only with operator Exists.
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def tolerates_all(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint not tolerated, or None when the pod may schedule."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None


def first_untolerated(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first taint of any effect not tolerated, PreferNoSchedule included (Karpenter's strict check)."""
    tols = tuple(tolerations)
    return next((taint for taint in taints if not any(t.tolerates(taint) for t in tols)), None)
