"""The whole interruption chain in one process, for the local demo: an AWS-shaped event goes through the
same :class:`InterruptionController` the Lambda uses (unavailable offerings, replacement launch, workflow
start), and the termination workflow then runs in-process (:class:`InProcessWorkflow`) against the same
Kubernetes API and EC2 endpoints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwright.cloud.provider import CloudProvider
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.interruption import samples
from fleetwright.interruption.controller import InterruptionController, InterruptionSettings, Outcome
from fleetwright.interruption.events import parse_message
from fleetwright.interruption.replacement import ReplacementLauncher
from fleetwright.interruption.trust import EventOrigin
from fleetwright.kube.cluster import KubeCluster
from fleetwright.local.inprocess.termination import InProcessWorkflow, LocalExecution
from fleetwright.observability.metrics import MetricsSink
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.state.interruptions import InterruptionRecords
from fleetwright.state.store import StateStore
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.claimbook import StoreClaimBook
from fleetwright.workflow.request import TerminationRequest
from fleetwright.workflow.starter import StartResult

REASONS = ("spot-interruption", "rebalance", "scheduled-change", "stopped", "terminated")


class DeferredWorkflows:
    """A :class:`WorkflowStarter` that queues executions and runs them when asked, so the controller
    finishes (launching replacements) before the drain starts, as with Step Functions."""

    def __init__(self, runner: InProcessWorkflow) -> None:
        self.runner = runner
        self.queued: dict[str, dict[str, Any]] = {}

    def status(self, name: str) -> str | None:
        """RUNNING while queued, then the local execution's status; None when unknown."""
        if name in self.queued:
            return "RUNNING"
        execution = self.runner.executions.get(name)
        return execution.status if execution is not None else None

    def already_started(self, name: str) -> bool:
        """True when an execution by that name was queued or has run."""
        return self.status(name) is not None

    def running(self) -> list[str]:
        """The queued executions (they run when asked)."""
        return [*self.queued, *(n for n, e in self.runner.executions.items() if e.status == "RUNNING")]

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Queue the execution (``started=False`` when the name is taken)."""
        if self.already_started(name):
            return StartResult(False, name)
        self.queued[name] = json.loads(json.dumps(request.to_json()))
        return StartResult(True, name)

    def run_queued(self) -> list[LocalExecution]:
        """Run every queued execution to its end."""
        done = []
        while self.queued:
            name, request = next(iter(self.queued.items()))
            del self.queued[name]
            done.append(self.runner.run(name, request))
        return done


@dataclass(slots=True)
class ChainReport:
    """The event that was sent, what the controller did, and the workflow executions that ran."""

    event: dict[str, Any]
    outcomes: list[Outcome] = field(default_factory=list)
    executions: list[LocalExecution] = field(default_factory=list)


def demo_event(instance_id: str, reason: str, region: str, now: datetime) -> dict[str, Any]:
    """The AWS-shaped event for ``reason`` (one of :data:`REASONS`)."""
    if reason == "spot-interruption":
        return samples.spot_interruption(instance_id, region, now)
    if reason == "rebalance":
        return samples.rebalance_recommendation(instance_id, region, now)
    if reason == "scheduled-change":
        return samples.scheduled_change(instance_id, region, now + timedelta(minutes=15), now)
    if reason in ("stopped", "terminated"):
        return samples.state_change(instance_id, reason, region, now)
    raise ValueError(f"unknown interruption reason {reason!r} (one of: {', '.join(REASONS)})")


def run_interruption(
    instance_id: str,
    reason: str,
    *,
    kube: KubeCluster,
    cloud: CloudProvider,
    state: StateStore,
    config: ProvisionerConfig | None,
    region: str = "us-east-1",
    settings: InterruptionSettings | None = None,
    metrics: MetricsSink | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> ChainReport:
    """Send an interruption event for ``instance_id`` through the whole chain, in this process.

    ``cloud`` is the cloud provider (``AwsProvider`` against the emulator's EC2); ``config`` gives the
    NodePools for replacements (None: no replacement).
    ``settings`` default to 1 s drain and poll intervals (the demo is watched by a person).
    """
    settings = settings or InterruptionSettings(drain_interval_seconds=1, poll_seconds=1)
    now = datetime.fromtimestamp(clock(), tz=UTC)
    event = demo_event(instance_id, reason, region, now)
    claims = StoreClaimBook(state.nodeclaims, clock=clock)
    steps = TerminationSteps(kube, cloud, claims, metrics=metrics, clock=clock)
    workflows = DeferredWorkflows(InProcessWorkflow(steps, sleep=sleep))
    replacements = (
        ReplacementLauncher(Provisioner(kube, cloud, state, config, wall_clock=clock, metrics=metrics))
        if config is not None
        else None
    )
    controller = InterruptionController(
        kube=kube,
        cloud=cloud,
        origin=EventOrigin(account=samples.ACCOUNT, region=region),
        unavailable=cloud.unavailable,
        workflow=workflows,
        records=InterruptionRecords(state.table, state.cluster),
        claims=claims,
        replacements=replacements,
        settings=settings,
        metrics=metrics,
        clock=clock,
    )
    report = ChainReport(event)
    report.outcomes = controller.handle(parse_message(json.dumps(event)))
    report.executions = workflows.run_queued()
    return report
