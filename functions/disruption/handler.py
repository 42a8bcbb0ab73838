"""Disruption Lambda: an EventBridge schedule (every minute) invokes it; each invocation makes one pass —
give back nodes left cordoned with no termination workflow behind them (the sweep), read the cluster,
decide which nodes to remove (emptiness, drift, consolidation, expiration), launch replacements, start the
termination workflows, collect garbage — and returns a short summary (docs/disruption.md).

Reserved concurrency 1 keeps passes from overlapping. Cold start: only Powertools' Logger and Metrics are
imported here; the configuration (validated like ``fleetwright validate``), boto3, the Kubernetes adapter
and the planner load on the first invocation, which fails with the validation messages when the NodePool
documents are wrong. With ``FLEETWRIGHT_DISRUPTION_DRY_RUN=true`` decisions are logged, nothing is done.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics

SERVICE = "fleetwright-disruption"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Fleetwright", service=SERVICE)

ENV_STATE_MACHINE = "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"

# The controller built by the first invocation (a dict so no ``global`` statement is needed).
_RUNTIME: dict[str, Any] = {}


def build_controller(environ: dict[str, str] | None = None) -> Any:
    """A ``DisruptionController`` wired to AWS, the state table, the cluster and the termination state
    machine. Raises ``fleetwright.provisioning.ConfigError`` with what to fix."""
    from fleetwright.config.settings import ConfigError, settings_from_env
    from fleetwright.disruption.config import options_from_env
    from fleetwright.observability.metrics import PowertoolsMetrics
    from fleetwright.provisioning.nodepool_source import NodePoolSource
    from fleetwright.runtime.connections import connect
    from fleetwright.runtime.disruption import build_controller as wire
    from fleetwright.workflow.starter import StepFunctionsStarter

    env = dict(os.environ if environ is None else environ)
    if not env.get(ENV_STATE_MACHINE, "").strip():
        raise ConfigError(f"missing environment variable(s): {ENV_STATE_MACHINE}")
    settings = settings_from_env(env)
    options = options_from_env(env)
    for warning in settings.config.warnings:
        logger.warning(warning)
    cluster = settings.config.cluster_name
    to = connect(cluster, settings.table_name, settings.region, settings.kubeconfig)
    logger.info(
        "disruption configured",
        extra={
            "cluster": cluster,
            "nodePools": [np.name for np in settings.config.nodepools],
            "sources": settings.sources,
            "dryRun": options.dry_run,
            "settings": {
                "minSavingFraction": options.settings.min_saving_fraction,
                "minSavingDollars": options.settings.min_saving_dollars,
                "minNodeAgeSeconds": options.settings.min_node_age_seconds,
                "spotToSpot": options.settings.spot_to_spot,
                "nodeRepair": options.settings.node_repair,
            },
        },
    )
    # The same source as the provisioner's: NodePools from the cluster when it holds any, re-read at each
    # pass (the provisioner writes their status).
    _RUNTIME["nodepools"] = NodePoolSource(
        to.kube, settings.config, metrics=PowertoolsMetrics(metrics), logger=logger
    )
    # Nodes, pods, DaemonSets and PDBs kept current by watches across warm invocations.
    _RUNTIME["cache"] = to.cache
    return wire(
        to.kube,
        to.cloud,
        to.state,
        settings.config,
        StepFunctionsStarter(to.clients.client("stepfunctions"), env[ENV_STATE_MACHINE].strip()),
        options=options,
        metrics=PowertoolsMetrics(metrics),
        logger=logger,
        cache=to.cache,
    )


def controller() -> Any:
    """The module-scope controller (built by the first invocation)."""
    if "controller" not in _RUNTIME:
        _RUNTIME["controller"] = build_controller()
    return _RUNTIME["controller"]


def set_controller(value: Any) -> None:
    """Use ``value`` (a ``DisruptionController``) instead of building one (tests, the local demo)."""
    _RUNTIME["controller"] = value


def reset_controller() -> None:
    """Forget the controller (the next invocation builds it again, re-reading the configuration), stopping
    its cache's watches."""
    cache = _RUNTIME.get("cache")
    if cache is not None:
        cache.stop()
    _RUNTIME.clear()


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point: one disruption pass; its summary."""
    from fleetwright.observability.limits import remaining_ms

    started_with = remaining_ms(context)
    try:
        runner = controller()
    except Exception as error:
        logger.error("disruption cannot start", extra={"error": str(error)})
        raise
    try:
        source = _RUNTIME.get("nodepools")
        if source is not None:
            source.refresh()
        report = runner.run_once()
    finally:
        report_limits(started_with, remaining_ms(context))
    summary: dict[str, Any] = report.summary()
    logger.info("disruption pass finished", extra={"summary": summary})
    return summary


def report_limits(started_with: float | None, left: float | None) -> dict[str, float]:
    """``DurationOfTimeout`` (of the time the invocation started with) and ``MemoryOfLimit``
    (``fleetwright.observability.limits``); a warning in the log from 0.8 on."""
    from fleetwright.observability import limits
    from fleetwright.observability.metrics import PowertoolsMetrics

    published = limits.report_limits(PowertoolsMetrics(metrics), budget_ms=started_with, left_ms=left)
    if any(value >= limits.WARNING_FRACTION for value in published.values()):
        logger.warning("disruption close to its Lambda limits", extra={"limits": published})
    return published
