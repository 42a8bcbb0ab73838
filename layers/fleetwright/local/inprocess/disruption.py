"""A disruption pass run in this process (the sandbox, the demo and the tests), then the termination
workflows it started, run to their end in this process too."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwright.cloud.provider import CloudProvider
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.controller import DisruptionReport
from fleetwright.kube.cluster import KubeCluster
from fleetwright.local.inprocess.interruption import DeferredWorkflows
from fleetwright.local.inprocess.termination import InProcessWorkflow
from fleetwright.observability.metrics import MetricsSink
from fleetwright.runtime.disruption import build_controller
from fleetwright.state.store import StateStore
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.claimbook import StoreClaimBook


@dataclass(slots=True)
class DisruptionRun:
    """A pass run in-process: the controller's report and the termination workflows that then ran."""

    report: DisruptionReport
    executions: list[Any] = field(default_factory=list)


def run_disruption(
    *,
    kube: KubeCluster,
    cloud: CloudProvider,
    state: StateStore,
    config: ProvisionerConfig,
    options: DisruptionOptions | None = None,
    metrics: MetricsSink | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    collect_garbage: bool = True,
) -> DisruptionRun:
    """One disruption pass in this process (the local sandbox and demo), then the termination workflows
    it started, run to their end with :class:`~fleetwright.local.inprocess.termination.InProcessWorkflow`
    (1 s drain and poll intervals: a person is watching)."""
    claims = StoreClaimBook(state.nodeclaims, clock=clock)
    steps = TerminationSteps(kube, cloud, claims, metrics=metrics, clock=clock)
    workflows = DeferredWorkflows(InProcessWorkflow(steps, sleep=sleep))
    controller = build_controller(
        kube,
        cloud,
        state,
        config,
        workflows,
        options=options,
        metrics=metrics,
        clock=clock,
        collect_garbage=collect_garbage,
        drain_interval_seconds=1,
        poll_seconds=1,
    )
    report = controller.run_once()
    return DisruptionRun(report, workflows.run_queued())
