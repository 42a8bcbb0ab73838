"""The CloudWatch metrics the controller functions publish, as the dashboard and the alarms read them.

The functions write EMF through Powertools in namespace ``Fleetwright``. Each function's environment sets
``POWERTOOLS_SERVICE_NAME`` to its handler's ``SERVICE``, so every data point carries a ``service``
dimension next to its own (``NodePool``, ``InstanceType``, ``Kind``...). Metrics with their own dimensions
are read with CloudWatch Metrics Insights queries (``SELECT ... GROUP BY``), which need no list of
dimension values: a NodePool or instance type that appears later is graphed without a redeploy.

The metric names come from the layer (``fleetwright.observability.metrics``,
``fleetwright.interruption.controller``, ``fleetwright.termination.steps``,
``fleetwright.disruption.metrics``, and the modules that define their own), so a renamed metric cannot
leave an empty graph behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from fleetwright.aws.failures import UNAVAILABLE_OFFERING_CODES
from fleetwright.claims import nodeclaim_objects, registration, static_limits
from fleetwright.disruption import deletion
from fleetwright.disruption import metrics as disruption
from fleetwright.interruption import controller as interruption
from fleetwright.kube import events
from fleetwright.observability import limits
from fleetwright.observability import metrics as provisioning
from fleetwright.observability.metrics import COUNT, MILLISECONDS, NONE, SECONDS, series_key
from fleetwright.provisioning import nodepool_source, nodepool_status
from fleetwright.termination import steps as termination

NAMESPACE = "Fleetwright"
# Powertools service names: the SERVICE constant of each handler in functions/.
PROVISIONER_SERVICE = "fleetwright-provisioner"
INTERRUPTION_SERVICE = "fleetwright-interruption"
TERMINATION_SERVICE = "fleetwright-termination"
DISRUPTION_SERVICE = disruption.SERVICE

# Metric names, re-exported for the dashboard and the tests.
PENDING_PODS = provisioning.PENDING_PODS
BATCH_SIZE = provisioning.BATCH_SIZE
UNSCHEDULABLE_PODS = provisioning.UNSCHEDULABLE_PODS
CLAIMS_LAUNCHED = provisioning.CLAIMS_LAUNCHED
LAUNCH_ERRORS = provisioning.LAUNCH_ERRORS
INSUFFICIENT_CAPACITY_RECOVERED = provisioning.INSUFFICIENT_CAPACITY_RECOVERED
HOURLY_COST_LAUNCHED = provisioning.HOURLY_COST_LAUNCHED
NODES_REGISTERED = provisioning.NODES_REGISTERED
NODES_INITIALIZED = provisioning.NODES_INITIALIZED
NODE_STARTUP_DURATION = provisioning.NODE_STARTUP_DURATION
REGISTRATION_TIMEOUTS = provisioning.REGISTRATION_TIMEOUTS
LAUNCH_RATE_CAPPED = provisioning.LAUNCH_RATE_CAPPED
REGISTRATION_BREAKER_OPENED = provisioning.REGISTRATION_BREAKER_OPENED
REGISTRATION_BREAKER_HELD = provisioning.REGISTRATION_BREAKER_HELD
PROVISIONING_ERRORS = provisioning.PASS_ERRORS
LEASE_LOST = provisioning.LEASE_LOST
SCHEDULING_DURATION = provisioning.SCHEDULING_DURATION
# How close an invocation came to its Lambda timeout and memory (provisioner and disruption).
DURATION_OF_TIMEOUT = limits.DURATION_OF_TIMEOUT
MEMORY_OF_LIMIT = limits.MEMORY_OF_LIMIT
LIMIT_ALARM_FRACTION = limits.WARNING_FRACTION
NO_NODEPOOLS = nodepool_source.NO_NODEPOOLS
INVALID_KARPENTER_OBJECTS = nodepool_source.INVALID_KARPENTER_OBJECTS
NODEPOOL_READ_ERRORS = nodepool_source.NODEPOOL_READ_ERRORS
STATUS_WRITE_ERRORS = nodepool_status.STATUS_WRITE_ERRORS
NODECLAIM_SYNC_ERRORS = nodeclaim_objects.SYNC_ERRORS
NODE_SYNC_ERRORS = registration.NODE_SYNC_ERRORS
EVENTS_NOT_RECORDED = events.EVENTS_NOT_RECORDED
INTERRUPTION_EVENTS = interruption.EVENTS_RECEIVED
INTERRUPTION_EVENTS_IGNORED = interruption.EVENTS_IGNORED
DUPLICATE_EVENTS = interruption.DUPLICATE_EVENTS
REBALANCE_RECOMMENDATIONS = interruption.REBALANCE_RECOMMENDATIONS
NODES_CLEANED_UP = interruption.NODES_CLEANED_UP
INTERRUPTIONS_IN_PROGRESS = interruption.IN_PROGRESS
INTERRUPTION_ATTEMPTS_RETRIED = interruption.ATTEMPTS_RETRIED
INTERRUPTION_ATTEMPTS_EXHAUSTED = interruption.ATTEMPTS_EXHAUSTED
MESSAGES_REJECTED = interruption.MESSAGES_REJECTED
WORKFLOWS_STARTED = interruption.WORKFLOWS_STARTED
REPLACEMENT_CLAIMS = interruption.REPLACEMENT_CLAIMS
REPLACEMENT_ERRORS = interruption.REPLACEMENT_ERRORS
NODES_TERMINATED = termination.NODES_TERMINATED
PODS_EVICTED = termination.PODS_EVICTED
EVICTIONS_BLOCKED = termination.EVICTIONS_BLOCKED
PODS_DELETED_AT_DEADLINE = termination.PODS_DELETED_AT_DEADLINE
VOLUME_ATTACHMENTS_UNREADABLE = termination.VOLUME_ATTACHMENTS_UNREADABLE
STATIC_LIMIT_REACHED = static_limits.STATIC_LIMIT_REACHED
TERMINATION_FAILURES = termination.TERMINATION_FAILURES
DISRUPTIONS_CALLED_OFF = termination.DISRUPTIONS_CALLED_OFF
DRAIN_API_ERRORS = termination.DRAIN_API_ERRORS
WORKFLOW_CONTINUATIONS = termination.WORKFLOW_CONTINUATIONS
DISRUPTION_COMMANDS = disruption.DISRUPTION_COMMANDS
NODES_DISRUPTED = disruption.NODES_DISRUPTED
DISRUPTION_SAVINGS = disruption.DISRUPTION_SAVINGS
DISRUPTION_CANDIDATES = disruption.DISRUPTION_CANDIDATES
DISRUPTION_BLOCKED = disruption.DISRUPTION_BLOCKED
COMMANDS_INVALIDATED = disruption.COMMANDS_INVALIDATED
DECISION_DURATION = disruption.DECISION_DURATION
DISRUPTION_ERRORS = disruption.DISRUPTION_ERRORS
GARBAGE_COLLECTED = disruption.GARBAGE_COLLECTED
IMPOSTORS_SEEN = disruption.IMPOSTORS_SEEN
NODES_UNCORDONED_BY_SWEEP = disruption.NODES_UNCORDONED_BY_SWEEP
INTERRUPTIONS_REDRIVEN = disruption.INTERRUPTIONS_REDRIVEN
NODES_REPAIRED = disruption.NODES_REPAIRED
NODE_REPAIR_BLOCKED = disruption.NODE_REPAIR_BLOCKED
NODES_RETIRED = deletion.NODES_RETIRED
DELETION_RETRIES = deletion.DELETION_RETRIES
DELETION_ERRORS = deletion.DELETION_ERRORS
NODE_COUNT = disruption.NODE_COUNT
CLUSTER_HOURLY_COST = disruption.CLUSTER_HOURLY_COST
DISRUPTION_BLOCKED = disruption.DISRUPTION_BLOCKED

# Claims are launched, registered and synced by whichever function needs a node: the provisioner, and the
# disruption and interruption functions for replacements.
CLAIM_SERVICES = (PROVISIONER_SERVICE, DISRUPTION_SERVICE, INTERRUPTION_SERVICE)
ALL_SERVICES = (*CLAIM_SERVICES, TERMINATION_SERVICE)
SCHEDULED_SERVICES = (PROVISIONER_SERVICE, DISRUPTION_SERVICE)
POOL = ("NodePool",)
CAPACITY = ("CapacityType",)
# The gauges of Fleetwright's nodes: a total, one series per NodePool and one per capacity type.
NODE_SPLITS = ((), POOL, CAPACITY)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric the functions write: its unit, the sets of dimensions of its own it is written with
    (each a sorted tuple; ``()`` for the series with only ``service``), the services that write it, and
    whether every scheduled pass writes it (``every_pass``: billed every month even on an idle cluster;
    the others are written when something happens, and CloudWatch bills a series only for the hours it is
    written in)."""

    name: str
    unit: str
    dimension_sets: tuple[tuple[str, ...], ...]
    services: tuple[str, ...]
    every_pass: bool = False


