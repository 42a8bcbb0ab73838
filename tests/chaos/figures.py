"""The six figures a chaos scenario produces, their targets, and where ``bench/chaos.py`` collects them."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

REPORT_ENV = "FLEETWRIGHT_CHAOS_REPORT"


@dataclass(frozen=True)
class Figures:
    """What a scenario measured. ``launched`` instances for ``needed`` ones (the ratio's target is 1.0);
    every other figure's target is 0."""

    launched: int
    needed: int
    limit_overshoot: float  # vCPUs launched above a NodePool's cpu limit (the worst moment seen)
    pdb_violations: int  # pods evicted or deleted while their PDB allowed no disruption, not for a deadline
    cordoned_left: int  # Nodes still cordoned at the end, after recovery
    messages_lost: int  # SQS messages neither acted on nor in the dead-letter queue
    orphans: int  # running instances with no live claim after the garbage collector's window

    @property
    def launched_per_needed(self) -> float:
        if self.launched == self.needed:
            return 1.0
        return math.inf if self.needed == 0 else self.launched / self.needed

    def misses(self) -> list[str]:
        """The figures that miss their target, as ``name=value`` (empty when every promise held)."""
        missed = []
        if self.launched_per_needed != 1.0:
            missed.append(f"launched/needed={self.launched}/{self.needed}")
        for name in ("limit_overshoot", "pdb_violations", "cordoned_left", "messages_lost", "orphans"):
            value = getattr(self, name)
            if value:
                missed.append(f"{name}={value:g}")
        return missed


def record(scenario: str, figures: Figures) -> None:
    """Append the figures to the report file ``bench/chaos.py`` asked for (nothing when run by pytest)."""
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    line = {"scenario": scenario, **asdict(figures), "ratio": figures.launched_per_needed}
    with Path(path).open("a") as out:
        out.write(json.dumps(line) + "\n")


def check(name: str, figures: Figures) -> None:
    """Record the figures for the bench and fail the test on any missed target."""
    record(name, figures)
    assert figures.misses() == [], f"{name}: {figures}"
