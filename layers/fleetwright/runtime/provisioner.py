"""The provisioner function put together from its environment: the configuration (validated like
``fleetwright validate``), the connections, the NodePool source and its status writer, the idempotent run
(Powertools idempotency on the state table, keyed by the EventBridge event's id) and, with
``FLEETWRIGHT_TRACING=true``, the X-Ray tracer."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

from fleetwright.config.environment import FunctionEnvironment
from fleetwright.config.settings import HandlerSettings, ProvisionerConfig, settings_from_env
from fleetwright.kube.cache import ClusterCache
from fleetwright.kube.cluster import KubeCluster
from fleetwright.observability import metrics as obs
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.provisioning.nodepool_status import NodePoolStatus
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.runtime.connections import Connections, connect

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

# Powertools idempotency's record of an event lives an hour: EventBridge redelivers within minutes.
IDEMPOTENCY_SECONDS = 3600


@dataclass(slots=True)
class ProvisionerRuntime:
    """What the first invocation builds and later (warm) invocations reuse."""

    settings: HandlerSettings
    connections: Connections
    spans: obs.Spans
    nodepools: NodePoolSource  # NodePools from the cluster when it holds any
    idempotency: IdempotencyConfig
    run: Callable[..., dict[str, Any]]  # the idempotent pass: run(event=..., context=...)

    @property
    def kube(self) -> KubeCluster:
        return self.connections.kube

    @property
    def cache(self) -> ClusterCache:
        """Nodes and pods kept current by watches across warm invocations."""
        return self.connections.cache

    def stop(self) -> None:
        """Stop the cluster cache's watches."""
        self.connections.stop()


def tracing_spans(service: str | None) -> obs.Spans:
    """Spans traced with X-Ray through Powertools' Tracer (imported only when tracing is on)."""
    from aws_lambda_powertools import Tracer

    return obs.TracerSpans(Tracer(service=service))


def nodepool_source(
    to: Connections, config: ProvisionerConfig, sink: obs.MetricsSink, logger: Logger
) -> NodePoolSource:
    """NodePools read from the cluster each pass when it holds any, their status written back (launched
    claims counted in their resources before their Nodes register)."""
    status = NodePoolStatus(
        to.kube,
        cloud=to.cloud,
        metrics=sink,
        logger=logger,
        cache=to.cache,
        claims=to.state.nodeclaims.list,
        breakers=lambda: to.state.launchguard.breakers(consistent=False),
    )
    return NodePoolSource(to.kube, config, metrics=sink, logger=logger, status=status)


def build(logger: Logger, metrics: Metrics, environ: Mapping[str, str] | None = None) -> ProvisionerRuntime:
    """Read and validate the configuration and connect to AWS, the state table and Kubernetes.

    Raises :class:`~fleetwright.config.environment.ConfigError` with what to fix.
    """
    env = FunctionEnvironment.from_environ(environ)
    settings = settings_from_env(env)
    for warning in settings.config.warnings:
        logger.warning(warning)
    config = settings.config
    to = connect(config.cluster_name, settings.table_name, settings.region, settings.kubeconfig)
    spans = tracing_spans(metrics.service) if settings.tracing else obs.NoSpans()
    sink = obs.PowertoolsMetrics(metrics)
    source = nodepool_source(to, config, sink, logger)

    def run_pass(*, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """One invocation's watching (or, in economy mode, its single pass) until the deadline."""
        remaining = context.get_remaining_time_in_millis() / 1000.0
        deadline = time.monotonic() + max(0.0, remaining - config.deadline_margin_seconds)
        provisioner = Provisioner(
            to.kube,
            to.cloud,
            to.state,
            config,
            metrics=sink,
            logger=logger,
            spans=spans,
            holder=getattr(context, "aws_request_id", None),
            nodepool_source=source,
            cache=to.cache,
        )
        summary = provisioner.run_until(deadline).summary()
        logger.info("provisioner finished", extra={"summary": summary})
        return summary

    idempotency = IdempotencyConfig(
        event_key_jmespath="id", expires_after_seconds=IDEMPOTENCY_SECONDS, raise_on_no_idempotency_key=False
    )
    run = idempotent_function(
        data_keyword_argument="event",
        persistence_store=to.state.idempotency_layer("provisioner"),
        config=idempotency,
    )(run_pass)
    logger.info(
        "provisioner configured",
        extra={
            "cluster": config.cluster_name,
            "nodePools": [np.name for np in config.nodepools],
            "sources": settings.sources,
            "economy": config.economy,
        },
    )
    return ProvisionerRuntime(settings, to, spans, source, idempotency, run)


def limit_budget(config: ProvisionerConfig, started_with: float | None) -> float | None:
    """The time budget ``DurationOfTimeout`` measures: the whole invocation in economy mode; watching, the
    provisioner runs until its deadline on purpose, so its budget is the deadline margin it keeps."""
    if not config.economy and started_with is not None:
        return min(started_with, config.deadline_margin_seconds * 1000.0)
    return started_with
