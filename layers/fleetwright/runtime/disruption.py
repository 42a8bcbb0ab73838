"""Putting a :class:`DisruptionController` together from the pieces every entry point has: the Kubernetes
adapter, the cloud provider, the state table, the NodePool configuration and a workflow starter.

The Lambda function builds it from its environment (:func:`build`) with a Step Functions starter; the local
sandbox passes
``fleetwright.local.inprocess.interruption.DeferredWorkflows`` and runs the queued workflows itself
(:func:`fleetwright.local.inprocess.disruption.run_disruption`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetwright.claims.lifecycle import ClaimLifecycle
from fleetwright.claims.static_limits import StaticLimitGuard
from fleetwright.cloud.provider import CloudProvider, InstanceReader, InventoryCloud
from fleetwright.config.environment import FunctionEnvironment
from fleetwright.config.names import ENV_STATE_MACHINE
from fleetwright.config.settings import ProvisionerConfig, settings_from_env
from fleetwright.disruption.config import DisruptionOptions, options_from_env
from fleetwright.disruption.controller import DisruptionController
from fleetwright.disruption.inputs import InputReader
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.kube.cluster import KubeCluster
from fleetwright.observability.metrics import MetricsSink, PowertoolsMetrics
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.runtime.connections import connect
from fleetwright.state.store import StateStore
from fleetwright.workflow.starter import StepFunctionsStarter, WorkflowStarter

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics

    from fleetwright.kube.cache import ClusterCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Parts:
    """What every piece of the controller is given: the cluster, the state table, where it reports, its
    clock and the cluster cache (None: each piece lists what it reads)."""

    kube: KubeCluster
    state: StateStore
    metrics: MetricsSink | None = None
    logger: logging.Logger | Any = None
    clock: Callable[[], float] = time.time
    cache: ClusterCache | None = None


def garbage_collector(
    kube: KubeCluster,
    cloud: InventoryCloud,
    state: StateStore,
    config: ProvisionerConfig,
    *,
    metrics: MetricsSink | None = None,
    logger: logging.Logger | Any = None,
    clock: Callable[[], float] = time.time,
    cache: ClusterCache | None = None,
) -> Any:
    """The :class:`~fleetwright.disruption.gc.GarbageCollector` for the cluster (leaked instances, Nodes
    without instances, claims that never registered); with ``cache`` it reads the Nodes from it (synced
    when the collection starts)."""
    from fleetwright.disruption.gc import DEFAULT_LIST_EVERY_SECONDS, GarbageCollector

    def cached_nodes() -> list[Any]:
        assert cache is not None
        cache.sync(reuse=True)  # the pass's sync when nothing was written since
        return cache.node_objects()

    return GarbageCollector(
        kube,
        cloud,
        state,
        registration_timeout_seconds=config.registration_timeout_seconds,
        metrics=metrics,
        logger=logger,
        clock=clock,
        nodes=cached_nodes if cache is not None else None,
        # Warm invocations (the cache kept) reuse the instance listing a while (see gc.py).
        list_every_seconds=DEFAULT_LIST_EVERY_SECONDS if cache is not None else 0.0,
    )


def sweep(parts: Parts, cloud: InstanceReader, workflow: Any) -> Any:
    """The :class:`~fleetwright.disruption.sweep.DisruptionSweep` for the cluster (nodes left marked by a
    workflow that failed or never started); ``workflow`` must list its running executions."""
    from fleetwright.disruption.sweep import DisruptionSweep, Sightings
    from fleetwright.state.interruptions import InterruptionRecords

    table, cluster = parts.state.table, parts.state.cluster
    return DisruptionSweep(
        parts.kube,
        cloud,
        workflow,
        InterruptionRecords(table, cluster),
        Sightings(table, cluster),
        metrics=parts.metrics,
        logger=parts.logger,
        clock=parts.clock,
        cache=parts.cache,
    )


def retirer(
    parts: Parts,
    cloud: InstanceReader,
    config: ProvisionerConfig,
    workflow: Any,
    drain_interval_seconds: int = 5,
    poll_seconds: int = 5,
) -> Any:
    """The :class:`~fleetwright.disruption.deletion.DeletionRetirer` for the cluster (deleted nodes, and
    nodes of a deleted NodeClaim or NodePool); the NodePools are ``config.nodepools`` as they are at each
    pass."""
    from fleetwright.disruption.deletion import DeletionRetirer

    return DeletionRetirer(
        parts.kube,
        cloud,
        workflow,
        parts.state.nodeclaims,
        lambda: list(config.nodepools),
        metrics=parts.metrics,
        logger=parts.logger,
        clock=parts.clock,
        drain_interval_seconds=drain_interval_seconds,
        poll_seconds=poll_seconds,
        cache=parts.cache,
    )


def claim_lifecycle(
    parts: Parts, cloud: CloudProvider, config: ProvisionerConfig, holder: str
) -> ClaimLifecycle:
    """The claim lifecycle replacements launch through, holding the launch lease as ``holder``."""
    return ClaimLifecycle(
        parts.kube,
        cloud,
        parts.state,
        config,
        wall_clock=parts.clock,
        metrics=parts.metrics,
        logger=parts.logger,
        holder=holder,
        cache=parts.cache,
    )


def input_reader(
    parts: Parts,
    cloud: CloudProvider,
    config: ProvisionerConfig,
    lifecycle: ClaimLifecycle,
    described: InstanceReader | None,
    settings: DisruptionSettings,
) -> InputReader:
    """The planner's input reader: instances described through ``described`` (kept across passes) when
    given, what node classes select now asked of ``cloud``."""
    return InputReader(
        parts.kube,
        described if described is not None else cloud,
        parts.state,
        config,
        catalogs=lifecycle.catalogs,
        amis=cloud.node_class_amis,
        reservations=cloud.expiring_reservations,
        subnets=cloud.node_class_subnets,
        security_groups=cloud.node_class_security_groups,
        class_reservations=lambda: lifecycle.reservations_by_class,
        settings=settings,
        clock=parts.clock,
        logger=parts.logger,
        cache=parts.cache,
    )


def build_controller(
    kube: KubeCluster,
    cloud: CloudProvider,
    state: StateStore,
    config: ProvisionerConfig,
    workflow: WorkflowStarter,
    *,
    options: DisruptionOptions | None = None,
    metrics: MetricsSink | None = None,
    logger: logging.Logger | Any = None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    collect_garbage: bool = True,
    drain_interval_seconds: int = 5,
    poll_seconds: int = 5,
    holder: str | None = None,
    cache: ClusterCache | None = None,
) -> DisruptionController:
    """A controller for the cluster: ``cloud`` is the cloud provider; replacements launch through a
    :class:`ClaimLifecycle` within the static pools' ``limits.nodes`` (:class:`StaticLimitGuard`). With
    ``cache`` (the handler's module-scope :class:`ClusterCache`) the pieces read the cluster from it and
    instance descriptions are kept across passes (``DescribedInstances``, refreshed by the collector's
    listing). A starter that cannot list its running executions (a test double) goes without the sweep
    and the deletion retirer; a dry run retires nothing."""
    from fleetwright.disruption.described import DescribedInstances, ObservedCloud

    options = options or DisruptionOptions()
    parts = Parts(kube, state, metrics, logger, clock, cache)
    described = DescribedInstances(cloud, clock=clock) if cache is not None else None
    lifecycle = claim_lifecycle(parts, cloud, config, holder or "disruption")
    gc_cloud = ObservedCloud(cloud, described) if described is not None else cloud
    lists = callable(getattr(workflow, "running", None))
    return DisruptionController(
        reader=input_reader(parts, cloud, config, lifecycle, described, options.settings),
        workflow=workflow,
        launcher=StaticLimitGuard(lifecycle),
        settings=options.settings,
        dry_run=options.dry_run,
        garbage_collector=(
            garbage_collector(
                kube, gc_cloud, state, config, metrics=metrics, logger=logger, clock=clock, cache=cache
            )
            if collect_garbage
            else None
        ),
        sweep=sweep(parts, cloud, workflow) if lists else None,
        retirer=(
            retirer(parts, cloud, config, workflow, drain_interval_seconds, poll_seconds)
            if lists and not options.dry_run
            else None
        ),
        metrics=metrics,
        logger=logger,
        clock=clock,
        monotonic=monotonic,
        drain_interval_seconds=drain_interval_seconds,
        poll_seconds=poll_seconds,
    )


@dataclass(slots=True)
class DisruptionFunction:
    """What the function's first invocation builds and warm invocations reuse: the controller, the NodePool
    source it re-reads at each pass, and the cluster cache kept current by watches."""

    controller: DisruptionController
    nodepools: NodePoolSource | None = None
    cache: ClusterCache | None = None

    def run_once(self) -> dict[str, Any]:
        """One pass (the NodePools re-read first: the provisioner writes their status); its summary."""
        if self.nodepools is not None:
            self.nodepools.refresh()
        summary: dict[str, Any] = self.controller.run_once().summary()
        return summary

    def stop(self) -> None:
        """Stop the cluster cache's watches."""
        if self.cache is not None:
            self.cache.stop()


def build(logger: Logger, metrics: Metrics, environ: Mapping[str, str] | None = None) -> DisruptionFunction:
    """The controller wired to AWS, the state table, the cluster and the termination state machine the
    environment names. Raises :class:`~fleetwright.config.environment.ConfigError` with what to fix."""
    env = FunctionEnvironment.from_environ(environ)
    env.require(ENV_STATE_MACHINE)
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
    sink = PowertoolsMetrics(metrics)
    # The same source as the provisioner's: NodePools from the cluster when it holds any.
    nodepools = NodePoolSource(to.kube, settings.config, metrics=sink, logger=logger)
    controller = build_controller(
        to.kube,
        to.cloud,
        to.state,
        settings.config,
        StepFunctionsStarter(to.clients.client("stepfunctions"), env.state_machine_arn),
        options=options,
        metrics=sink,
        logger=logger,
        cache=to.cache,
    )
    return DisruptionFunction(controller, nodepools, to.cache)
