"""Metrics and tracing seams: the provisioner reports through small interfaces so the Lambda handler can
plug in Powertools (EMF metrics, X-Ray) and tests or the local demo can record or ignore them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator, Mapping
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
# Seconds from a NodeClaim's creation (the launch decision) to its Node initialized: the wait a pod sees.
NODE_STARTUP_DURATION = "NodeStartupDuration"
REGISTRATION_TIMEOUTS = "RegistrationTimeouts"
UNSCHEDULABLE_PODS = "UnschedulablePods"
PASS_ERRORS = "ProvisioningErrors"
# A launcher found its lease taken (fencing refused a write, or a renewal failed) and stopped.
LEASE_LOST = "LeaseLost"
# A claim launched after EC2 refused one of its offerings for capacity (or quota) in the same launch.
INSUFFICIENT_CAPACITY_RECOVERED = "InsufficientCapacityRecovered"
# Claims not launched because the cluster-wide launch-rate cap was reached (or its record could not be
# updated: the cap fails closed).
LAUNCH_RATE_CAPPED = "LaunchRateCapped"
# A NodePool's registration breaker opened (dimension NodePool), and claims it held back (dimension NodePool).
REGISTRATION_BREAKER_OPENED = "RegistrationBreakerOpened"
REGISTRATION_BREAKER_HELD = "RegistrationBreakerHeld"

# Series the handlers leave out (comma-separated): ``Name`` withholds every series of a metric, ``Name{A+B}``
# only the one with exactly those dimensions of its own (``Name{}``: the one without). The stack sets it per
# monitoring level (docs/cost.md): a series written every pass costs $0.30 a month.
ENV_WITHHELD_METRICS = "FLEETWRIGHT_WITHHELD_METRICS"

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


def series_key(name: str, dimensions: Collection[str] = ()) -> str:
    """``Name{A+B}``: how ``FLEETWRIGHT_WITHHELD_METRICS`` names one series of a metric (its own dimensions,
    sorted; the ``service`` dimension every point carries is not one of them)."""
    return name + "{" + "+".join(sorted(dimensions)) + "}"


def withheld_metrics(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The metric names and series (:func:`series_key`) ``FLEETWRIGHT_WITHHELD_METRICS`` leaves out."""
    raw = (os.environ if environ is None else environ).get(ENV_WITHHELD_METRICS, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


class PowertoolsMetrics:
    """Powertools EMF metrics: undimensioned points go on the handler's ``Metrics`` object (flushed with
    the invocation); dimensioned ones are written at once with ``single_metric``, one EMF line each. Names
    and series in ``withheld`` (default: :func:`withheld_metrics`) are dropped."""

    def __init__(self, metrics: Any, withheld: Collection[str] | None = None) -> None:
        self.metrics = metrics
        self.withheld = frozenset(withheld if withheld is not None else withheld_metrics())

    def add(
        self, name: str, value: float, unit: str = COUNT, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Record one data point (dropped when ``withheld`` names the metric or this series of it)."""
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        if self.withheld and (name in self.withheld or series_key(name, dimensions or ()) in self.withheld):
            return
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
