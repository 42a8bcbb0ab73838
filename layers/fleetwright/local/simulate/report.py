"""The figures of a replay, side by side per policy: a table for people and JSON for scripts.

Instance dollars follow EC2's Linux billing: per second while the instance is ``running`` (from the end
of its boot until it starts shutting down), at least 60 seconds per instance. Volumes and public IPv4
addresses are priced by the node bill (:func:`fleetwright.catalog.bill.node_bill`, from each launch's
EC2NodeClass) over the same seconds. Burstable credits are not modelled yet: their row says so rather
than print a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.catalog.bill import DEFAULT_REGION, node_class_view
from fleetwright.local.simulate.cloud import SimInstance
from fleetwright.local.simulate.engine import Outcome

MINIMUM_BILLED_SECONDS = 60.0
NOT_MODELLED = "not modelled yet"
PERCENTILES = (50, 95, 99)


def billed_seconds(instance: SimInstance, end: float, start: float) -> float:
    """Seconds EC2 bills the instance for by ``end`` (epoch): running time, at least a minute once it
    ran (an instance ended while pending is not billed)."""
    stop = end if instance.ended_at is None else min(instance.ended_at, end)
    ran = stop - instance.running_at
    if ran <= 0:
        return 0.0
    return max(ran, MINIMUM_BILLED_SECONDS)


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def peak_nodes(instances: Sequence[SimInstance], end: float) -> int:
    """The most instances alive (launched, not yet shutting down) at once."""
    changes: list[tuple[float, int]] = []
    for instance in instances:
        changes.append((instance.launched_at, 1))
        changes.append((min(instance.ended_at, end) if instance.ended_at is not None else end, -1))
    peak = current = 0
    for _, delta in sorted(changes, key=lambda c: (c[0], c[1])):
        current += delta
        peak = max(peak, current)
    return peak


@dataclass
class Figures:
    """One policy's figures (see docs/simulate.md, "Replay")."""

    policy: str
    instance_dollars: float
    node_hours: float
    peak_nodes: float
    launches: int
    pending: dict[str, float] = field(default_factory=dict)  # p50/p95/p99/max seconds
    never_ran: int = 0
    evicted: int = 0
    disruptions: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    interruptions: int = 0
    bound: bool = False  # the lower bound: no pods, launches or disruptions
    volume_dollars: float = 0.0
    address_dollars: float = 0.0

    @property
    def launches_per_node(self) -> float:
        """Launches for each node of the peak (1.0: never a node more than the peak needed)."""
        return self.launches / self.peak_nodes if self.peak_nodes else 0.0

    def as_json(self) -> dict[str, Any]:
        """The JSON form (``fleetwright simulate -o json``)."""
        if self.bound:
            return {
                "policy": self.policy,
                "dollars": {"instances": round(self.instance_dollars, 6)},
                "nodeHours": round(self.node_hours, 4),
                "peakNodes": round(self.peak_nodes, 2),
            }
        return {
            "policy": self.policy,
            "dollars": {
                "instances": round(self.instance_dollars, 6),
                "volumes": round(self.volume_dollars, 6),
                "addresses": round(self.address_dollars, 6),
                "credits": NOT_MODELLED,
            },
            "nodeHours": round(self.node_hours, 4),
            "peakNodes": int(self.peak_nodes),
            "launches": self.launches,
            "launchesPerPeakNode": round(self.launches_per_node, 3),
            "launchesByType": dict(sorted(self.by_type.items())),
            "podPendingSeconds": {k: round(v, 3) for k, v in self.pending.items()},
            "podsNeverRan": self.never_ran,
            "podsEvicted": self.evicted,
            "spotInterruptions": self.interruptions,
            "disruptions": dict(sorted(self.disruptions.items())),
        }


def figures(policy: str, outcome: Outcome, start: float, region: str = DEFAULT_REGION) -> Figures:
    """The figures of one replay (``start``: the epoch of the replay's time zero)."""
    end = start + outcome.duration
    dollars = hours = volumes = addresses = 0.0
    by_type: dict[str, int] = {}
    for instance in outcome.instances:
        seconds = billed_seconds(instance, end, start)
        dollars += instance.price * seconds / 3600
        view = node_class_view(instance.request.node_class, region)
        volumes += view.volumes_per_hour() * seconds / 3600
        addresses += view.address_per_hour() * seconds / 3600
        stop = end if instance.ended_at is None else min(instance.ended_at, end)
        hours += max(0.0, stop - instance.running_at) / 3600
        by_type[instance.launched.instance_type] = by_type.get(instance.launched.instance_type, 0) + 1
    waits: list[float] = []
    never = 0
    for life in outcome.lives.values():
        for created, started in zip(life.created, life.started, strict=True):
            if started is None:
                never += 1
                waits.append(max(0.0, min(life.end, outcome.duration) - created))
            else:
                waits.append(started - created)
    pending = {f"p{p}": percentile(waits, p) for p in PERCENTILES}
    pending["max"] = max(waits, default=0.0)
    return Figures(
        policy,
        dollars,
        hours,
        peak_nodes(outcome.instances, end),
        len(outcome.instances),
        pending,
        never,
        sum(life.evictions for life in outcome.lives.values()),
        dict(outcome.disruptions),
        by_type,
        outcome.interruptions,
        volume_dollars=volumes,
        address_dollars=addresses,
    )


def render_table(rows: Sequence[Figures], duration: float) -> str:
    """The policies side by side, one column each."""
    header = ["", *(r.policy for r in rows)]

    def cell(row: Figures, value: str) -> str:
        return "-" if row.bound else value

    lines: list[list[str]] = [
        ["instance $", *(f"{r.instance_dollars:.2f}" for r in rows)],
        ["volume $", *(cell(r, f"{r.volume_dollars:.2f}") for r in rows)],
        ["public IPv4 $", *(cell(r, f"{r.address_dollars:.2f}") for r in rows)],
        ["CPU credits $", *(cell(r, NOT_MODELLED) for r in rows)],
        ["node-hours", *(f"{r.node_hours:.1f}" for r in rows)],
        ["peak nodes", *(f"{r.peak_nodes:.1f}" if r.bound else str(int(r.peak_nodes)) for r in rows)],
        ["launches", *(cell(r, str(r.launches)) for r in rows)],
        ["launches / peak node", *(cell(r, f"{r.launches_per_node:.2f}") for r in rows)],
    ]
    for key in (*(f"p{p}" for p in PERCENTILES), "max"):
        lines.append([f"pending {key} (s)", *(cell(r, f"{r.pending.get(key, 0.0):.1f}") for r in rows)])
    lines.append(["pods never ran", *(cell(r, str(r.never_ran)) for r in rows)])
    lines.append(["pods evicted", *(cell(r, str(r.evicted)) for r in rows)])
    if any(r.interruptions for r in rows):
        lines.append(["spot interruptions", *(cell(r, str(r.interruptions)) for r in rows)])
    reasons = sorted({reason for r in rows for reason in r.disruptions})
    for reason in reasons:
        lines.append([f"disruptions: {reason}", *(cell(r, str(r.disruptions.get(reason, 0))) for r in rows)])
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    text = [f"Replay of {duration / 3600:.2f} h"]
    for line in [header, *lines]:
        cells = enumerate(zip(line, widths, strict=True))
        text.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in cells))
    return "\n".join(text) + "\n"


def report_json(rows: Sequence[Figures], duration: float, notes: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document of ``fleetwright simulate -o json``."""
    return {"durationSeconds": duration, "policies": [r.as_json() for r in rows], "notes": dict(notes)}
