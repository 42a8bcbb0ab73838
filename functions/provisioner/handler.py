"""Provisioner Lambda: an EventBridge schedule (every minute) invokes it; it watches unschedulable pods
and launches nodes for them until its deadline (remaining time minus a margin), then hands over to the
next invocation. See docs/provisioner.md.

Cold start: only Powertools' Logger and Metrics are imported here (~0.2 s). Configuration, boto3, the
Kubernetes adapter, Powertools idempotency (~0.7 s) and the X-Ray tracer (~0.5 s, only with
``FLEETWRIGHT_TRACING=true``) load on the first invocation, which also validates the NodePool documents
and fails with ``fleetwright validate``'s messages when they are wrong.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics

SERVICE = "fleetwright-provisioner"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Fleetwright")


@dataclass(slots=True)
class Runtime:
    """What the first invocation builds and later (warm) invocations reuse."""

    settings: Any
    kube: Any
    cloud: Any
    state: Any
    spans: Any
    idempotent_run: Any
    idempotency_config: Any
    nodepools: Any = None  # NodePoolSource: NodePools from the cluster when it holds any
    cache: Any = None  # ClusterCache: nodes and pods kept current by watches across warm invocations


# The runtime built by the first invocation (a dict so no ``global`` statement is needed).
_RUNTIME: dict[str, Runtime] = {}


def build_runtime(environ: dict[str, str] | None = None) -> Runtime:
    """Read and validate the configuration and connect to AWS, the state table and Kubernetes.

    Raises ``fleetwright.provisioning.ConfigError`` with what to fix.
    """
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

    from fleetwright.config.settings import settings_from_env
    from fleetwright.observability import metrics as obs
    from fleetwright.provisioning.nodepool_source import NodePoolSource
    from fleetwright.provisioning.nodepool_status import NodePoolStatus
    from fleetwright.runtime.connections import connect

    env = dict(os.environ if environ is None else environ)
    settings = settings_from_env(env)
    for warning in settings.config.warnings:
        logger.warning(warning)
    cluster = settings.config.cluster_name
    to = connect(cluster, settings.table_name, settings.region, settings.kubeconfig)
    state = to.state
    spans: Any = obs.NoSpans()
    if settings.tracing:
        from aws_lambda_powertools import Tracer

        spans = obs.TracerSpans(Tracer(service=SERVICE))
    config = IdempotencyConfig(
        event_key_jmespath="id", expires_after_seconds=3600, raise_on_no_idempotency_key=False
    )
    run = idempotent_function(
        data_keyword_argument="event",
        persistence_store=state.idempotency_layer("provisioner"),
        config=config,
    )(_run)
    logger.info(
        "provisioner configured",
        extra={
            "cluster": cluster,
            "nodePools": [np.name for np in settings.config.nodepools],
            "sources": settings.sources,
            "economy": settings.config.economy,
        },
    )
    source = NodePoolSource(
        to.kube,
        settings.config,
        metrics=obs.PowertoolsMetrics(metrics),
        logger=logger,
        status=NodePoolStatus(
            to.kube,
            resolver=getattr(to.cloud, "resolver", None),
            metrics=obs.PowertoolsMetrics(metrics),
            logger=logger,
            cache=to.cache,
        ),
    )
    return Runtime(settings, to.kube, to.cloud, state, spans, run, config, source, to.cache)


def runtime() -> Runtime:
    """The module-scope runtime (built by the first invocation)."""
    if "runtime" not in _RUNTIME:
        _RUNTIME["runtime"] = build_runtime()
    return _RUNTIME["runtime"]


def reset_runtime() -> None:
    """Forget the runtime (tests, or to re-read the configuration), stopping its cache's watches."""
    built = _RUNTIME.pop("runtime", None)
    if built is not None and built.cache is not None:
        built.cache.stop()
    _RUNTIME.clear()


def _run(*, event: dict[str, Any], context: Any) -> dict[str, Any]:
    from fleetwright.observability import metrics as obs
    from fleetwright.provisioning import Provisioner

    rt = runtime()
    config = rt.settings.config
    remaining = context.get_remaining_time_in_millis() / 1000.0
    deadline = time.monotonic() + max(0.0, remaining - config.deadline_margin_seconds)
    provisioner = Provisioner(
        rt.kube,
        rt.cloud,
        rt.state,
        config,
        metrics=obs.PowertoolsMetrics(metrics),
        logger=logger,
        spans=rt.spans,
        holder=getattr(context, "aws_request_id", None),
        nodepool_source=rt.nodepools,
        cache=rt.cache,
    )
    report = provisioner.run_until(deadline)
    summary = report.summary()
    logger.info("provisioner finished", extra={"summary": summary})
    return summary


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point."""
    from fleetwright.observability.limits import remaining_ms

    started_with = remaining_ms(context)
    try:
        rt = runtime()
    except Exception as error:
        logger.error("provisioner cannot start", extra={"error": str(error)})
        raise
    rt.idempotency_config.register_lambda_context(context)
    try:
        result: dict[str, Any] = rt.idempotent_run(event=event, context=context)
    finally:
        report_limits(rt.settings.config, started_with, remaining_ms(context))
    return result


def report_limits(config: Any, started_with: float | None, left: float | None) -> dict[str, float]:
    """``DurationOfTimeout`` and ``MemoryOfLimit`` (``fleetwright.observability.limits``). Watching, the
    provisioner runs until its deadline on purpose: its budget is the deadline margin it keeps."""
    from fleetwright.observability import limits
    from fleetwright.observability.metrics import PowertoolsMetrics

    budget = started_with
    if not config.economy and started_with is not None:
        budget = min(started_with, config.deadline_margin_seconds * 1000.0)
    published = limits.report_limits(PowertoolsMetrics(metrics), budget_ms=budget, left_ms=left)
    if any(value >= limits.WARNING_FRACTION for value in published.values()):
        logger.warning("provisioner close to its Lambda limits", extra={"limits": published})
    return published