def _spec(
    name: str, services: str | tuple[str, ...], *dimensions: str, unit: str = COUNT, every_pass: bool = False
) -> MetricSpec:
    """A metric written with one set of dimensions."""
    services = (services,) if isinstance(services, str) else services
    return MetricSpec(name, unit, (tuple(sorted(dimensions)),), services, every_pass)


# Every metric the code writes, with the dimensions it writes it with: tests/infra/test_metric_catalog.py
# reads every ``metrics.add`` call of the layer and checks this list against them, and the dashboard, the
# alarms and examples/grafana/ may graph only what is listed here (docs/metrics.md).
CATALOG: tuple[MetricSpec, ...] = (
    # Provisioning (docs/provisioner.md)
    _spec(PENDING_PODS, PROVISIONER_SERVICE, every_pass=True),
    _spec(BATCH_SIZE, PROVISIONER_SERVICE),
    _spec(SCHEDULING_DURATION, PROVISIONER_SERVICE, unit=MILLISECONDS),
    _spec(UNSCHEDULABLE_PODS, PROVISIONER_SERVICE),
    _spec(NO_NODEPOOLS, PROVISIONER_SERVICE),
    _spec(NODEPOOL_READ_ERRORS, PROVISIONER_SERVICE),
    _spec(INVALID_KARPENTER_OBJECTS, PROVISIONER_SERVICE, "Kind"),
    _spec(STATUS_WRITE_ERRORS, PROVISIONER_SERVICE, "Kind"),
    # Claims: launches, registration, NodeClaim objects (any function that launches)
    _spec(PROVISIONING_ERRORS, CLAIM_SERVICES),
    _spec(LEASE_LOST, CLAIM_SERVICES),
    _spec(CLAIMS_LAUNCHED, CLAIM_SERVICES, "CapacityType", "InstanceType", "NodePool"),
    _spec(HOURLY_COST_LAUNCHED, CLAIM_SERVICES, *POOL, unit=NONE),
    _spec(INSUFFICIENT_CAPACITY_RECOVERED, CLAIM_SERVICES, *POOL),
    _spec(LAUNCH_ERRORS, CLAIM_SERVICES, "ErrorCode", "NodePool"),
    _spec(NODES_REGISTERED, CLAIM_SERVICES, *POOL),
    _spec(NODES_INITIALIZED, CLAIM_SERVICES, *POOL),
    _spec(NODE_STARTUP_DURATION, CLAIM_SERVICES, *POOL, unit=SECONDS),
    _spec(REGISTRATION_TIMEOUTS, CLAIM_SERVICES, *POOL),
    _spec(LAUNCH_RATE_CAPPED, CLAIM_SERVICES),
    _spec(REGISTRATION_BREAKER_OPENED, CLAIM_SERVICES, *POOL),
    _spec(REGISTRATION_BREAKER_HELD, CLAIM_SERVICES, *POOL),
    _spec(NODE_SYNC_ERRORS, CLAIM_SERVICES),
    _spec(NODECLAIM_SYNC_ERRORS, CLAIM_SERVICES, "Operation"),
    _spec(STATIC_LIMIT_REACHED, CLAIM_SERVICES, *POOL),
    _spec(EVENTS_NOT_RECORDED, ALL_SERVICES, "Reason"),
    # How close a scheduled invocation came to its Lambda limits
    _spec(DURATION_OF_TIMEOUT, SCHEDULED_SERVICES, unit=NONE, every_pass=True),
    _spec(MEMORY_OF_LIMIT, SCHEDULED_SERVICES, unit=NONE, every_pass=True),
    # Interruptions (docs/termination.md)
    _spec(INTERRUPTION_EVENTS, INTERRUPTION_SERVICE, "Kind"),
    _spec(INTERRUPTION_EVENTS_IGNORED, INTERRUPTION_SERVICE, "Reason"),
    _spec(MESSAGES_REJECTED, INTERRUPTION_SERVICE, "Reason"),
    _spec(DUPLICATE_EVENTS, INTERRUPTION_SERVICE),
    _spec(REBALANCE_RECOMMENDATIONS, INTERRUPTION_SERVICE),
    _spec(NODES_CLEANED_UP, INTERRUPTION_SERVICE, "State"),
    _spec(INTERRUPTIONS_IN_PROGRESS, INTERRUPTION_SERVICE, "Kind"),
    _spec(INTERRUPTION_ATTEMPTS_RETRIED, INTERRUPTION_SERVICE, "Kind"),
    _spec(INTERRUPTION_ATTEMPTS_EXHAUSTED, INTERRUPTION_SERVICE, "Kind"),
    _spec(WORKFLOWS_STARTED, INTERRUPTION_SERVICE, "Reason"),
    _spec(REPLACEMENT_CLAIMS, INTERRUPTION_SERVICE),
    _spec(REPLACEMENT_ERRORS, INTERRUPTION_SERVICE),
    # The termination workflow's steps
    _spec(NODES_TERMINATED, TERMINATION_SERVICE, "Reason"),
    _spec(DISRUPTIONS_CALLED_OFF, TERMINATION_SERVICE, "Reason"),
    _spec(PODS_EVICTED, TERMINATION_SERVICE),
    _spec(EVICTIONS_BLOCKED, TERMINATION_SERVICE),
    _spec(PODS_DELETED_AT_DEADLINE, TERMINATION_SERVICE),
    _spec(VOLUME_ATTACHMENTS_UNREADABLE, TERMINATION_SERVICE),
    _spec(DRAIN_API_ERRORS, TERMINATION_SERVICE),
    _spec(WORKFLOW_CONTINUATIONS, TERMINATION_SERVICE),
    _spec(TERMINATION_FAILURES, TERMINATION_SERVICE),
    # Disruption (docs/disruption.md)
    MetricSpec(NODE_COUNT, COUNT, NODE_SPLITS, (DISRUPTION_SERVICE,), every_pass=True),
    MetricSpec(CLUSTER_HOURLY_COST, NONE, NODE_SPLITS, (DISRUPTION_SERVICE,), every_pass=True),
    _spec(DISRUPTION_CANDIDATES, DISRUPTION_SERVICE, every_pass=True),
    _spec(DECISION_DURATION, DISRUPTION_SERVICE, unit=MILLISECONDS, every_pass=True),
    _spec(DISRUPTION_COMMANDS, DISRUPTION_SERVICE, "Method"),
    _spec(DISRUPTION_SAVINGS, DISRUPTION_SERVICE, "Method", unit=NONE),
    _spec(COMMANDS_INVALIDATED, DISRUPTION_SERVICE, "Method"),
    _spec(DISRUPTION_BLOCKED, DISRUPTION_SERVICE, "Why"),
    _spec(NODES_DISRUPTED, DISRUPTION_SERVICE, "Reason"),
    _spec(NODES_REPAIRED, DISRUPTION_SERVICE, "Condition", "NodePool"),
    _spec(NODE_REPAIR_BLOCKED, DISRUPTION_SERVICE, *POOL),
    _spec(DISRUPTION_ERRORS, DISRUPTION_SERVICE, "Stage"),
    _spec(GARBAGE_COLLECTED, DISRUPTION_SERVICE, "Kind"),
    _spec(IMPOSTORS_SEEN, DISRUPTION_SERVICE, "Kind"),
    _spec(NODES_UNCORDONED_BY_SWEEP, DISRUPTION_SERVICE),
    _spec(INTERRUPTIONS_REDRIVEN, DISRUPTION_SERVICE, "Kind"),
    _spec(NODES_RETIRED, DISRUPTION_SERVICE, "Reason"),
    _spec(DELETION_RETRIES, DISRUPTION_SERVICE),
    _spec(DELETION_ERRORS, DISRUPTION_SERVICE),
)
BY_NAME = {spec.name: spec for spec in CATALOG}

