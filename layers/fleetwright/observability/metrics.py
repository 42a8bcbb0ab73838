"""Metrics and tracing seams: the provisioner reports through small interfaces so the Lambda handler can
plug in Powertools (EMF metrics, X-Ray) and tests or the local demo can record or ignore them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# Metric names (CloudWatch, namespace set by the handler; docs/provisioner.md lists them).
PENDING_PODS = "PendingPods"
BATCH_SIZE = "BatchSize"
CLAIMS_LAUNCHED = "NodeClaimsLaunched"
LAUNCH_ERRORS = "LaunchErrors"
SCHEDULING_DURATION = "SchedulingDuration"
HOURLY_COST_LAUNCHED = "HourlyCostLaunched"
NODES_REGISTERED = "NodesRegistered"
NODES_INITIALIZED = "NodesInitialized"
REGISTRATION_TIMEOUTS = "RegistrationTimeouts"
UNSCHEDULABLE_PODS = "UnschedulablePods"
PASS_ERRORS = "ProvisioningErrors"
# A launcher found its lease taken (fencing refused a write, or a renewal failed) and stopped.
LEASE_LOST = "LeaseLost"
# A claim launched after EC2 refused one of its offerings for capacity (or quota) in the same launch.
INSUFFICIENT_CAPACITY_RECOVERED = "InsufficientCapacityRecovered"

COUNT = "Count"
SECONDS = "Seconds"
MILLISECONDS = "Milliseconds"
NONE = "None"


class MetricsSink(Protocol):
    """Where metrics go. ``dimensions`` split a metric (e.g. by NodePool)."""

    def add(
        self, name: str, value: float, unit: str = COUNT, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Record one data point."""
        ...


class NullMetrics:
    """Discards metrics."""

    def add(
        self, name: str, value: float, unit: str = COUNT, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Discard the data point."""


@dataclass(frozen=True, slots=True)
class DataPoint:
    """One recorded metric."""

    name: str
    value: float
    unit: str
    dimensions: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class RecordingMetrics:
    """Keeps every data point in memory (tests, the local demo)."""

    points: list[DataPoint] = field(default_factory=list)

    def add(
        self, name: str, value: float, unit: str = COUNT, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Keep the data point."""
        self.points.append(DataPoint(name, value, unit, tuple(sorted((dimensions or {}).items()))))

    def total(self, name: str, **dimensions: str) -> float:
        """Sum of ``name``'s points whose dimensions include ``dimensions``."""
        return sum(
            p.value
            for p in self.points
            if p.name == name and all(dict(p.dimensions).get(k) == v for k, v in dimensions.items())
        )


class PowertoolsMetrics:
    """Powertools EMF metrics: undimensioned points go on the handler's ``Metrics`` object (flushed with
    the invocation); dimensioned ones are written at once with ``single_metric``, one EMF line each."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def add(
        self, name: str, value: float, unit: str = COUNT, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Record one data point."""
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        if not dimensions:
            self.metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)
            return
        with single_metric(
            name=name,
            unit=MetricUnit(unit),
            value=value,
            namespace=self.metrics.namespace,
            default_dimensions=dict(getattr(self.metrics, "default_dimensions", {}) or {}),
        ) as metric:
            for key, item in dimensions.items():
                metric.add_dimension(name=key, value=item or "-")


class Spans(Protocol):
    """Tracing: a named span around a step."""

    def span(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """A context manager timing ``name``."""
        ...


class NoSpans:
    """No tracing."""

    def span(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """A context manager that does nothing."""
        return contextlib.nullcontext()


class TracerSpans:
    """X-Ray subsegments through a Powertools ``Tracer``."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[Any]:
        """An X-Ray subsegment called ``name``."""
        with self.tracer.provider.in_subsegment(f"## {name}") as subsegment:
            yield subsegment
