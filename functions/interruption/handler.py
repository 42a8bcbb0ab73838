"""Interruption handler: the interruption queue (EventBridge → SQS) delivers batches of EC2 and AWS Health
events; each message is parsed into a typed event and acted on (docs/termination.md).

Powertools' ``BatchProcessor`` reports partial batch failures: a malformed or unknown message is logged,
counted (``InterruptionMessagesRejected``) and failed back alone, so it reaches the dead-letter queue after
the queue's maxReceiveCount while the rest of the batch succeeds.

Cold start: Powertools' Logger, Metrics and batch utility only; the configuration, boto3 and the Kubernetes
adapter load on the first record.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

SERVICE = "fleetwright-interruption"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Fleetwright", service=SERVICE)
# A batch whose every message is bad is still answered with batchItemFailures, not an invocation error:
# the messages go back to the queue either way, and Lambda's error alarm stays for the handler's own faults.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

ENV_STATE_MACHINE = "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"
ENV_REPLACE_ON_REBALANCE = "FLEETWRIGHT_REPLACE_ON_REBALANCE"
REJECTED = "InterruptionMessagesRejected"

# The controller built for the first record (a dict so no ``global`` statement is needed).
_RUNTIME: dict[str, Any] = {}


def build_controller(environ: dict[str, str] | None = None) -> Any:
    """An ``InterruptionController`` wired to AWS, the state table, the cluster and the state machine.

    Without a usable NodePool configuration the controller still drains and terminates, but launches no
    replacements (logged as an error).
    """
    from fleetwright.config.settings import ENV_CLUSTER, ENV_KUBECONFIG, ENV_TABLE, settings_from_env
    from fleetwright.interruption.controller import InterruptionController, InterruptionSettings
    from fleetwright.interruption.replacement import ReplacementLauncher
    from fleetwright.observability.metrics import PowertoolsMetrics
    from fleetwright.provisioning.provisioner import Provisioner
    from fleetwright.runtime.connections import connect
    from fleetwright.state.interruptions import InterruptionRecords
    from fleetwright.workflow.claimbook import StoreClaimBook
    from fleetwright.workflow.starter import StepFunctionsStarter

    env = dict(os.environ if environ is None else environ)
    missing = [v for v in (ENV_CLUSTER, ENV_TABLE, ENV_STATE_MACHINE) if not env.get(v)]
    if missing:
        raise RuntimeError(f"missing environment variable(s): {', '.join(missing)}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    to = connect(env[ENV_CLUSTER], env[ENV_TABLE], region, env.get(ENV_KUBECONFIG))
    clients, state, cloud, kube = to.clients, to.state, to.cloud, to.kube
    try:
        config = settings_from_env(env).config
        replacements = ReplacementLauncher(Provisioner(kube, cloud, state, config, logger=logger))
    except Exception as error:
        logger.error("no NodePool configuration; replacements disabled", extra={"error": str(error)})
        replacements = None
    settings = InterruptionSettings(
        replace_on_rebalance=env.get(ENV_REPLACE_ON_REBALANCE, "").strip().lower()
        in ("1", "true", "yes", "on")
    )
    return InterruptionController(
        kube=kube,
        cloud=cloud,
        unavailable=state.unavailable,
        workflow=StepFunctionsStarter(clients.client("stepfunctions"), env[ENV_STATE_MACHINE]),
        records=InterruptionRecords(state.table, state.cluster),
        claims=StoreClaimBook(state.nodeclaims),
        replacements=replacements,
        settings=settings,
        metrics=PowertoolsMetrics(metrics),
        logger=logger,
    )


def controller() -> Any:
    """The module-scope controller (built for the first record)."""
    if "controller" not in _RUNTIME:
        _RUNTIME["controller"] = build_controller()
    return _RUNTIME["controller"]


def set_controller(value: Any) -> None:
    """Use ``value`` (an ``InterruptionController``) instead of building one (tests, the local demo)."""
    _RUNTIME["controller"] = value


def reset_controller() -> None:
    """Forget the controller (the next record builds it again)."""
    _RUNTIME.clear()


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
    outcomes = controller().handle(event)
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
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point: ``{"batchItemFailures": [...]}`` names the messages to deliver again."""
    controller().expect(batch_instances(event))
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
