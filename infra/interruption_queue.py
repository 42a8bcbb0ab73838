"""The interruption queue: EC2 and AWS Health events that mean a node is going away, delivered by EventBridge.

Delivery settings follow from two rules:

- **A message must reach the dead-letter queue, never expire on the way.** A message that fails is
  received up to ``MAX_RECEIVE_COUNT`` (3) times, one visibility timeout apart, so retention (4 days) is
  far longer than 3 x the visibility timeout (18 minutes). A late event is harmless: the handler acts on
  the instance's current state and on the interruption record in the state table, never on the event
  alone (docs/termination.md).
- **A message is not delivered again while a consumer still works on it.** The visibility timeout is six
  times the consumer's timeout (AWS's guidance for Lambda event sources, which leaves room for the event
  source mapping's own retries); :meth:`FleetwrightAutoscaler.consume_interruptions` refuses a consumer
  whose timeout breaks that rule. A copy handled concurrently anyway finds the interruption record and
  goes back to the queue.

The dead-letter queue keeps messages 14 days.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

MAX_RECEIVE_COUNT = 3
# AWS recommends a visibility timeout of at least six times the consuming function's timeout.
VISIBILITY_TO_TIMEOUT_RATIO = 6
# The interruption handler's timeout is one minute.
VISIBILITY_TIMEOUT = Duration.seconds(VISIBILITY_TO_TIMEOUT_RATIO * 60)
RETENTION = Duration.days(4)
DLQ_RETENTION = Duration.days(14)
# Instance states that mean the node is leaving; "pending"/"running" would only add noise.
LEAVING_STATES = ("stopping", "stopped", "shutting-down", "terminated")


@dataclass(frozen=True, slots=True)
class InterruptionEvent:
    """One kind of event the queue receives: the rule's id and its event pattern."""

    rule_id: str
    description: str
    pattern: events.EventPattern


INTERRUPTION_EVENTS = (
    InterruptionEvent(
        "SpotInterruptionRule",
        "Spot interruption warnings (two minutes' notice)",
        events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Spot Instance Interruption Warning"]),
    ),
    InterruptionEvent(
        "RebalanceRule",
        "Spot rebalance recommendations (elevated interruption risk)",
        events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Instance Rebalance Recommendation"]),
    ),
    InterruptionEvent(
        "InstanceStateChangeRule",
        "Instances stopping or terminating outside Fleetwright",
        events.EventPattern(
            source=["aws.ec2"],
            detail_type=["EC2 Instance State-change Notification"],
            detail={"state": list(LEAVING_STATES)},
        ),
    ),
    InterruptionEvent(
        "ScheduledChangeRule",
        "AWS Health scheduled changes for EC2 (retirements, maintenance)",
        events.EventPattern(
            source=["aws.health"],
            detail_type=["AWS Health Event"],
            detail={"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
        ),
    ),
)


class InterruptionQueue(Construct):
    """``queue`` (SSE-SQS, TLS only, 4 days' retention), its ``dead_letter_queue`` and the four ``rules``.

    Each rule's target adds a statement to the queue policy allowing ``events.amazonaws.com`` to send,
    limited to that rule's ARN.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            retention_period=DLQ_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            retention_period=RETENTION,
            visibility_timeout=VISIBILITY_TIMEOUT,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT
            ),
        )
        self.rules: list[events.Rule] = []
        for kind in INTERRUPTION_EVENTS:
            rule = events.Rule(self, kind.rule_id, description=kind.description, event_pattern=kind.pattern)
            rule.add_target(targets.SqsQueue(self.queue))
            self.rules.append(rule)
