"""The interruption queue: EC2 and AWS Health events that mean a node is going away, delivered by EventBridge.

Messages older than five minutes are useless (a Spot instance gets two minutes' notice), so the queue keeps
them for 300 s; a message that fails three times goes to a dead-letter queue kept for 14 days. The
visibility timeout (90 s) lets three attempts fit in those 300 s, so a consumer must finish within 90 s.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

RETENTION = Duration.seconds(300)
# Three receives must fit in the retention period, and a consumer must finish within one.
VISIBILITY_TIMEOUT = Duration.seconds(90)
DLQ_RETENTION = Duration.days(14)
MAX_RECEIVE_COUNT = 3
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
    """``queue`` (SSE-SQS, TLS only, 300 s retention), its ``dead_letter_queue`` and the four ``rules``.

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
