"""Provisioner Lambda: an EventBridge schedule (every minute) invokes it; it watches unschedulable pods
and launches nodes for them until its deadline (remaining time minus a margin), then hands over to the
next invocation. See docs/provisioner.md.

Cold start: only Powertools' Logger and Metrics are imported here (~0.1 s). Configuration, boto3, the
Kubernetes adapter, Powertools idempotency (~0.7 s) and the X-Ray tracer (~0.5 s, only with
``FLEETWRIGHT_TRACING=true``) load on the first invocation (``fleetwright.runtime.provisioner``), which
also validates the NodePool documents and fails with ``fleetwright validate``'s messages when they are
wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from fleetwright.runtime.function import FunctionRuntime

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetwright.runtime.provisioner import ProvisionerRuntime

SERVICE = "fleetwright-provisioner"


def _build(logger: Logger, metrics: Metrics) -> ProvisionerRuntime:
    from fleetwright.runtime.provisioner import build

    return build(logger, metrics)


runtime: FunctionRuntime[ProvisionerRuntime] = FunctionRuntime(
    "provisioner", SERVICE, _build, stop=lambda built: built.stop()
)
logger = runtime.logger
metrics = runtime.metrics


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point: the invocation's passes (once per EventBridge event id); their summary."""
    from fleetwright.runtime.provisioner import limit_budget

    started_with = runtime.remaining_ms(context)
    rt = runtime.start()
    rt.idempotency.register_lambda_context(context)
    try:
        with runtime.kubernetes_deadline(context):
            return rt.run(event=event, context=context)
    finally:
        runtime.report_limits(limit_budget(rt.settings.config, started_with), runtime.remaining_ms(context))
