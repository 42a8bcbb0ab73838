"""A workload trace: pods that start and end at given seconds, the input of ``fleetwright simulate``.

The CSV format (docs/simulate.md) is the interchange between the converters, the generator and the
replay; this module holds only the record types, so each side can be built and tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of a trace. ``start``/``end`` are seconds from the trace's start (``end`` None: still
    running when the trace ends); ``cpu``/``memory`` are Kubernetes quantities as written in the file;
    ``gpu`` a count of ``nvidia.com/gpu``; pods sharing an ``owner`` belong to one workload and share its
    labels."""

    name: str
    start: float
    end: float | None
    cpu: str
    memory: str
    gpu: int = 0
    owner: str = ""
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace's pods in start order, and how long it lasts (the last start or end)."""

    pods: tuple[TracePod, ...]
    duration: float
