"""Batching pending pods: one scheduling pass per burst, not one per pod."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Batcher:
    """A window that opens with the first trigger and closes after ``idle`` seconds without another, or
    ``maximum`` seconds after it opened, whichever comes first (times on any monotonic clock)."""

    idle: float = 1.0
    maximum: float = 10.0
    opened_at: float | None = None
    last_at: float | None = None
    count: int = 0

    @property
    def open(self) -> bool:
        """A window is open."""
        return self.opened_at is not None

    def add(self, now: float, count: int = 1) -> None:
        """Note ``count`` triggers at ``now`` (opening a window when none is open)."""
        if self.opened_at is None:
            self.opened_at = now
        self.last_at = now
        self.count += count

    def closes_at(self) -> float | None:
        """When the open window closes (None when none is open)."""
        if self.opened_at is None or self.last_at is None:
            return None
        return min(self.last_at + self.idle, self.opened_at + self.maximum)

    def ready(self, now: float) -> bool:
        """The open window has closed."""
        closes = self.closes_at()
        return closes is not None and now >= closes

    def reset(self) -> int:
        """Close the window; returns how many triggers it held."""
        count = self.count
        self.opened_at = self.last_at = None
        self.count = 0
        return count
