"""Termination workflow steps: one Lambda serves every Task state of the state machine
(``infra/termination_workflow.py``); the input names the step: ``{"step": "drain", "state": {...}}`` and the
output is the new workflow state. See docs/termination.md.

Errors worth retrying (throttling, 5xx, dropped connections) are raised as ``TransientError``, the name the
state machine's Retry matches; any other exception takes the workflow's failure path.

Cold start: only Powertools' Logger and Metrics are imported here; boto3 and the Kubernetes adapter load on
the first invocation (``fleetwright.runtime.termination``, on the shared connections) and are kept for warm
ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from fleetwright.runtime.function import FunctionRuntime

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetwright.termination.steps import TerminationSteps

SERVICE = "fleetwright-termination"


def _build(logger: Logger, metrics: Metrics) -> TerminationSteps:
    from fleetwright.runtime.termination import build

    return build(logger, metrics)


runtime: FunctionRuntime[TerminationSteps] = FunctionRuntime("termination", SERVICE, _build)
logger = runtime.logger
metrics = runtime.metrics


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point: run ``event["step"]`` on ``event["state"]``; ``event["context"]`` carries
    the execution's name, start time and state machine (``$$.Execution``, ``$$.StateMachine``)."""
    from fleetwright.termination.errors import TransientError, is_transient

    step = str(event.get("step") or "")
    state = event.get("state") or {}
    request = state.get("request") or state
    context_object = event.get("context") or {}
    logger.append_keys(
        step=step,
        node=request.get("node"),
        instanceId=request.get("instanceId"),
        execution=context_object.get("execution"),
    )
    try:
        # Building the steps inside: an AWS or Kubernetes outage at the first invocation is retried too.
        with runtime.kubernetes_deadline(context):
            result: dict[str, Any] = runtime.start().run(step, state, context_object)
    except Exception as error:
        if is_transient(error):
            logger.warning("transient error; the workflow retries", extra={"error": str(error)})
            raise TransientError(f"{type(error).__name__}: {error}") from error
        raise
    return result
