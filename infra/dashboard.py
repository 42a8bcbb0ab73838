"""The CloudWatch dashboard and the alarms that tell an operator Fleetwright needs attention.

Only the pieces that exist are shown so far (interruption queue, dead-letter queue, state table); the
functions add their own widgets through :meth:`FleetwrightDashboard.add_function_widgets`.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

PERIOD = Duration.minutes(1)
WIDGET_WIDTH = 12


class FleetwrightDashboard(Construct):
    """``dashboard`` and ``alarms``; ``dlq_alarm`` fires as soon as one interruption message is dead-lettered.

    When ``alarm_topic`` is given, every alarm notifies it (on alarm and on recovery).
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
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarm_topic = alarm_topic
        self.alarms: list[cloudwatch.Alarm] = []
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"Fleetwright-{cluster_name}"[:255]
        )
        self.dlq_alarm = self.add_alarm(
            cloudwatch.Alarm(
                self,
                "DeadLetterQueueNotEmpty",
                alarm_description="Interruption events failed three times and were dead-lettered; "
                "nodes may not have been drained before they went away.",
                metric=dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic="Maximum"
                ),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# Fleetwright — cluster `{cluster_name}`", width=2 * WIDGET_WIDTH, height=1
            )
        )
        self.dashboard.add_widgets(
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
        self.dashboard.add_widgets(
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

    def add_alarm(self, alarm: cloudwatch.Alarm) -> cloudwatch.Alarm:
        """Register ``alarm`` (wired to the alarm topic when there is one) and return it."""
        if self.alarm_topic is not None:
            action = cw_actions.SnsAction(self.alarm_topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms.append(alarm)
        return alarm

    def add_function_widgets(self, function: lambda_.IFunction, title: str | None = None) -> None:
        """A row for one function: invocations and errors, duration, throttles."""
        name = title or function.node.id
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: invocations and errors",
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
