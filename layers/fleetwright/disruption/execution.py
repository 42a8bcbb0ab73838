"""Acting on one disruption command: launch the replacements, then start a termination workflow per node.

Nothing is cordoned here: the workflow cordons, waits for the replacements (``waitForReplacement`` with
the launched claim ids), drains and terminates. So a command that fails half way leaves no node
cordoned without a workflow to finish the job. A replacement that cannot launch aborts the command
before any workflow starts; replacements that did launch stay and are used by the pods of the next
pass's scheduling (or removed as empty nodes later).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from fleetwright.claims.protocols import ClaimLauncher
from fleetwright.claims.terms import pool_terms
from fleetwright.disruption import metrics as m
from fleetwright.disruption.types import EXPIRED, UNHEALTHY, Command, DisruptionSettings, NodeState
from fleetwright.kube.events import EventRecorder
from fleetwright.kube.reasons import disruption_launching, nodeclaim_ref
from fleetwright.model.nodepool import NodePool
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.workflow.request import (
    ABANDON_AT_DEADLINE,
    DEFAULT_DRAIN_INTERVAL_SECONDS,
    DEFAULT_POLL_SECONDS,
    DELETE_AT_DEADLINE,
    TerminationRequest,
)
from fleetwright.workflow.starter import WorkflowStarter, execution_name

log = logging.getLogger(__name__)

# What happened to a command.
EXECUTED: Final = "executed"
DRY_RUN: Final = "dry-run"
INVALIDATED: Final = "invalidated"
FAILED: Final = "failed"


@dataclass(slots=True)
class CommandOutcome:
    """One command and what became of it: ``status`` is executed, dry-run, invalidated or failed.

    ``replacements`` are the launched claim ids, ``executions`` the workflow executions by node (an
    execution that already existed is listed too), ``detail`` says why a command was dropped or failed.
    """

    method: str
    reason: str
    nodes: list[str]
    instance_types: list[str]
    savings: float
    status: str = EXECUTED
    replacements: list[str] = field(default_factory=list)
    executions: dict[str, str] = field(default_factory=dict)
    detail: str = ""

    @classmethod
    def of(cls, command: Command, status: str = EXECUTED, detail: str = "") -> CommandOutcome:
        """The outcome record of ``command`` (before acting)."""
        return cls(
            method=command.method,
            reason=command.reason,
            nodes=command.node_names,
            instance_types=[c.instance_type for c in command.candidates],
            savings=command.savings,
            status=status,
            detail=detail,
        )

    def summary(self) -> dict[str, Any]:
        """JSON-friendly."""
        return {
            "method": self.method,
            "reason": self.reason,
            "nodes": self.nodes,
            "status": self.status,
            "replacements": self.replacements,
            "savingsPerHour": round(self.savings, 6),
            **({"detail": self.detail} if self.detail else {}),
        }


class CommandExecutor:
    """Launches a command's replacements through ``launcher`` and starts its workflows on ``workflow``.

    The workflow's deadline is now plus the node's ``terminationGracePeriod`` (its NodeClaim's, copied from
    the NodePool at launch; the NodePool's for claims recorded before), at which pods still on the node are
    deleted (a repair's deadline is now: its pods are deleted at once); when the pool sets none,
    ``settings.default_drain_seconds``, at which the disruption is called off instead (the node uncordoned and
    kept: PodDisruptionBudgets and ``karpenter.sh/do-not-disrupt`` are never overridden without an explicit
    deadline). ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        workflow: WorkflowStarter,
        launcher: ClaimLauncher | None,
        *,
        settings: DisruptionSettings | None = None,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        drain_interval_seconds: int = DEFAULT_DRAIN_INTERVAL_SECONDS,
        poll_seconds: int = DEFAULT_POLL_SECONDS,
        events: EventRecorder | None = None,
    ) -> None:
        self.workflow = workflow
        self.events = events  # DisruptionLaunching on each replacement NodeClaim
        self.launcher = launcher
        self.settings = settings or DisruptionSettings()
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock
        self.drain_interval_seconds = drain_interval_seconds
        self.poll_seconds = poll_seconds

    def execute(self, command: Command, nodepools: Mapping[str, NodePool]) -> CommandOutcome:
        """Replacements first, then one workflow per candidate. Never raises: failures are in the outcome."""
        outcome = CommandOutcome.of(command)
        try:
            launched = self._launch(command, outcome)
        except Exception as error:
            return self._fail(outcome, f"replacement launch failed: {type(error).__name__}: {error}")
        if launched is None:
            return outcome
        outcome.replacements = launched
        failures = []
        for candidate in command.candidates:
            failure = self._start(command, candidate, launched, nodepools.get(candidate.nodepool), outcome)
            if failure:
                failures.append(f"{candidate.name}: {failure}")
        if failures:
            self._fail(outcome, "; ".join(failures))
        if outcome.executions:
            outcome.status = EXECUTED
            self.metrics.add(m.DISRUPTION_COMMANDS, 1, COUNT, {"Method": command.method})
            if command.savings:
                self.metrics.add(m.DISRUPTION_SAVINGS, command.savings, "None", {"Method": command.method})
        return outcome

    def _start(
        self,
        command: Command,
        candidate: NodeState,
        launched: list[str],
        nodepool: NodePool | None,
        outcome: CommandOutcome,
    ) -> str:
        """Start ``candidate``'s termination workflow, its execution recorded in ``outcome``; why not ("" when
        it started or already runs)."""
        if not candidate.instance_id:
            return "no instance id"
        # The node's own terminationGracePeriod (its claim's, copied at launch; else its NodePool's).
        grace = (candidate.terms or pool_terms(nodepool)).termination_grace_period
        request = TerminationRequest(
            node=candidate.name,
            instance_id=candidate.instance_id,
            claim_id=candidate.claim_id,
            reason=command.reason,
            deadline=self._deadline(grace, command.reason),
            on_deadline=self._on_deadline(grace, command.reason),
            uncordon_on_failure=True,
            wait_for_replacement=bool(launched),
            replacement_claims=launched,
            drain_interval_seconds=self.drain_interval_seconds,
            poll_seconds=self.poll_seconds,
        )
        # One name per attempt: Step Functions keeps a name for 90 days, and a node whose disruption was
        # called off (or failed) may be disrupted again later.
        name = execution_name(candidate.instance_id, f"{command.reason}-{int(self.clock())}")
        try:
            started = self.workflow.start(name, request)
        except Exception as error:  # the other candidates still go; this node stays untouched
            return f"cannot start the termination workflow: {error}"
        outcome.executions[candidate.name] = started.execution
        if started.started:
            self.metrics.add(m.NODES_DISRUPTED, 1, COUNT, {"Reason": command.reason})
            if command.reason == UNHEALTHY:
                repaired = {"Condition": command.condition, "NodePool": candidate.nodepool}
                self.metrics.add(m.NODES_REPAIRED, 1, COUNT, repaired)
        self.log.info(
            "termination workflow started" if started.started else "termination workflow already running",
            extra={
                "node": candidate.name,
                "instanceId": candidate.instance_id,
                "reason": command.reason,
                "execution": started.execution,
                "replacementClaims": launched,
                "deadline": request.to_json()["deadline"],
            },
        )
        return ""

    def _launch(self, command: Command, outcome: CommandOutcome) -> list[str] | None:
        """The launched claim ids, or None when the command is aborted."""
        if not command.replacements:
            return []
        if self.launcher is None:
            self._fail(outcome, "replacements needed but no NodePool configuration to launch them with")
            return None
        report = self.launcher.launch_claims(command.replacements)
        launched = [r.id for r in report.launched]
        if report.error or report.failed or len(launched) < len(command.replacements):
            reasons = (
                "; ".join(f"{k}: {v}" for k, v in report.failed.items()) or report.error or "not launched"
            )
            self._fail(outcome, f"replacement launch failed, nothing terminated ({reasons})")
            outcome.replacements = launched
            return None
        if self.events is not None:
            self.events.publish(*(disruption_launching(nodeclaim_ref(c), command.reason) for c in launched))
        self.log.info(
            "replacements launched",
            extra={
                "method": command.method,
                "nodes": command.node_names,
                "replacementClaims": launched,
                "instanceTypes": [r.instance_type for r in report.launched],
                "pricePerHour": round(report.hourly_cost, 6),
            },
        )
        return launched

    def _fail(self, outcome: CommandOutcome, detail: str) -> CommandOutcome:
        outcome.status = FAILED
        outcome.detail = detail
        self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "Execution"})
        self.log.error(
            "disruption command failed",
            extra={"method": outcome.method, "nodes": outcome.nodes, "error": detail},
        )
        return outcome

    @staticmethod
    def _on_deadline(grace: int | None, reason: str = "") -> str:
        """Pods still on the node at the deadline are deleted only when the node has a
        ``terminationGracePeriod`` saying how long they may hold it, or for a repair; otherwise the
        disruption is called off."""
        if reason == UNHEALTHY:
            return DELETE_AT_DEADLINE
        return DELETE_AT_DEADLINE if grace is not None else ABANDON_AT_DEADLINE

    def _deadline(self, grace: int | None, reason: str) -> datetime:
        if reason == UNHEALTHY:
            # A repair does not wait for the pods (Karpenter sets the termination timestamp to now).
            seconds = 0.0
        elif grace is not None:
            seconds = float(grace)
        elif reason == EXPIRED:
            # Karpenter keeps an expired node cordoned until its pods may go; here for most of a day
            # (within the workflow's 24 h limit), then it is given back and the next pass tries again.
            seconds = self.settings.expiration_drain_seconds
        else:
            seconds = self.settings.default_drain_seconds
        return datetime.fromtimestamp(self.clock(), tz=UTC) + timedelta(seconds=seconds)
