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

**Only this stack's rules may send.** Each rule's target allows ``events.amazonaws.com`` to send when the
request's ``aws:SourceArn`` is that rule; an explicit Deny then refuses ``sqs:SendMessage`` to every other
principal and source (an Allow in an identity policy cannot override it), so nobody in the account can post
a crafted interruption event (docs/security.md). ``redrive_role_arns`` names the roles that may still send
(``aws:PrincipalArn``), for moving dead-lettered messages back with ``StartMessageMoveTask``, which sends
with its caller's permissions; the handler checks those messages like any other. Receiving and deleting
(the handler) and the move of failed messages to the dead-letter queue (SQS's own) are not affected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fleetwright.interruption.trust import HEALTH_EVENT_TYPE_CODES, HEALTH_STATUS_CODES

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
        "AWS Health scheduled changes for EC2 (retirements, stops, reboots, maintenance), upcoming or open",
        events.EventPattern(
            source=["aws.health"],
            detail_type=["AWS Health Event"],
            # Only the statuses and types the handler acts on (interruption/trust.py): a closed event or
            # another type would only be rejected there.
            detail={
                "service": ["EC2"],
                "eventTypeCategory": ["scheduledChange"],
                "eventTypeCode": sorted(HEALTH_EVENT_TYPE_CODES),
                "statusCode": sorted(HEALTH_STATUS_CODES),
            },
        ),
    ),
)


class InterruptionQueue(Construct):
    """``queue`` (SSE-SQS, TLS only, 4 days' retention), its ``dead_letter_queue``, the four ``rules`` and
    their targets' ``delivery_dead_letter_queue`` (events EventBridge could not deliver).

    Each rule's target adds a statement to the queue policy allowing ``events.amazonaws.com`` to send,
    limited to that rule's ARN; ``send_guard`` denies sending to anything else (but the roles of
    ``redrive_role_arns``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, redrive_role_arns: Sequence[str] = ()) -> None:
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
        # Events EventBridge could not deliver to the queue (after its retries: 24 hours): kept, alarmed
        # with the dead-letter queue. No queue may make it its dead-letter queue (deny-all redrive-allow
        # policy), so only EventBridge's failed deliveries land there.
        self.delivery_dead_letter_queue = sqs.Queue(
            self,
            "DeliveryDeadLetterQueue",
            retention_period=DLQ_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            redrive_allow_policy=sqs.RedriveAllowPolicy(redrive_permission=sqs.RedrivePermission.DENY_ALL),
        )
        self.rules: list[events.Rule] = []
        for kind in INTERRUPTION_EVENTS:
            rule = events.Rule(self, kind.rule_id, description=kind.description, event_pattern=kind.pattern)
            rule.add_target(targets.SqsQueue(self.queue, dead_letter_queue=self.delivery_dead_letter_queue))
            self.rules.append(rule)
        self.send_guard = self._deny_other_senders(list(redrive_role_arns))

    def _deny_other_senders(self, redrive_role_arns: list[str]) -> iam.PolicyStatement:
        """Deny ``sqs:SendMessage`` unless the request comes from one of the rules (or a redrive role)."""
        not_from: dict[str, list[str]] = {"aws:SourceArn": [rule.rule_arn for rule in self.rules]}
        if redrive_role_arns:
            not_from["aws:PrincipalArn"] = redrive_role_arns
        statement = iam.PolicyStatement(
            sid="OnlyInterruptionRulesSend",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["sqs:SendMessage"],
            resources=[self.queue.queue_arn],
            conditions={"ArnNotEquals": not_from},
        )
        self.queue.add_to_resource_policy(statement)
        return statement
