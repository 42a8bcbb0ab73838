"""What a trace asks for over time: pod count, peak concurrent requests and when (``fleetwright trace
info``; the figures docs/simulate.md quotes for the shipped traces)."""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright.local.simulate.trace import Trace
from fleetwright.model.quantity import CPU, MEMORY, format_resource, parse_resource


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """Totals and peaks of one trace (cpu in milli-cores, memory in bytes)."""

    pods: int
    owners: int
    duration: float
    running_at_start: int
    running_at_end: int
    peak_pods: int
    peak_pods_at: float
    peak_cpu: int
    peak_cpu_at: float
    peak_memory: int
    peak_gpu: int
    pod_hours: float

    def render(self) -> str:
        """A few lines for people."""
        return "\n".join(
            (
                f"pods            {self.pods} ({self.owners} owners)",
                f"duration        {self.duration / 3600:.2f} h",
                f"running         {self.running_at_start} at the start, {self.running_at_end} at the end",
                f"peak pods       {self.peak_pods} at {_clock(self.peak_pods_at)}",
                f"peak requests   cpu {self.peak_cpu / 1000:g} at {_clock(self.peak_cpu_at)}, "
                f"memory {format_resource(MEMORY, self.peak_memory)}, nvidia.com/gpu {self.peak_gpu}",
                f"pod-hours       {self.pod_hours:.0f}",
            )
        )


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def summarize(trace: Trace) -> TraceSummary:
    """Sweep the starts and ends once; a pod ending at a second no longer counts at that second."""
    events: list[tuple[float, int, int, int, int, int]] = []  # (time, order, pods, cpu, memory, gpu)
    pod_hours = 0.0
    for pod in trace.pods:
        cpu, memory = parse_resource(CPU, pod.cpu), parse_resource(MEMORY, pod.memory)
        events.append((pod.start, 1, 1, cpu, memory, pod.gpu))
        if pod.end is not None:
            events.append((pod.end, 0, -1, -cpu, -memory, -pod.gpu))
        pod_hours += ((pod.end if pod.end is not None else trace.duration) - pod.start) / 3600.0
    events.sort()
    now = [0, 0, 0, 0]
    peaks = [0, 0, 0, 0]
    peak_at = [0.0, 0.0]
    for at, _, *change in events:
        now = [a + b for a, b in zip(now, change, strict=True)]
        for index in range(4):
            if now[index] > peaks[index]:
                peaks[index] = now[index]
                if index < 2:
                    peak_at[index] = at
    return TraceSummary(
        pods=len(trace.pods),
        owners=len({pod.owner for pod in trace.pods if pod.owner}),
        duration=trace.duration,
        running_at_start=sum(1 for pod in trace.pods if pod.start == 0),
        running_at_end=sum(1 for pod in trace.pods if pod.end is None),
        peak_pods=peaks[0],
        peak_pods_at=peak_at[0],
        peak_cpu=peaks[1],
        peak_cpu_at=peak_at[1],
        peak_memory=peaks[2],
        peak_gpu=peaks[3],
        pod_hours=pod_hours,
    )
