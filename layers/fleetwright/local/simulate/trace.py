"""A workload trace: pods that start and end at given seconds, the input of ``fleetwright simulate``.

The CSV format (docs/simulate.md) is the interchange between the converters, the generator and the
replay; this module holds only the record types, so each side can be built and tested alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace


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

    def cut(self, until: float) -> Trace:
        """The trace's first ``until`` seconds: pods starting at or after ``until`` dropped, pods still
        running then left without an end (running when the trace ends), the duration ``until``. A cut at
        or past the duration gives the trace unchanged."""
        if not math.isfinite(until) or until <= 0:
            raise ValueError(f"cannot cut a trace at {until} s: give a positive number of seconds")
        if until >= self.duration:
            return self
        pods = tuple(
            pod if pod.end is not None and pod.end <= until else replace(pod, end=None)
            for pod in self.pods
            if pod.start < until
        )
        return Trace(pods, until)
