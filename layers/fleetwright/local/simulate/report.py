"""The figures of a replay, side by side per policy: a table for people and JSON for scripts.

Each policy's figures carry its cluster over time (:class:`Point`: nodes alive and the $/h of running
instances, their volumes and addresses), taken from the instances' launch, running and end times after
the replay, one point a change, so the replay does no extra work for it.

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
from fleetwright.local.simulate.cloud import SimInstance, node_name
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


@dataclass(frozen=True, slots=True)
class Point:
    """The cluster from ``at`` (seconds from the replay's start) until the next point: ``nodes`` alive
    (launched, not shutting down; fractional for the lower bound) and ``hourly``, the $/h of the
    running instances, their volumes and public IPv4 addresses (the lower bound: its instances)."""

    at: float
    nodes: float
    hourly: float


def timeline(
    instances: Sequence[SimInstance], start: float, duration: float, region: str = DEFAULT_REGION
) -> list[Point]:
    """The cluster over the replay, a point at 0, at each launch, start of running and end, and at
    ``duration`` (``start``: the epoch of the replay's time zero)."""
    end = start + duration
    changes: list[tuple[float, int, float]] = []  # (epoch, nodes, $/h)
    for instance in instances:
        view = node_class_view(instance.request.node_class, region)
        rate = instance.price + view.volumes_per_hour() + view.address_per_hour()
        stop = end if instance.ended_at is None else min(instance.ended_at, end)
        changes.append((instance.launched_at, 1, 0.0))
        changes.append((stop, -1, 0.0))
        if instance.running_at < stop:
            changes.append((instance.running_at, 0, rate))
            changes.append((stop, 0, -rate))
    changes.sort(key=lambda change: change[0])
    points = [Point(0.0, 0, 0.0)]
    nodes, hourly = 0, 0.0
    for at, delta, dollars in changes:
        if at >= end:
            break
        nodes += delta
        hourly += dollars
        seconds = max(0.0, at - start)
        if points[-1].at == seconds:
            points.pop()
        points.append(Point(seconds, nodes, hourly if abs(hourly) > 1e-9 else 0.0))
    points.append(Point(duration, points[-1].nodes, points[-1].hourly))
    return points


def nodes_needed(series: Sequence[Point]) -> int:
    """The launches a clairvoyant cluster following ``series`` makes: the whole nodes of its first
    point, then every rise of the whole nodes from one point to the next (a node count of 2.3 needs 3;
    LP noise of a millionth of a node is ignored)."""
    needed = previous = 0
    for point in series:
        whole = max(0, math.ceil(point.nodes - 1e-6))
        needed += max(0, whole - previous)
        previous = whole
    return needed


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
    series: list[Point] = field(default_factory=list, repr=False)
    approximate: bool = False  # the lower bound: some LP solve stopped at its time limit
    unused: int = 0  # launches whose node never ran a trace pod

    @property
    def launches_per_node(self) -> float:
        """Launches for each node of the peak (1.0: never a node more than the peak needed)."""
        return self.launches / self.peak_nodes if self.peak_nodes else 0.0

    @property
    def nodes_needed(self) -> int:
        """The lower bound's nodes needed (:func:`nodes_needed` of its series)."""
        return nodes_needed(self.series)

    def launches_per_node_needed(self, needed: int | None) -> float | None:
        """Launches for each node the lower bound needed (None without the bound; 1.0: the target)."""
        if needed is None or self.bound:
            return None
        return self.launches / needed if needed else 0.0

    def as_json(self, needed: int | None = None) -> dict[str, Any]:
        """The JSON form (``fleetwright simulate -o json``); ``needed``: the lower bound's nodes needed."""
        if self.bound:
            return {
                "policy": self.policy,
                "dollars": {"instances": round(self.instance_dollars, 6)},
                "nodeHours": round(self.node_hours, 4),
                "peakNodes": round(self.peak_nodes, 2),
                "nodesNeeded": self.nodes_needed,
                "approximate": self.approximate,
            }
        per_needed = self.launches_per_node_needed(needed)
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
            "launchesPerNodeNeeded": None if per_needed is None else round(per_needed, 3),
            "launchesNeverUsed": self.unused,
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
        series=timeline(outcome.instances, start, outcome.duration, region),
        unused=sum(1 for i in outcome.instances if node_name(i.id) not in outcome.used_nodes),
    )


def needed_of(rows: Sequence[Figures]) -> int | None:
    """The lower bound's nodes needed, when the rows have the bound."""
    return next((r.nodes_needed for r in rows if r.bound), None)


def render_table(rows: Sequence[Figures], duration: float) -> str:
    """The policies side by side, one column each."""
    header = ["", *(r.policy for r in rows)]
    needed = needed_of(rows)

    def cell(row: Figures, value: str) -> str:
        return "-" if row.bound else value

    def per_needed(row: Figures) -> str:
        if row.bound:
            return f"{'~' if row.approximate else ''}{row.nodes_needed} needed"
        ratio = row.launches_per_node_needed(needed)
        return "-" if ratio is None else f"{ratio:.2f}"

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
    if needed is not None:
        lines.append(["launches / node needed", *(per_needed(r) for r in rows)])
    lines.append(["launches never used", *(cell(r, str(r.unused)) for r in rows)])
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
    needed = needed_of(rows)
    policies = [r.as_json(needed) for r in rows]
    return {"durationSeconds": duration, "policies": policies, "notes": dict(notes)}
