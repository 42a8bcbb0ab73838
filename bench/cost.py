"""Fleetwright's own monthly AWS bill, computed from its configuration and measured pass durations.

Usage: python bench/cost.py [--markdown]

Prints, for an idle cluster and for 100 / 1,000 / 10,000 nodes, in the default watching mode and in
economy mode, the monthly cost per service. Prices: AWS's public price pages for us-east-1 (arm64 Lambda,
Step Functions Standard, DynamoDB on-demand, SQS standard, CloudWatch), read 2026-11-24; free tiers are
not subtracted (an account uses them for other things too), except CloudWatch's three free dashboards of up
to 50 metrics: the default dashboard fits one, and a line shows the bill of an account that has used them
up. Every input is a named constant below, with where it comes from, so changing one (memory, schedule,
how long the provisioner watches) shows its effect.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

# --- prices (us-east-1, USD; read 2026-11-24) ------------------------------------------------------------
# https://aws.amazon.com/lambda/pricing/ (Arm, first 7.5 billion GB-seconds a month)
LAMBDA_GB_SECOND = 0.0000133334
LAMBDA_REQUEST = 0.20 / 1e6
# https://aws.amazon.com/step-functions/pricing/ (Standard workflows)
STATE_TRANSITION = 0.025 / 1000
# https://aws.amazon.com/dynamodb/pricing/on-demand/
DYNAMODB_WRITE = 0.625 / 1e6  # per write request unit
DYNAMODB_READ = 0.125 / 1e6  # per read request unit
DYNAMODB_GB_MONTH = 0.25
# https://aws.amazon.com/sqs/pricing/ (standard queue)
SQS_REQUEST = 0.40 / 1e6
# https://aws.amazon.com/cloudwatch/pricing/
LOGS_INGESTED_GB = 0.50
LOGS_STORED_GB_MONTH = 0.03
CUSTOM_METRIC_MONTH = 0.30  # first 10,000 metrics
ALARM_METRIC_MONTH = 0.10  # standard resolution, per metric an alarm reads
DASHBOARD_MONTH = 3.00  # beyond the account's first three (free: up to 50 metrics each)
# EventBridge: events of AWS services (EC2 and Health, the interruption rules) are free; the two
# schedule rules invoke their targets without an event charge (https://aws.amazon.com/eventbridge/pricing/).

MINUTES_PER_MONTH = 730 * 60  # AWS's 730-hour month
DAYS_PER_MONTH = 730 / 24

# --- what the stack deploys (infra/) -----------------------------------------------------------------------
SCHEDULE_SECONDS = 60  # both schedules: rate(1 minute)
DEADLINE_MARGIN_SECONDS = 10  # the watching provisioner stops this long before its timeout
LOG_RETENTION_MONTHS = 1


@dataclass(frozen=True)
class MonitoringLevel:
    """What one ``monitoring`` level (infra/settings.py, ``Monitoring``) deploys and publishes."""

    alarm_metrics: int  # metrics the alarms read (counted in the synthesized templates)
    # Series written every minute by an idle cluster (infra/controller_metrics.py, ``idle_series``).
    idle_metrics: int
    # Whether the dashboard fits a free one (at most 50 metrics: the overview alone).
    dashboard_in_free_tier: bool
    # Whether the node count and cost are also written per NodePool and per capacity type.
    node_splits: bool = True
    dashboards: int = 1


# Checked against the synthesized templates and infra/controller_metrics.py by
# tests/infra/test_cost_options.py.
MONITORING = {
    # 14 alarms reading 19 metrics (the workflow-execution alarm 3, the dead-letter alarm 2 with the rules'
    # delivery dead-letter queue, the near-limit ones 2 each). Idle series: the provisioner's PendingPods,
    # DurationOfTimeout, MemoryOfLimit; the disruption function's NodeCount and ClusterHourlyCost totals,
    # DisruptionCandidates, DisruptionDecisionDuration, DurationOfTimeout, MemoryOfLimit. The dashboard's
    # detailed sections take it past 50 metrics.
    "full": MonitoringLevel(alarm_metrics=19, idle_metrics=9, dashboard_in_free_tier=False),
    # The same alarms; the two diagnostics of the disruption pass left out.
    "alarms": MonitoringLevel(alarm_metrics=19, idle_metrics=7, dashboard_in_free_tier=True),
    # 11 alarms reading 14 metrics (not the near-limit ones nor ImpostorsSeen), none written by an idle
    # cluster; idle series: PendingPods and the NodeCount and ClusterHourlyCost totals.
    "essential": MonitoringLevel(
        alarm_metrics=14, idle_metrics=3, dashboard_in_free_tier=True, node_splits=False
    ),
}
# With nodes: NodeCount and ClusterHourlyCost per NodePool (one) and per capacity type (on-demand, spot).
SPLIT_SERIES = 2 * (1 + 2)
# Series written on launches and removals (NodeClaimsLaunched, HourlyCostLaunched, NodesRegistered,
# NodesInitialized, NodeStartupDuration, NodesDisrupted, DisruptionCommands, DisruptionSavingsPerHour,
# NodesTerminated, PodsEvicted, TerminationWorkflowsStarted), besides one per instance type launched.
EVENT_SERIES = 11
# SQS: Lambda's event source mapping long-polls (20 s) the interruption queue with 5 pollers when idle.
SQS_POLLERS = 5
SQS_LONG_POLL_SECONDS = 20

# --- measured or estimated per pass (docs/performance.md) -----------------------------------------------
# An invocation's fixed part (start, lease, summary, metrics), seconds, either function; on top of it each
# Cluster adds its warm pass's own time as bench/scale.py measures it (the cluster cache kept from the
# invocation before, stand-ins' time excluded).
PROVISIONER_IDLE_PASS = 0.3
DISRUPTION_IDLE_PASS = 0.3


@dataclass(frozen=True)
class Cluster:
    """A cluster size and how busy it is."""

    name: str
    nodes: int
    pods_per_node: int = 10
    node_churn_per_day: float = 0.10  # share of the nodes replaced a day (launched and removed)
    # Warm passes' own time, seconds (docs/performance.md, Large clusters): the economy-mode provisioner's
    # with nothing pending, and the disruption pass (read, plan, sweep, garbage collection).
    provisioner_pass_seconds: float = 0.0
    disruption_pass_seconds: float = 0.0
    # The memory docs/performance.md's sizing table gives the scheduled functions for this size (MB): a
    # deployment's smaller default is raised to it (functionSizes).
    sized_memory_mb: int = 0


CLUSTERS = (
    Cluster("idle (0 nodes)", 0),
    # bench/scale.py --pending 0, 2026-11-24: 100 nodes 0.01 s / 0.25 s, 1,000 nodes 0.05 s / 0.45 s.
    Cluster("100 nodes", 100, provisioner_pass_seconds=0.01, disruption_pass_seconds=0.25),
    Cluster(
        "1,000 nodes", 1000, provisioner_pass_seconds=0.05, disruption_pass_seconds=0.45, sized_memory_mb=1024
    ),
    # --nodes 10000 --pending 100: the provisioner's read + plan with 100 pods to place (1.3-1.6 s; less
    # with none), the disruption pass 2.4-2.5 s. Memory: the sizing table's 10,000-node row.
    Cluster(
        "10,000 nodes",
        10000,
        provisioner_pass_seconds=1.6,
        disruption_pass_seconds=2.5,
        sized_memory_mb=2048,
    ),
)


@dataclass(frozen=True)
class Deployment:
    """The settings that move the bill (the defaults of infra/autoscaler.py)."""

    name: str
    economy: bool = False
    provisioner_memory_mb: int = 512
    disruption_memory_mb: int = 1024
    event_memory_mb: int = 512  # interruption handler and termination steps
    provisioner_timeout: int = 60
    monitoring: str = "alarms"  # "essential" by default in economy mode
    # Whether the account's three free dashboards have room for Fleetwright's (docs/cost.md).
    free_dashboard: bool = True


WATCHING = Deployment("watching (default)")
ECONOMY = Deployment("economy", economy=True, monitoring="essential")

# Transitions of infra/termination_workflow.py for one node removed: Resumed?, Cordon, ReplacementWanted?,
# Drain, Drained?, Terminate, InstanceGone?, WaitForShutdown, CheckInstance, InstanceGone?, DeleteNode,
# FinalizeClaim, Terminated = 13; each further drain pass adds WaitBetweenPasses, Drain, Drained? (3)
# and each further shutdown poll WaitForShutdown, CheckInstance, InstanceGone? (3).
BASE_TRANSITIONS = 13
DRAIN_PASSES = 3  # a node with pods: evict, then two passes until they are gone
SHUTDOWN_POLLS = 8  # EC2 takes ~40 s to terminate; pollSeconds 5
TRANSITIONS_PER_REMOVAL = BASE_TRANSITIONS + 3 * (DRAIN_PASSES - 1) + 3 * (SHUTDOWN_POLLS - 1)
STEP_INVOCATIONS_PER_REMOVAL = 1 + DRAIN_PASSES + 1 + SHUTDOWN_POLLS + 2  # Cordon, Drain, Terminate, ...
STEP_SECONDS = 0.3  # one step (a few Kubernetes and EC2 calls), warm

# DynamoDB (docs/state.md). A pass takes and gives back the lease: two conditional writes and a read.
LEASE_WRITES_PER_PASS = 2
LEASE_READS_PER_PASS = 1
# Every pass that reads the claims (the provisioner's, every 5 s when watching, and the disruption pass)
# first reads the claim revision: a strongly consistent GetItem of an item under 4 KB, 1 read unit. Only
# when another process's write moved it does that process Query every record again (strongly consistent:
# 1 read unit per 4 KB read; its own writes it applies to the records it keeps), and once after each cold
# start.
REVISION_READS_PER_PASS = 1
COLD_STARTS_PER_DAY = 12  # per scheduled function: an execution environment lives a few hours (estimate)
# A claim record lists its candidate instance types (``instanceTypes``), most of its size, at most the 60
# cheapest (what one launch offers EC2): 1.5-2 KB measured for a claim of 60 candidates and one pod.
CLAIM_RECORD_KB = 2.0
SMALL_ITEM_KB = 1.0  # the claim revision, the lease
# Every claim write is a TransactWriteItems with the revision's increment (and, for a launcher's writes,
# the lease's ConditionCheck); a transactional write costs 2 write units per KB of each item, every item of
# the transaction counted (https://aws.amazon.com/dynamodb/pricing/on-demand/); an update counts the
# record's full size.
TRANSACTIONAL_WRITE_UNITS = 2
# A launch (the provisioner): recorded and launched under the lease's fence, registered by reconciliation
# (unfenced). A removal (the termination workflow): 3 unfenced writes. True: fenced.
LAUNCH_CLAIM_WRITES = (True, True, False)
REMOVAL_CLAIM_WRITES = (False, False, False)
LAUNCH_CLAIM_READS = 2  # consistent GetItems of the record
# The bounds on a runaway (docs/provisioner.md, *Bounded blast radius*): a launching pass reads and rewrites
# the launch-rate count (a GetItem and a conditional PutItem of a small item) and Queries the breakers,
# counted per launch (at most one launching pass per launch); the NodePools' status reads the breakers
# at most once a minute, eventually consistent (half a read unit).
LAUNCH_GUARD_WRITES = 1
LAUNCH_GUARD_READS = 2
STATUS_BREAKER_READS_PER_INVOCATION = 0.5


def monthly(deployment: Deployment, cluster: Cluster) -> dict[str, float]:
    """The month's cost by line."""
    invocations = MINUTES_PER_MONTH * 60 / SCHEDULE_SECONDS
    gb = 1 / 1024
    # Provisioner: watching, it runs until its deadline every invocation, however idle the cluster.
    if deployment.economy:
        provisioner_seconds = PROVISIONER_IDLE_PASS + cluster.provisioner_pass_seconds
    else:
        provisioner_seconds = deployment.provisioner_timeout - DEADLINE_MARGIN_SECONDS
    disruption_seconds = DISRUPTION_IDLE_PASS + cluster.disruption_pass_seconds
    removals = cluster.nodes * cluster.node_churn_per_day * DAYS_PER_MONTH
    step_seconds = removals * STEP_INVOCATIONS_PER_REMOVAL * STEP_SECONDS
    interruption_invocations = removals * 0.2  # a fifth of removals start with an interruption event
    provisioner_mb = max(deployment.provisioner_memory_mb, cluster.sized_memory_mb)
    disruption_mb = max(deployment.disruption_memory_mb, cluster.sized_memory_mb)
    gb_seconds = (
        invocations * provisioner_seconds * provisioner_mb * gb
        + invocations * disruption_seconds * disruption_mb * gb
        + (step_seconds + interruption_invocations * 0.5) * deployment.event_memory_mb * gb
    )
    requests = 2 * invocations + removals * STEP_INVOCATIONS_PER_REMOVAL + interruption_invocations
    passes = invocations * (1 if deployment.economy else (SCHEDULE_SECONDS - DEADLINE_MARGIN_SECONDS) / 5)
    writes, reads = dynamodb_units(cluster, passes, invocations, removals)
    # Logs: ~1.5 kB per invocation (START/END/REPORT, the summary, EMF), ~2 kB per launch or removal.
    log_gb = (
        2 * invocations * 1.5e3 + removals * 2 * 2e3 + removals * STEP_INVOCATIONS_PER_REMOVAL * 1e3
    ) / 1e9
    # Custom metrics: the idle ones; with nodes, the per-NodePool and per-capacity-type series of the node
    # count and cost (when the level publishes them), and the series written on launches and removals,
    # billed for the hours they are written in (CloudWatch prorates a metric by the hour).
    level = MONITORING[deployment.monitoring]
    metrics: float = level.idle_metrics
    if cluster.nodes:
        events_per_hour = cluster.nodes * cluster.node_churn_per_day / 24
        hours_written = 1 - math.exp(-events_per_hour)  # share of the hours with at least one
        event_series = EVENT_SERIES + min(40, cluster.nodes // 50)  # + one per instance type launched
        metrics += (SPLIT_SERIES if level.node_splits else 0) + event_series * hours_written
    free = level.dashboard_in_free_tier and deployment.free_dashboard
    sqs_requests = SQS_POLLERS * MINUTES_PER_MONTH * 60 / SQS_LONG_POLL_SECONDS + interruption_invocations * 2
    return {
        "Lambda compute": gb_seconds * LAMBDA_GB_SECOND,
        "Lambda requests": requests * LAMBDA_REQUEST,
        "Step Functions": removals * TRANSITIONS_PER_REMOVAL * STATE_TRANSITION,
        "DynamoDB": writes * DYNAMODB_WRITE + reads * DYNAMODB_READ + DYNAMODB_GB_MONTH * 0.01,
        "SQS": sqs_requests * SQS_REQUEST,
        "CloudWatch Logs": log_gb * (LOGS_INGESTED_GB + LOGS_STORED_GB_MONTH * LOG_RETENTION_MONTHS),
        "custom metrics": metrics * CUSTOM_METRIC_MONTH,
        "alarms": level.alarm_metrics * ALARM_METRIC_MONTH,
        "dashboard": 0.0 if free else level.dashboards * DASHBOARD_MONTH,
    }


def claim_write_units(fenced: bool) -> float:
    """Write units of one claim write: the record, the revision and, when fenced, the lease's check."""
    items = [CLAIM_RECORD_KB, SMALL_ITEM_KB] + ([SMALL_ITEM_KB] if fenced else [])
    return sum(math.ceil(kb) for kb in items) * TRANSACTIONAL_WRITE_UNITS


def dynamodb_units(
    cluster: Cluster, passes: float, invocations: float, removals: float
) -> tuple[float, float]:
    """Write and read request units of a month (the constants above; launches as many as removals)."""
    claim_writes = sum(claim_write_units(f) for f in LAUNCH_CLAIM_WRITES + REMOVAL_CLAIM_WRITES)
    writes = passes * LEASE_WRITES_PER_PASS + removals * (claim_writes + LAUNCH_GUARD_WRITES)
    query_units = max(1, math.ceil(cluster.nodes * CLAIM_RECORD_KB / 4))
    cold = COLD_STARTS_PER_DAY * DAYS_PER_MONTH
    # Queries again: at most once per pass, after a cold start or another process's claim write (the
    # provisioner sees the termination workflow's, the disruption function everybody's).
    provisioner_queries = min(passes, cold + removals * len(REMOVAL_CLAIM_WRITES))
    disruption_queries = min(
        invocations, cold + removals * (len(LAUNCH_CLAIM_WRITES) + len(REMOVAL_CLAIM_WRITES))
    )
    reads = (
        passes * LEASE_READS_PER_PASS
        + (passes + invocations) * REVISION_READS_PER_PASS
        + (provisioner_queries + disruption_queries) * query_units
        + removals * LAUNCH_CLAIM_READS * math.ceil(CLAIM_RECORD_KB / 4)
        + removals * LAUNCH_GUARD_READS
        + invocations * STATUS_BREAKER_READS_PER_INVOCATION
    )
    return writes, reads


def table(deployments: tuple[Deployment, ...], markdown: bool) -> str:
    """One row per deployment and cluster: the lines and the total."""
    lines = list(monthly(WATCHING, CLUSTERS[0]))
    head = ["mode", "cluster", *lines, "total"]
    rows = []
    for deployment in deployments:
        for cluster in CLUSTERS:
            cost = monthly(deployment, cluster)
            rows.append(
                [
                    deployment.name,
                    cluster.name,
                    *(f"{cost[k]:.2f}" for k in lines),
                    f"{sum(cost.values()):.2f}",
                ]
            )
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join(
        "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
    )


def main() -> None:
    """Print the tables: the defaults, then the levers."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    print(
        "USD per month, us-east-1 prices of 2026-11-24, free tiers not subtracted but the dashboard's "
        "(one of the account's 3 free dashboards)"
    )
    print(table((WATCHING, ECONOMY), args.markdown))
    print()
    print("Other settings (idle cluster):")
    levers = (
        replace(
            WATCHING,
            name="watching, provisioner 1,024 MB, monitoring=full (the defaults before)",
            provisioner_memory_mb=1024,
            monitoring="full",
        ),
        replace(WATCHING, name="watching, monitoring=full", monitoring="full"),
        replace(
            WATCHING, name="watching, the account's 3 free dashboards used elsewhere", free_dashboard=False
        ),
        replace(WATCHING, name="watching, monitoring=essential", monitoring="essential"),
        replace(WATCHING, name="watching, provisioner 1,024 MB", provisioner_memory_mb=1024),
        replace(
            ECONOMY,
            name="economy, provisioner 1,024 MB, monitoring=full (the defaults before)",
            provisioner_memory_mb=1024,
            monitoring="full",
        ),
        replace(ECONOMY, name="economy, provisioner 1,024 MB", provisioner_memory_mb=1024),
        replace(ECONOMY, name="economy, monitoring=alarms", monitoring="alarms"),
        replace(
            ECONOMY, name="economy, the account's 3 free dashboards used elsewhere", free_dashboard=False
        ),
        replace(ECONOMY, name="economy, disruption 512 MB", disruption_memory_mb=512),
    )
    for lever in levers:
        cost = monthly(lever, CLUSTERS[0])
        print(f"  {lever.name}: {sum(cost.values()):.2f}")


if __name__ == "__main__":
    main()
