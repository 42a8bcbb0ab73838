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
from fleetwright.provisioning import nodepool_source
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
REGISTRATION_TIMEOUTS = provisioning.REGISTRATION_TIMEOUTS
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
NODES_UNCORDONED_BY_SWEEP = disruption.NODES_UNCORDONED_BY_SWEEP
INTERRUPTIONS_REDRIVEN = disruption.INTERRUPTIONS_REDRIVEN
NODES_REPAIRED = disruption.NODES_REPAIRED
NODE_REPAIR_BLOCKED = disruption.NODE_REPAIR_BLOCKED
NODES_RETIRED = deletion.NODES_RETIRED
DELETION_RETRIES = deletion.DELETION_RETRIES
DELETION_ERRORS = deletion.DELETION_ERRORS
NODE_COUNT = disruption.NODE_COUNT
CLUSTER_HOURLY_COST = disruption.CLUSTER_HOURLY_COST

# The custom metrics the stack's alarms read, by monitoring level (infra.settings.Monitoring): below
# ``full`` the built-in functions publish only these (``FLEETWRIGHT_PUBLISHED_METRICS``). The essential
# ones are written only when something fails, so an idle cluster publishes none of them.
ESSENTIAL_ALARM_METRICS = (
    PROVISIONING_ERRORS,
    REGISTRATION_TIMEOUTS,
    TERMINATION_FAILURES,
    DISRUPTION_ERRORS,
    MESSAGES_REJECTED,
)
# The near-limit alarms' metrics are written by every scheduled invocation.
ALARM_METRICS = (*ESSENTIAL_ALARM_METRICS, DURATION_OF_TIMEOUT, MEMORY_OF_LIMIT)

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
    service: str,
    *,
    group_by: str | None = None,
    where: str = "",
    function: str = "SUM",
    period: Duration = FIVE_MINUTES,
    label: str | None = None,
    dimensioned_only: bool = False,
) -> cloudwatch.MathExpression:
    """A Metrics Insights query over every series of ``name`` from ``service``, one line per
    ``group_by`` value (or one line in all); ``where`` adds a condition (``ErrorCode IN (...)``).

    ``dimensioned_only`` leaves out the series without the ``group_by`` dimension (a metric also published
    as a total, like ``NodeCount``), which Metrics Insights would otherwise show as a group "Other"."""
    source = f"SCHEMA({NAMESPACE}, {group_by}, service)" if dimensioned_only and group_by else NAMESPACE
    query = f"SELECT {function}({name}) FROM {source} WHERE service = '{service}'"
    if where:
        query += f" AND {where}"
    if group_by:
        query += f" GROUP BY {group_by}"
    # An empty label lets CloudWatch name each line by its GROUP BY value.
    return cloudwatch.MathExpression(
        expression=query, period=period, label=label if label is not None else ("" if group_by else name)
    )


def capacity_errors_condition() -> str:
    """The Metrics Insights condition selecting launch errors that are capacity errors."""
    return "ErrorCode IN (" + ", ".join(f"'{code}'" for code in CAPACITY_ERROR_CODES) + ")"
