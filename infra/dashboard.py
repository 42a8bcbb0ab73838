"""The CloudWatch dashboard and the alarms that tell an operator Fleetwright needs attention.

Every deployment has the dashboard. It opens with an overview read at a glance (:meth:`add_overview`):
pending pods and how long a node takes to start, nodes and their $/h by NodePool and capacity type,
launches and terminations by reason, disruption decisions and what blocks them, interruptions, workflow
outcomes, errors, and each function's longest run and peak memory against its limits. The overview reads
only what the monitoring level publishes (``controller_metrics.WITHHELD``) and stays within the 50
metrics of a dashboard in CloudWatch's free tier (docs/cost.md). With ``monitoring=full`` the controllers'
detailed sections follow (:meth:`FleetwrightDashboard.add_section`): the interruption queue, its
dead-letter queue and the state table, the provisioner's metrics (:meth:`add_provisioning_widgets`), the
interruption handler's and the termination workflow's (:meth:`add_interruption_widgets`,
:meth:`add_workflow_widgets`) and the disruption function's (:meth:`add_disruption_widgets`), each with its
functions' Lambda rows (:meth:`add_function_widgets`). Metric names, the dimensions they are written with
and queries are in :mod:`infra.controller_metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra import controller_metrics as cm

PERIOD = Duration.minutes(1)
WIDGET_WIDTH = 12
# Launches, errors and costs are rare events: five-minute sums read better than one-minute spikes.
EVENT_PERIOD = Duration.minutes(5)
# The launch-rate alarm: launches in the cap's default window (10 min) reaching half its default limit.
LAUNCH_RATE_PERIOD = Duration.minutes(10)
LAUNCH_RATE_ALARM = 500
OVERVIEW_WIDTH = 6  # four graphs a row
# CloudWatch's free tier covers 3 dashboards of up to 50 metrics each (docs/cost.md).
FREE_DASHBOARD_METRICS = 50
# The functions' REPORT lines (text log format): peak memory and longest run, by log group.
REPORT_QUERY = (
    'filter @type = "REPORT"',
    "stats max(@maxMemoryUsed / @memorySize) as peakShareOfMemory, max(@duration) as longestMs, "
    "max(@memorySize / 1048576) as memoryMB, count(*) as invocations by @log",
)


class FleetwrightDashboard(Construct):
    """``dashboard`` and ``alarms``; ``dlq_alarm`` fires as soon as one interruption message is dead-lettered.

    When ``alarm_topic`` is given, every alarm notifies it (on alarm and on recovery). ``level`` is the
    monitoring level (``infra.settings.Monitoring``'s value): the overview graphs only what the functions
    publish at that level, and the detailed sections are added only at ``full`` (a dashboard of more than
    50 metrics leaves CloudWatch's free tier; docs/cost.md).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        table: dynamodb.ITable,
        delivery_dead_letter_queue: sqs.IQueue | None = None,
        alarm_topic: sns.ITopic | None = None,
        level: str = "full",
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarm_topic = alarm_topic
        self.level = level
        self.detailed = level == "full"
        self.alarms: list[cloudwatch.Alarm] = []
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"Fleetwright-{cluster_name}"[:255]
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# Fleetwright — cluster `{cluster_name}`", width=2 * WIDGET_WIDTH, height=1
            )
        )
        # Filled by add_overview once the functions exist; rendered first.
        self.overview = cloudwatch.Column()
        self.dashboard.add_widgets(cast(cloudwatch.IWidget, self.overview))
        self._services: set[str] = set()
        self._functions: list[lambda_.IFunction] = []
        self._log_groups: list[logs.ILogGroup] = []
        self._state_machine: sfn.IStateMachine | None = None
        self._dead_letters = _dead_letters(dead_letter_queue, delivery_dead_letter_queue)
        self._limits = cloudwatch.GraphWidget(
            title="Longest run / timeout; peak memory / limit",
            left_annotations=[cloudwatch.HorizontalAnnotation(value=cm.LIMIT_ALARM_FRACTION, label="alarm")],
            width=OVERVIEW_WIDTH,
        )
        self._errors = cloudwatch.GraphWidget(title="Errors", width=OVERVIEW_WIDTH)
        self.dlq_alarm = self.add_alarm(
            cloudwatch.Alarm(
                self,
                "DeadLetterQueueNotEmpty",
                alarm_description="Interruption events failed three times and were dead-lettered, or "
                "EventBridge could not deliver them to the interruption queue (nodes may not have been "
                "drained before they went away), or could not invoke the provisioner or the disruption "
                "function on their schedule (the function deleted or its permission removed).",
                metric=self._dead_letters,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Interruption queue",
                left=[
                    queue.metric_number_of_messages_received(period=PERIOD, statistic="Sum"),
                    queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.AlarmWidget(
                title="Dead-lettered interruption events", alarm=self.dlq_alarm, width=WIDGET_WIDTH
            ),
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="State table",
                left=[
                    table.metric_consumed_read_capacity_units(period=PERIOD, statistic="Sum"),
                    table.metric_consumed_write_capacity_units(period=PERIOD, statistic="Sum"),
                ],
                right=[table.metric_throttled_requests_for_operations(period=PERIOD, statistic="Sum")],
                width=WIDGET_WIDTH,
            ),
        )

    def _add_widgets(self, *widgets: cloudwatch.IWidget) -> None:
        """A row of the detailed sections (``monitoring=full`` only)."""
        if self.detailed:
            self.dashboard.add_widgets(*widgets)

    def _metric(
        self, name: str, service: str, *, statistic: str = "Sum", period: Duration = EVENT_PERIOD
    ) -> cloudwatch.Metric | None:
        """``name``'s series without dimensions of its own, if the functions publish it at this level."""
        if not cm.published(self.level, name, ()):
            return None
        return cm.metric(name, service, statistic=statistic, period=period)

    def _insights(
        self,
        name: str,
        service: str | None,
        *,
        group_by: str | None = None,
        function: str = "SUM",
        label: str | None = None,
        dimensioned_only: bool = False,
        period: Duration = EVENT_PERIOD,
    ) -> cloudwatch.MathExpression | None:
        """:func:`controller_metrics.insights`, if the functions publish what it reads at this level."""
        series = (group_by,) if dimensioned_only and group_by else None
        if not cm.published(self.level, name, series):
            return None
        return cm.insights(
            name,
            service,
            group_by=group_by,
            function=function,
            label=label,
            dimensioned_only=dimensioned_only,
            period=period,
        )

    def _overview_row(self, *widgets: cloudwatch.IWidget | None) -> None:
        """A row of the overview, without the graphs left with nothing to show at this level."""
        shown = [w for w in widgets if w is not None]
        if shown:
            self.overview.add_widget(cast(cloudwatch.IWidget, cloudwatch.Row(*shown)))

    def add_overview(self) -> None:
        """The overview: capacity, churn and health rows for the controllers added so far (functions added
        later still get their lines in the limits and errors graphs)."""
        self._overview_row(*self._capacity_widgets())
        self._overview_row(*self._churn_widgets())
        self._overview_row(self._workflow_widget(), self._errors_widget(), self._limits)
        if self._log_groups:
            self._overview_row(
                cloudwatch.LogQueryWidget(
                    title="Each function's peak memory (share of its limit) and longest run (ms), from its "
                    "REPORT lines",
                    log_group_names=[group.log_group_name for group in self._log_groups],
                    query_lines=list(REPORT_QUERY),
                    view=cloudwatch.LogQueryVisualizationType.TABLE,
                    width=2 * WIDGET_WIDTH,
                    height=4,
                )
            )

    def _capacity_widgets(self) -> list[cloudwatch.IWidget | None]:
        """Pending pods and node startup; nodes and $/h by NodePool, by capacity type and in all."""
        widgets: list[cloudwatch.IWidget | None] = []
        if cm.PROVISIONER_SERVICE in self._services:
            widgets.append(
                _graph(
                    "Pending pods; node startup (s, launch decision to initialized)",
                    [
                        self._metric(cm.PENDING_PODS, cm.PROVISIONER_SERVICE, statistic="Maximum"),
                        self._metric(cm.UNSCHEDULABLE_PODS, cm.PROVISIONER_SERVICE, statistic="Maximum"),
                    ],
                    [
                        self._insights(
                            cm.NODE_STARTUP_DURATION, None, function="AVG", label="startup, average"
                        ),
                        self._insights(
                            cm.NODE_STARTUP_DURATION, None, function="MAX", label="startup, longest"
                        ),
                    ],
                )
            )
        if cm.DISRUPTION_SERVICE in self._services:
            service = cm.DISRUPTION_SERVICE
            for split, what in (("NodePool", "NodePool"), ("CapacityType", "capacity type")):
                widgets.append(
                    _graph(
                        f"Nodes by {what}; their $/h (right)",
                        [
                            self._insights(
                                cm.NODE_COUNT, service, group_by=split, function="MAX", dimensioned_only=True
                            )
                        ],
                        [
                            self._insights(
                                cm.CLUSTER_HOURLY_COST,
                                service,
                                group_by=split,
                                function="MAX",
                                dimensioned_only=True,
                            )
                        ],
                    )
                )
            widgets.append(
                _graph(
                    "Fleetwright's nodes; their $/h (right)",
                    [self._metric(cm.NODE_COUNT, service, statistic="Maximum")],
                    [self._metric(cm.CLUSTER_HOURLY_COST, service, statistic="Maximum")],
                )
            )
        return widgets

    def _churn_widgets(self) -> list[cloudwatch.IWidget | None]:
        """Launches by the function that launched them, terminations by reason, disruption decisions and
        what blocked them, interruptions by kind."""
        launches = bool(self._services & set(cm.CLAIM_SERVICES))
        return [
            _graph(
                "Nodes launched, by launching function; launch errors (right)",
                [self._insights(cm.CLAIMS_LAUNCHED, None, group_by="service")],
                [
                    self._insights(cm.LAUNCH_ERRORS, None, label="launch errors"),
                    self._insights(cm.INSUFFICIENT_CAPACITY_RECOVERED, None, label="launched after ICE"),
                ],
                stacked=True,
            )
            if launches
            else None,
            _graph(
                "Nodes terminated by reason",
                [self._insights(cm.NODES_TERMINATED, cm.TERMINATION_SERVICE, group_by="Reason")],
                stacked=True,
            )
            if cm.TERMINATION_SERVICE in self._services
            else None,
            _graph(
                "Disruption decisions by reason; nodes blocked by why (right)",
                [self._insights(cm.NODES_DISRUPTED, cm.DISRUPTION_SERVICE, group_by="Reason")],
                [
                    self._insights(
                        cm.DISRUPTION_BLOCKED, cm.DISRUPTION_SERVICE, group_by="Why", function="MAX"
                    )
                ],
            )
            if cm.DISRUPTION_SERVICE in self._services
            else None,
            _graph(
                "Interruption events by kind; rejected (right)",
                [self._insights(cm.INTERRUPTION_EVENTS, cm.INTERRUPTION_SERVICE, group_by="Kind")],
                [self._insights(cm.MESSAGES_REJECTED, cm.INTERRUPTION_SERVICE, label="rejected")],
                stacked=True,
            )
            if cm.INTERRUPTION_SERVICE in self._services
            else None,
        ]

    def _workflow_widget(self) -> cloudwatch.IWidget | None:
        """The termination workflow's executions by outcome (Step Functions' own metrics, free)."""
        machine = self._state_machine
        if machine is None:
            return None
        return _graph(
            "Termination workflows by outcome",
            [
                machine.metric_started(period=EVENT_PERIOD),
                machine.metric_succeeded(period=EVENT_PERIOD),
                machine.metric_failed(period=EVENT_PERIOD),
                machine.metric_timed_out(period=EVENT_PERIOD),
                machine.metric_aborted(period=EVENT_PERIOD),
            ],
        )

    def _errors_widget(self) -> cloudwatch.GraphWidget:
        """Lambda errors of each function (added as they register) and the controllers' failure counts."""
        lines: list[cloudwatch.IMetric | None] = [
            self._metric(cm.PROVISIONING_ERRORS, cm.PROVISIONER_SERVICE)
            if cm.PROVISIONER_SERVICE in self._services
            else None,
            self._insights(cm.DISRUPTION_ERRORS, cm.DISRUPTION_SERVICE, label=cm.DISRUPTION_ERRORS)
            if cm.DISRUPTION_SERVICE in self._services
            else None,
            self._metric(cm.TERMINATION_FAILURES, cm.TERMINATION_SERVICE)
            if cm.TERMINATION_SERVICE in self._services
            else None,
        ]
        for line in lines:
            if line is not None:
                self._errors.add_right_metric(line)
        self._errors.add_right_metric(self._dead_letters)
        return self._errors

    def add_alarm(self, alarm: cloudwatch.Alarm) -> cloudwatch.Alarm:
        """Register ``alarm`` (wired to the alarm topic when there is one) and return it."""
        if self.alarm_topic is not None:
            action = cw_actions.SnsAction(self.alarm_topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms.append(alarm)
        return alarm

    def add_function_widgets(self, function: lambda_.IFunction, title: str | None = None) -> None:
        """``function`` in the overview (its Lambda errors; its longest run over its timeout; its REPORT
        lines), and with ``monitoring=full`` a row of its own: invocations, errors and throttles; duration
        (p50, p99). Lambda's metrics are free."""
        name = title or function.node.id
        self._errors.add_left_metric(function.metric_errors(period=EVENT_PERIOD, label=f"{name} errors"))
        timeout = getattr(function, "timeout", None)
        if isinstance(timeout, Duration):
            line = f"d{len(self._functions)}"
            self._limits.add_left_metric(
                cloudwatch.MathExpression(
                    expression=f"{line} / {timeout.to_milliseconds():.0f}",
                    using_metrics={line: function.metric_duration(period=EVENT_PERIOD, statistic="Maximum")},
                    label=f"{name}: longest run / timeout",
                    period=EVENT_PERIOD,
                )
            )
        self._functions.append(function)
        log_group = getattr(function, "log_group", None) if isinstance(function, lambda_.Function) else None
        if log_group is not None:
            self._log_groups.append(log_group)
        self._add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: invocations, errors and throttles",
                left=[function.metric_invocations(period=PERIOD), function.metric_errors(period=PERIOD)],
                right=[function.metric_throttles(period=PERIOD)],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: duration",
                left=[
                    function.metric_duration(period=PERIOD, statistic="p50"),
                    function.metric_duration(period=PERIOD, statistic="p99"),
                ],
                width=WIDGET_WIDTH,
            ),
        )

    def add_section(self, title: str) -> None:
        """A full-width heading of the detailed sections; the widgets added next belong to it."""
        self._add_widgets(cloudwatch.TextWidget(markdown=f"## {title}", width=2 * WIDGET_WIDTH, height=1))

    def add_provisioning_widgets(self) -> None:
        """What the provisioner publishes: pending pods, launches by instance type and capacity type,
        launch and capacity errors, nodes registered, the hourly cost launched."""
        service = cm.PROVISIONER_SERVICE
        self._services.add(service)
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Pending pods; batch size",
                left=[
                    cm.metric(cm.PENDING_PODS, service, statistic="Maximum"),
                    cm.metric(cm.UNSCHEDULABLE_PODS, service, statistic="Maximum"),
                    cm.metric(cm.BATCH_SIZE, service, statistic="Maximum"),
                ],
                right=[cm.metric(cm.SCHEDULING_DURATION, service, statistic="p99")],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Nodes launched by instance type",
                left=[cm.insights(cm.CLAIMS_LAUNCHED, None, group_by="InstanceType", period=EVENT_PERIOD)],
                stacked=True,
                width=WIDGET_WIDTH,
            ),
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Nodes launched by capacity type",
                left=[cm.insights(cm.CLAIMS_LAUNCHED, None, group_by="CapacityType", period=EVENT_PERIOD)],
                stacked=True,
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Launch errors by EC2 error code; insufficient capacity, recovered",
                left=[cm.insights(cm.LAUNCH_ERRORS, None, group_by="ErrorCode", period=EVENT_PERIOD)],
                right=[
                    cm.insights(
                        cm.LAUNCH_ERRORS,
                        None,
                        where=cm.capacity_errors_condition(),
                        period=EVENT_PERIOD,
                        label="Insufficient capacity (all codes)",
                    ),
                    # Claims launched on another offering after EC2 refused one: capacity the fallback
                    # found, next to the failures it could not avoid.
                    cm.insights(
                        cm.INSUFFICIENT_CAPACITY_RECOVERED,
                        None,
                        period=EVENT_PERIOD,
                        label="Launched after insufficient capacity",
                    ),
                    # A launcher that found the lease taken stopped before writing or launching anything.
                    cm.metric(cm.LEASE_LOST, service, period=EVENT_PERIOD),
                ],
                width=WIDGET_WIDTH,
            ),
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Nodes registered and initialized; registration timeouts, launches held back",
                left=[
                    cm.insights(cm.NODES_REGISTERED, None, period=EVENT_PERIOD),
                    cm.insights(cm.NODES_INITIALIZED, None, period=EVENT_PERIOD),
                ],
                right=[
                    cm.insights(cm.REGISTRATION_TIMEOUTS, service, period=EVENT_PERIOD),
                    # The bounds on a runaway: breakers opened, and claims they and the rate cap held back.
                    cm.insights(cm.REGISTRATION_BREAKER_OPENED, None, period=EVENT_PERIOD),
                    cm.insights(cm.REGISTRATION_BREAKER_HELD, None, period=EVENT_PERIOD),
                    cm.insights(cm.LAUNCH_RATE_CAPPED, None, period=EVENT_PERIOD),
                ],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="NodePools and Kubernetes objects: problems",
                left=[
                    cm.metric(cm.NO_NODEPOOLS, service, period=EVENT_PERIOD),
                    cm.insights(cm.INVALID_KARPENTER_OBJECTS, service, group_by="Kind", period=EVENT_PERIOD),
                    cm.metric(cm.NODEPOOL_READ_ERRORS, service, period=EVENT_PERIOD),
                    cm.insights(cm.NODECLAIM_SYNC_ERRORS, service, period=EVENT_PERIOD),
                    cm.metric(cm.NODE_SYNC_ERRORS, service, period=EVENT_PERIOD),
                    cm.insights(cm.EVENTS_NOT_RECORDED, service, period=EVENT_PERIOD),
                    # Static NodePools below their replicas that limits.nodes holds back.
                    cm.insights(cm.STATIC_LIMIT_REACHED, service, group_by="NodePool", period=EVENT_PERIOD),
                ],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Hourly cost launched ($/h) by NodePool",
                left=[cm.insights(cm.HOURLY_COST_LAUNCHED, None, group_by="NodePool", period=EVENT_PERIOD)],
                stacked=True,
                width=WIDGET_WIDTH,
            ),
        )

    def add_provisioning_alarms(self) -> list[cloudwatch.Alarm]:
        """Alarms on passes that keep failing and on nodes that never register, and a row showing them."""
        failing = cloudwatch.Alarm(
            self,
            "ProvisioningFailing",
            alarm_description="Provisioning passes failed in three consecutive minutes (Kubernetes or AWS "
            "errors): pending pods get no nodes. The provisioner's log says why.",
            metric=cm.metric(cm.PROVISIONING_ERRORS, cm.PROVISIONER_SERVICE),
            threshold=1,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        timeouts = cloudwatch.Alarm(
            self,
            "RegistrationTimeouts",
            alarm_description="A launched instance never became a node and was terminated: check the node "
            "role's access entry, the subnets' routes and the security groups (docs/deploy.md).",
            metric=cm.insights(cm.REGISTRATION_TIMEOUTS, cm.PROVISIONER_SERVICE, period=EVENT_PERIOD),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self._add_widgets(
            cloudwatch.AlarmWidget(title="Failed provisioning passes", alarm=failing, width=WIDGET_WIDTH),
            cloudwatch.AlarmWidget(title="Registration timeouts", alarm=timeouts, width=WIDGET_WIDTH),
        )
        return [self.add_alarm(failing), self.add_alarm(timeouts), *self.add_launch_rate_alarms()]

    def add_launch_rate_alarms(self) -> list[cloudwatch.Alarm]:
        """An alarm on the cluster's launch rate (every launcher's claims in 10 minutes) reaching half the
        launch-rate cap (docs/provisioner.md, "Bounded blast radius"). It also covers the cap being reached:
        a rolling window of 1,000 launches puts at least 500 in one of the two 10-minute periods it
        overlaps, so no second alarm (and alarm metric) is needed for that."""
        rate = cloudwatch.Alarm(
            self,
            "LaunchRate",
            alarm_description=f"More than {LAUNCH_RATE_ALARM} instances launched in 10 minutes, half the "
            "launch-rate cap: a scale-up far above the usual, or a runaway. Check the provisioner's log for "
            "the pods launched for, and the NodePools' limits.",
            metric=cm.insights(cm.CLAIMS_LAUNCHED, None, period=LAUNCH_RATE_PERIOD),
            threshold=LAUNCH_RATE_ALARM,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        return [self.add_alarm(rate)]

    def add_interruption_widgets(self) -> None:
        """What the interruption handler publishes: events by kind, rejected and duplicate messages,
        ignored events, nodes cleaned up, replacements."""
        service = cm.INTERRUPTION_SERVICE
        self._services.add(service)
        third = 2 * WIDGET_WIDTH // 3
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Interruption events by kind; rejected, duplicates",
                left=[cm.insights(cm.INTERRUPTION_EVENTS, service, group_by="Kind", period=EVENT_PERIOD)],
                right=[
                    cm.insights(cm.MESSAGES_REJECTED, service, period=EVENT_PERIOD),
                    cm.metric(cm.DUPLICATE_EVENTS, service, period=EVENT_PERIOD),
                    cm.metric(cm.REBALANCE_RECOMMENDATIONS, service, period=EVENT_PERIOD),
                    # Attempts: copies sent back while one is in progress, retried and given-up attempts.
                    cm.insights(cm.INTERRUPTIONS_IN_PROGRESS, service, period=EVENT_PERIOD),
                    cm.insights(cm.INTERRUPTION_ATTEMPTS_RETRIED, service, period=EVENT_PERIOD),
                    cm.insights(cm.INTERRUPTION_ATTEMPTS_EXHAUSTED, service, period=EVENT_PERIOD),
                ],
                stacked=True,
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Ignored events by reason; nodes cleaned up",
                left=[
                    cm.insights(
                        cm.INTERRUPTION_EVENTS_IGNORED, service, group_by="Reason", period=EVENT_PERIOD
                    )
                ],
                right=[cm.insights(cm.NODES_CLEANED_UP, service, period=EVENT_PERIOD)],
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Replacement nodes",
                left=[
                    cm.metric(cm.REPLACEMENT_CLAIMS, service, period=EVENT_PERIOD),
                    cm.metric(cm.REPLACEMENT_ERRORS, service, period=EVENT_PERIOD),
                ],
                width=third,
            ),
        )

    def add_workflow_widgets(
        self,
        state_machine: sfn.IStateMachine,
        failure_alarm: cloudwatch.Alarm,
        execution_alarm: cloudwatch.Alarm | None = None,
    ) -> None:
        """The termination workflow: executions started, succeeded, failed, timed out, aborted (Step
        Functions' own metrics), why they were started, what the steps did, and the failure alarms."""
        steps = cm.TERMINATION_SERVICE
        self._services.add(steps)
        self._state_machine = state_machine
        third = 2 * WIDGET_WIDTH // 3
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Termination workflows (executions)",
                left=[
                    state_machine.metric_started(period=EVENT_PERIOD),
                    state_machine.metric_succeeded(period=EVENT_PERIOD),
                    state_machine.metric_failed(period=EVENT_PERIOD),
                    state_machine.metric_timed_out(period=EVENT_PERIOD),
                    state_machine.metric_aborted(period=EVENT_PERIOD),
                ],
                right=[
                    cm.insights(
                        cm.WORKFLOWS_STARTED, cm.INTERRUPTION_SERVICE, group_by="Reason", period=EVENT_PERIOD
                    )
                ],
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Nodes terminated, disruptions called off, by reason; pods evicted",
                left=[
                    cm.insights(cm.NODES_TERMINATED, steps, group_by="Reason", period=EVENT_PERIOD),
                    cm.insights(
                        cm.DISRUPTIONS_CALLED_OFF, steps, period=EVENT_PERIOD, label="Disruptions called off"
                    ),
                ],
                right=[
                    cm.metric(cm.PODS_EVICTED, steps, period=EVENT_PERIOD),
                    cm.metric(cm.EVICTIONS_BLOCKED, steps, period=EVENT_PERIOD),
                    cm.metric(cm.PODS_DELETED_AT_DEADLINE, steps, period=EVENT_PERIOD),
                    # Drain passes the Kubernetes API refused; long drains carried into a new execution.
                    cm.metric(cm.DRAIN_API_ERRORS, steps, period=EVENT_PERIOD),
                    cm.metric(cm.WORKFLOW_CONTINUATIONS, steps, period=EVENT_PERIOD),
                    # Nodes not held for their volumes because VolumeAttachments could not be listed.
                    cm.metric(cm.VOLUME_ATTACHMENTS_UNREADABLE, steps, period=EVENT_PERIOD),
                ],
                width=third,
            ),
            cloudwatch.AlarmWidget(
                title=f"Failed terminations ({cm.TERMINATION_FAILURES})", alarm=failure_alarm, width=third
            ),
        )
        if execution_alarm is not None:
            self._add_widgets(
                cloudwatch.AlarmWidget(
                    title="Termination workflows failed, timed out or aborted",
                    alarm=execution_alarm,
                    width=third,
                )
            )

    def add_disruption_widgets(self) -> None:
        """What the disruption function publishes: Fleetwright's nodes and their hourly cost, commands by
        method, nodes disrupted by reason and repaired by condition, expected savings, garbage collected, what
        blocked disruption or repair, how long deciding took and errors by stage."""
        service = cm.DISRUPTION_SERVICE
        self._services.add(service)
        third = 2 * WIDGET_WIDTH // 3
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Fleetwright nodes; cluster hourly cost ($/h)",
                left=[cm.metric(cm.NODE_COUNT, service, statistic="Maximum", period=EVENT_PERIOD)],
                right=[cm.metric(cm.CLUSTER_HOURLY_COST, service, statistic="Maximum", period=EVENT_PERIOD)],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Fleetwright nodes by NodePool",
                left=[
                    cm.insights(
                        cm.NODE_COUNT, service, group_by="NodePool", function="MAX", dimensioned_only=True
                    )
                ],
                stacked=True,
                width=WIDGET_WIDTH,
            ),
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Disruption commands by method; invalidated",
                left=[cm.insights(cm.DISRUPTION_COMMANDS, service, group_by="Method")],
                right=[cm.insights(cm.COMMANDS_INVALIDATED, service, label="Dropped by re-validation")],
                stacked=True,
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Nodes disrupted by reason; repaired by condition",
                left=[cm.insights(cm.NODES_DISRUPTED, service, group_by="Reason")],
                right=[cm.insights(cm.NODES_REPAIRED, service, group_by="Condition")],
                stacked=True,
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Expected savings ($/h) by method",
                left=[cm.insights(cm.DISRUPTION_SAVINGS, service, group_by="Method")],
                stacked=True,
                width=third,
            ),
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Garbage collected by kind; nodes retired after deletion",
                left=[
                    cm.insights(cm.GARBAGE_COLLECTED, service, group_by="Kind"),
                    cm.insights(cm.IMPOSTORS_SEEN, service, label="Instances tagged by someone else (kept)"),
                    cm.insights(cm.NODES_UNCORDONED_BY_SWEEP, service, label="Nodes given back by the sweep"),
                    cm.insights(cm.INTERRUPTIONS_REDRIVEN, service, label="Interruptions re-driven"),
                    cm.insights(cm.NODES_RETIRED, service, group_by="Reason"),
                    cm.metric(cm.DELETION_RETRIES, service, period=EVENT_PERIOD),
                    cm.metric(cm.DELETION_ERRORS, service, period=EVENT_PERIOD),
                ],
                stacked=True,
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Disruption blocked by why; repair blocked by NodePool; candidates",
                left=[
                    cm.insights(cm.DISRUPTION_BLOCKED, service, group_by="Why"),
                    cm.insights(cm.NODE_REPAIR_BLOCKED, service, group_by="NodePool"),
                ],
                right=[
                    cm.metric(cm.DISRUPTION_CANDIDATES, service, statistic="Maximum", period=EVENT_PERIOD)
                ],
                width=third,
            ),
            cloudwatch.GraphWidget(
                title="Decision duration (ms); disruption errors by stage",
                left=[
                    cm.metric(cm.DECISION_DURATION, service, statistic="p50", period=EVENT_PERIOD),
                    cm.metric(cm.DECISION_DURATION, service, statistic="Maximum", period=EVENT_PERIOD),
                ],
                right=[cm.insights(cm.DISRUPTION_ERRORS, service, group_by="Stage")],
                width=third,
            ),
        )

    def add_limit_alarm(self, function_title: str, service: str) -> cloudwatch.Alarm:
        """An alarm when an invocation of ``service`` used 80% of its timeout or memory
        (``DurationOfTimeout``, ``MemoryOfLimit``), and a row graphing both against the threshold."""
        fraction = cm.LIMIT_ALARM_FRACTION
        duration = cm.metric(cm.DURATION_OF_TIMEOUT, service, statistic="Maximum", period=EVENT_PERIOD)
        memory = cm.metric(cm.MEMORY_OF_LIMIT, service, statistic="Maximum", period=EVENT_PERIOD)
        for name, what in ((cm.DURATION_OF_TIMEOUT, "time used"), (cm.MEMORY_OF_LIMIT, "peak memory")):
            line = cm.metric(name, service, statistic="Maximum", period=EVENT_PERIOD)
            self._limits.add_left_metric(line.with_(label=f"{function_title}: {what} ({name})"))
        alarm = cloudwatch.Alarm(
            self,
            f"{function_title}NearLimits",
            alarm_description=f"An invocation of the {function_title} function used {fraction:.0%} or more "
            "of its Lambda timeout or memory: the cluster is outgrowing the function's size. Raise "
            "functionSizes (docs/performance.md, Sizing) before passes are cut off.",
            metric=cloudwatch.MathExpression(
                expression="MAX([duration, memory])",
                using_metrics={"duration": duration, "memory": memory},
                period=EVENT_PERIOD,
                label=f"{function_title}: largest share of a limit",
            ),
            threshold=fraction,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title=f"{function_title}: share of the Lambda timeout and memory used (max)",
                left=[duration, memory],
                left_annotations=[cloudwatch.HorizontalAnnotation(value=fraction, label="alarm")],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.AlarmWidget(
                title=f"{function_title} near its limits", alarm=alarm, width=WIDGET_WIDTH
            ),
        )
        return self.add_alarm(alarm)

    def add_interruption_alarms(self) -> list[cloudwatch.Alarm]:
        """An alarm on any rejected interruption message (only the stack's rules may send to the queue, so
        one means a forged, replayed or unexpected event: docs/security.md), and a row showing them by
        reason."""
        service = cm.INTERRUPTION_SERVICE
        rejected = cloudwatch.Alarm(
            self,
            "InterruptionMessagesRejected",
            alarm_description="A message on the interruption queue was rejected and nothing was done about "
            "it: not an event Fleetwright handles, or one failing its checks (another account or region, "
            "resources not naming the instance, a malformed instance id, too old or dated ahead, a spot "
            "warning for an instance that is not spot). The interruption function's log says why "
            "(interruption message rejected); docs/security.md.",
            metric=cm.insights(cm.MESSAGES_REJECTED, service, period=PERIOD),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self._add_widgets(
            cloudwatch.GraphWidget(
                title="Rejected interruption messages by reason",
                left=[cm.insights(cm.MESSAGES_REJECTED, service, group_by="Reason", period=EVENT_PERIOD)],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.AlarmWidget(
                title="Rejected interruption messages", alarm=rejected, width=WIDGET_WIDTH
            ),
        )
        return [self.add_alarm(rejected)]

    def add_disruption_alarms(self) -> list[cloudwatch.Alarm]:
        """An alarm on disruption errors in three consecutive minutes, one on any instance tagged as the
        cluster's by hand (``ImpostorsSeen``), and a row showing them."""
        failing = cloudwatch.Alarm(
            self,
            "DisruptionFailing",
            alarm_description="Disruption passes, command executions or garbage collection failed in three "
            "consecutive minutes: nodes are not consolidated, replaced when drifted or expired, or cleaned "
            "up. The disruption function's log says why (disruption pass failed).",
            metric=cm.insights(cm.DISRUPTION_ERRORS, cm.DISRUPTION_SERVICE, period=PERIOD),
            threshold=1,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if self.level == "essential":  # they put no node at risk: the collector keeps them
            self._add_widgets(
                cloudwatch.AlarmWidget(title="Failing disruption", alarm=failing, width=2 * WIDGET_WIDTH)
            )
            return [self.add_alarm(failing)]
        impostors = self._impostors_alarm()
        self._add_widgets(
            cloudwatch.AlarmWidget(title="Failing disruption", alarm=failing, width=WIDGET_WIDTH),
            cloudwatch.AlarmWidget(title="Instances tagged by hand", alarm=impostors, width=WIDGET_WIDTH),
        )
        return [self.add_alarm(failing), self.add_alarm(impostors)]

    def _impostors_alarm(self) -> cloudwatch.Alarm:
        """An alarm on any instance the garbage collector saw with the cluster tag but not the NodePool
        tag (``ImpostorsSeen``)."""
        return cloudwatch.Alarm(
            self,
            "ImpostorsSeen",
            alarm_description="An instance carries this cluster's fleetwright.io/cluster tag without the "
            "karpenter.sh/nodepool tag the controller writes when it launches: someone tagged it by hand, "
            "or removed the NodePool tag from a node. The garbage collector keeps it (it never terminates "
            "what the controller did not launch) and names it in the disruption function's log (instance "
            "tagged as this cluster's by someone else; left alone); docs/security.md, Ownership.",
            # Counted at every listing of live instances (every 4 minutes): a 5-minute period holds one, so
            # the alarm stays raised while the instance is there.
            metric=cm.insights(cm.IMPOSTORS_SEEN, cm.DISRUPTION_SERVICE, period=EVENT_PERIOD),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )


def _dead_letters(dead_letter_queue: sqs.IQueue, delivery: sqs.IQueue | None) -> cloudwatch.IMetric:
    """Messages waiting in the dead-letter queue (and in the rules' delivery dead-letter queue)."""
    period = Duration.minutes(5)
    dead = dead_letter_queue.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum")
    if delivery is None:
        return dead
    undelivered = delivery.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum")
    return cloudwatch.MathExpression(
        expression="dead + undelivered",
        using_metrics={"dead": dead, "undelivered": undelivered},
        period=period,
        label="Dead-lettered and undelivered interruption events",
    )


def _graph(
    title: str,
    left: Sequence[cloudwatch.IMetric | None],
    right: Sequence[cloudwatch.IMetric | None] = (),
    *,
    stacked: bool = False,
) -> cloudwatch.GraphWidget | None:
    """An overview graph of the lines the monitoring level publishes (None when it publishes none)."""
    shown_left = [line for line in left if line is not None]
    shown_right = [line for line in right if line is not None]
    if not shown_left and not shown_right:
        return None
    return cloudwatch.GraphWidget(
        title=title, left=shown_left, right=shown_right, stacked=stacked, width=OVERVIEW_WIDTH
    )
