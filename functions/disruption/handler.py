"""Disruption Lambda: an EventBridge schedule (every minute) invokes it; each invocation makes one pass —
give back nodes left cordoned with no termination workflow behind them (the sweep), read the cluster,
decide which nodes to remove (emptiness, drift, consolidation, expiration), launch replacements, start the
termination workflows, collect garbage — and returns a short summary (docs/disruption.md).

Reserved concurrency 1 keeps passes from overlapping. Cold start: only Powertools' Logger and Metrics are
imported here; the configuration (validated like ``fleetwright validate``), boto3, the Kubernetes adapter
and the planner load on the first invocation (``fleetwright.runtime.disruption``), which fails with the
validation messages when the NodePool documents are wrong. With ``FLEETWRIGHT_DISRUPTION_DRY_RUN=true``
decisions are logged, nothing is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from fleetwright.runtime.function import FunctionRuntime

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from fleetwright.runtime.disruption import DisruptionFunction

SERVICE = "fleetwright-disruption"


def _build(logger: Logger, metrics: Metrics) -> DisruptionFunction:
    from fleetwright.runtime.disruption import build

    return build(logger, metrics)


runtime: FunctionRuntime[DisruptionFunction] = FunctionRuntime(
    "disruption", SERVICE, _build, stop=lambda built: built.stop()
)
logger = runtime.logger
metrics = runtime.metrics


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point: one disruption pass; its summary."""
    started_with = runtime.remaining_ms(context)
    function = runtime.start()
    try:
        with runtime.kubernetes_deadline(context):
            summary = function.run_once()
    finally:
        runtime.report_limits(started_with, runtime.remaining_ms(context))
    logger.info("disruption pass finished", extra={"summary": summary})
    return summary
