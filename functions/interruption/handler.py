"""Interruption handler: the interruption queue (EventBridge → SQS) delivers batches of EC2 and AWS Health
events; each message is parsed into a typed event and acted on (docs/termination.md).

Powertools' ``BatchProcessor`` reports partial batch failures: a malformed or unknown message is logged,
counted (``InterruptionMessagesRejected``) and failed back alone, so it reaches the dead-letter queue after
the queue's maxReceiveCount while the rest of the batch succeeds.

Cold start: Powertools' Logger, Metrics and batch utility only; the configuration, boto3 and the Kubernetes
adapter load on the first record (``fleetwright.runtime.interruption``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from fleetwright.runtime.function import FunctionRuntime

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetwright.interruption.controller import InterruptionController

SERVICE = "fleetwright-interruption"
REJECTED = "InterruptionMessagesRejected"


def _build(logger: Logger, metrics: Metrics) -> InterruptionController:
    from fleetwright.runtime.interruption import build

    return build(logger, metrics)


runtime: FunctionRuntime[InterruptionController] = FunctionRuntime("interruption", SERVICE, _build)
logger = runtime.logger
metrics = runtime.metrics
# A batch whose every message is bad is still answered with batchItemFailures, not an invocation error:
# the messages go back to the queue either way, and Lambda's error alarm stays for the handler's own faults.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> list[dict[str, Any]]:
    """Parse one message and act on it; raising fails just this message back to the queue."""
    from fleetwright.interruption.events import MessageError, parse_message

    try:
        event = parse_message(record.body)
    except MessageError as error:
        metrics.add_metric(name=REJECTED, unit=MetricUnit.Count, value=1)
        logger.error(
            "interruption message rejected",
            extra={
                "messageId": record.message_id,
                "problem": error.kind,
                "error": str(error),
                "body": record.body[:500],
            },
        )
        raise
    outcomes = runtime.start().handle(event)
    summary = [
        {
            "instanceId": o.instance_id,
            "kind": o.kind,
            "action": o.action,
            "node": o.node,
            "execution": o.execution,
        }
        for o in outcomes
    ]
    logger.info(
        "interruption event handled",
        extra={"messageId": record.message_id, "eventId": event.id, "outcomes": summary},
    )
    return summary


def batch_instances(event: dict[str, Any]) -> list[str]:
    """The instances the batch's parseable messages name (malformed ones are rejected later, one by one)."""
    from fleetwright.interruption.events import MessageError, parse_message

    found: list[str] = []
    for record in event.get("Records") or []:
        try:
            found.extend(parse_message(str(record.get("body") or "")).instance_ids)
        except (MessageError, AttributeError, TypeError):
            continue
    return found


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """The Lambda entry point: ``{"batchItemFailures": [...]}`` names the messages to deliver again."""
    with runtime.kubernetes_deadline(context):
        runtime.start().expect(batch_instances(event))
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