# The custom metrics the stack's alarms read, by monitoring level (infra.settings.Monitoring). The essential
# ones are written only when something fails or launches, so an idle cluster publishes none of them.
ESSENTIAL_ALARM_METRICS = (
    PROVISIONING_ERRORS,
    REGISTRATION_TIMEOUTS,
    CLAIMS_LAUNCHED,
    TERMINATION_FAILURES,
    DISRUPTION_ERRORS,
    MESSAGES_REJECTED,
)
# Instances tagged as the cluster's by hand put no node at risk (the collector keeps them), so only the
# levels above essential alarm on them. The near-limit alarms' metrics are written by every scheduled
# invocation.
ALARM_METRICS = (*ESSENTIAL_ALARM_METRICS, IMPOSTORS_SEEN, DURATION_OF_TIMEOUT, MEMORY_OF_LIMIT)

# What each monitoring level (infra.settings.Monitoring, by value) leaves out
# (``FLEETWRIGHT_WITHHELD_METRICS``, entries as ``fleetwright.observability.metrics.series_key`` writes
# them): only series written by every
# pass cost an idle cluster anything, so only those are chosen. ``alarms`` (the default when watching)
# drops two diagnostics of the disruption pass; ``essential`` (economy) also the near-limit metrics (its
# dashboard reads Lambda's own Duration and the REPORT lines' memory instead) and the per-NodePool and
# per-capacity-type series of the node count and cost, keeping their totals.
WITHHELD: dict[str, tuple[str, ...]] = {
    "full": (),
    "alarms": (DECISION_DURATION, DISRUPTION_CANDIDATES),
    "essential": (
        DECISION_DURATION,
        DISRUPTION_CANDIDATES,
        DURATION_OF_TIMEOUT,
        MEMORY_OF_LIMIT,
        *(
            series_key(name, split)
            for name in (NODE_COUNT, CLUSTER_HOURLY_COST)
            for split in (POOL, CAPACITY)
        ),
    ),
}


