"""Interruption handler: the interruption queue (EventBridge → SQS) delivers batches of EC2 and AWS Health
events; each message is parsed into a typed event and acted on (docs/termination.md).

Nothing on the queue is trusted (docs/security.md): a message that is not an event Fleetwright handles, or
an event that fails a check (another account or region, resources not naming the instance, a malformed
instance id, too old or dated in the future, an AWS Health event of another status or type or naming too
many instances, a spot warning for an instance that is not spot) is rejected: logged with its reason,
counted (``InterruptionMessagesRejected`` by ``Reason``) and deleted, never retried, since the same message
would be refused again. Powertools' ``BatchProcessor`` reports partial batch failures: a message whose
handling fails (an AWS or Kubernetes outage, another delivery at work on the same interruption) goes back to
the queue alone, and reaches the dead-letter queue after the queue's maxReceiveCount.

Cold start: Powertools' Logger, Metrics and batch utility only; the configuration, boto3 and the Kubernetes
adapter load on the first record (``fleetwright.runtime.interruption``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from fleetwright.runtime.function import FunctionRuntime

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetwright.interruption.controller import InterruptionController

SERVICE = "fleetwright-interruption"


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
    """Parse one message and act on it; raising fails just this message back to the queue, a rejected
    message is recorded and deleted."""
    from fleetwright.interruption.events import MessageError, parse_message

    controller = runtime.start()
    try:
        event = parse_message(record.body)
        outcomes = controller.handle(event)
    except MessageError as error:
        controller.reject(error, record.message_id, record.body)
        return []
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


def batch_instances(event: dict[str, Any], controller: InterruptionController) -> list[str]:
    """The instances the batch's admissible messages name (the others are rejected later, one by one)."""
    from fleetwright.interruption.events import MessageError, parse_message

    found: list[str] = []
    for record in event.get("Records") or []:
        try:
            parsed = parse_message(str(record.get("body") or ""))
            controller.admit(parsed)
        except (MessageError, AttributeError, TypeError):
            continue
        found.extend(parsed.instance_ids)
    return found


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """The Lambda entry point: ``{"batchItemFailures": [...]}`` names the messages to deliver again."""
    with runtime.kubernetes_deadline(context):
        controller = runtime.start()
        controller.expect(batch_instances(event, controller))
        try:
            return process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        finally:
            controller.batch_done()