def published(level: str, name: str, dimensions: tuple[str, ...] | None = None) -> bool:
    """Whether the functions write ``name`` at monitoring ``level``: its series with exactly ``dimensions``
    of its own, or (None) all of its series."""
    withheld = WITHHELD[level]
    if name in withheld:
        return False
    if dimensions is None:
        return not any(entry.startswith(name + "{") for entry in withheld)
    return series_key(name, dimensions) not in withheld


def idle_series(level: str) -> list[str]:
    """The series an idle cluster writes every month at ``level`` (each billed as one custom metric per
    service writing it): those written by every pass, without their per-NodePool split (no nodes)."""
    return [
        f"{service}/{series_key(spec.name)}"
        for spec in CATALOG
        if spec.every_pass and published(level, spec.name, ())
        for service in spec.services
    ]


MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)

# EC2 error codes that mean "no capacity for this offering now" (the provider falls back on them).
CAPACITY_ERROR_CODES = tuple(sorted(UNAVAILABLE_OFFERING_CODES))


def metric(
    name: str, service: str, *, statistic: str = "Sum", period: Duration = MINUTE
) -> cloudwatch.Metric:
    """A metric published without dimensions of its own (only ``service``)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
    )


def insights(
    name: str,
    service: str | None,
    *,
    group_by: str | None = None,
    where: str = "",
    function: str = "SUM",
    period: Duration = FIVE_MINUTES,
    label: str | None = None,
    dimensioned_only: bool = False,
) -> cloudwatch.MathExpression:
    """A Metrics Insights query over every series of ``name`` from ``service`` (None: from every function),
    one line per ``group_by`` value (or one line in all); ``where`` adds a condition (``ErrorCode IN (...)``).

    ``dimensioned_only`` leaves out the series without the ``group_by`` dimension (a metric also published
    as a total, like ``NodeCount``), which Metrics Insights would otherwise show as a group "Other"."""
    source = f"SCHEMA({NAMESPACE}, {group_by}, service)" if dimensioned_only and group_by else NAMESPACE
    conditions = [f"service = '{service}'"] if service is not None else []
    if where:
        conditions.append(where)
    query = f"SELECT {function}({name}) FROM {source}"
    if conditions:
        query += " WHERE " + " AND ".join(conditions)
    if group_by:
        query += f" GROUP BY {group_by}"
    # An empty label lets CloudWatch name each line by its GROUP BY value.
    return cloudwatch.MathExpression(
        expression=query, period=period, label=label if label is not None else ("" if group_by else name)
    )


def capacity_errors_condition() -> str:
    """The Metrics Insights condition selecting launch errors that are capacity errors."""
    return "ErrorCode IN (" + ", ".join(f"'{code}'" for code in CAPACITY_ERROR_CODES) + ")"
