"""The disruption controller: one pass reads the cluster, asks the planner what to remove, re-validates a
stale decision, acts on it, and collects garbage.

A pass (``DisruptionController.run_once``):

0. retires deleted nodes (``deletion.DeletionRetirer``, when one is given): a Node deleted with its
   termination finalizer, or whose NodeClaim or NodePool is gone, gets its termination workflow; then
   sweeps (``sweep.DisruptionSweep``, when one is given): nodes left cordoned and tainted by a workflow
   that failed or never started are given back (or their interruption re-driven), so they count as
   normal nodes in this very pass instead of holding their NodePool's budget;
1. reads the cluster into a :class:`DisruptionInput` (``inputs.InputReader``), updating the "empty since"
   markers in the state table; nodes whose capacity reservation ended are relabelled on-demand
   (``demotion``);
2. plans (``planner.plan``): repairs of unhealthy nodes (with node repair on), forceful expirations and
   at most one graceful command; every decision is logged with its nodes, instance types, replacements
   and expected saving; unhealthy nodes the NodePool's 20 % rule keeps get ``NodeRepairBlocked``;
3. when acting comes more than ``revalidate_after_seconds`` after the cluster was read, reads it again and
   drops the commands ``planner.validate`` no longer accepts;
4. executes the rest (``execution.CommandExecutor``): replacements first, then one termination workflow
   per node, which cordons, waits for the replacements, drains and terminates;
5. runs the garbage collector, when one is given.

With ``dry_run`` the pass stops after logging the decisions. Errors are logged, counted
(``DisruptionErrors``) and reported, never raised: the next pass starts over from the cluster.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from fleetwright.claims.nodeclaim_objects import NodeClaimObjects
from fleetwright.claims.protocols import ClaimLauncher
from fleetwright.disruption import metrics as m
from fleetwright.disruption.balanced import BALANCED_K, Score
from fleetwright.disruption.execution import (
    DRY_RUN,
    EXECUTED,
    INVALIDATED,
    CommandExecutor,
    CommandOutcome,
)
from fleetwright.disruption.inputs import Gathered, InputReader
from fleetwright.disruption.promised import reserve_promised_pods, room_is_kept
from fleetwright.disruption.types import Command, DisruptionInput, DisruptionSettings, NodeState, Plan
from fleetwright.kube import reasons
from fleetwright.kube.events import Event, EventRecorder, ObjectRef
from fleetwright.observability.metrics import COUNT, MILLISECONDS, NONE, MetricsSink, NullMetrics
from fleetwright.workflow.request import epoch_to_iso
from fleetwright.workflow.starter import WorkflowStarter

log = logging.getLogger(__name__)

MAX_LOGGED_SKIPS = 50

Planner = Callable[[DisruptionInput], Plan]
Validator = Callable[[Command, DisruptionInput], "str | None"]


def _default_planner() -> tuple[Planner, Validator]:
    # Imported on first use: the planner pulls in the scheduler, which the handler's cold start need not pay.
    from fleetwright.disruption.planner import plan, validate

    return plan, validate


@dataclass(slots=True)
class DisruptionReport:
    """What one pass saw, decided and did."""

    dry_run: bool = False
    nodes: int = 0  # Fleetwright's nodes
    candidates: int = 0  # of those, the ones not already being disrupted
    hourly_cost: float = 0.0
    decision_seconds: float = 0.0
    rounds: int = 0  # reads and plans: one more after each graceful command started
    revalidated: bool = False
    commands: list[CommandOutcome] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    garbage: Any = None
    swept: Any = None
    retired: Any = None
    problems: list[str] = field(default_factory=list)
    error: str = ""

    def outcomes(self, status: str) -> list[CommandOutcome]:
        """The commands that ended with ``status``."""
        return [c for c in self.commands if c.status == status]

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly summary (the handler's response)."""
        garbage: Any = None
        if self.garbage is not None:
            found = {
                "terminatedInstances": getattr(self.garbage, "terminated_instances", []),
                "deletedNodes": getattr(self.garbage, "deleted_nodes", []),
                "deletedLaunchTemplates": getattr(self.garbage, "deleted_launch_templates", []),
                "finalizedClaims": getattr(self.garbage, "finalized_claims", []),
                "errors": getattr(self.garbage, "errors", []),
            }
            garbage = {k: list(v) for k, v in found.items() if v}
        swept: dict[str, Any] = {}
        if self.swept is not None:
            swept = {
                k: v
                for k, v in (
                    ("uncordoned", list(getattr(self.swept, "uncordoned", []))),
                    ("redriven", dict(getattr(self.swept, "redriven", {}))),
                )
                if v
            }
        retired: dict[str, Any] = {}
        if self.retired is not None:
            retired = {
                k: v
                for k, v in (
                    ("started", dict(getattr(self.retired, "started", {}))),
                    ("deleted", dict(getattr(self.retired, "deleted", {}))),
                )
                if v
            }
        return {
            "dryRun": self.dry_run,
            "nodes": self.nodes,
            "candidates": self.candidates,
            "hourlyCost": round(self.hourly_cost, 6),
            "decisionMilliseconds": round(self.decision_seconds * 1000, 1),
            "rounds": self.rounds,
            "commands": [c.summary() for c in self.commands],
            "skipped": len(self.skipped),
            **({"garbageCollected": garbage} if garbage else {}),
            **({"swept": swept} if swept else {}),
            **({"retired": retired} if retired else {}),
            **({"problems": self.problems[:20]} if self.problems else {}),
            **({"error": self.error} if self.error else {}),
        }


class DisruptionController:
    """Decides and carries out node disruption for one cluster, one pass at a time.

    ``reader`` builds the planner's input; ``launcher`` launches replacements (a ``ClaimLauncher``; None:
    commands that need replacements fail); ``workflow`` starts termination workflows (Step Functions, or
    ``DeferredWorkflows`` in the local sandbox); ``garbage_collector`` is anything with ``collect()``;
    ``sweep`` anything with ``sweep()`` (:class:`~fleetwright.disruption.sweep.DisruptionSweep`);
    ``retirer`` anything with ``retire()`` (:class:`~fleetwright.disruption.deletion.DeletionRetirer`).
    ``monotonic`` measures how old a plan is when it is acted on; ``clock`` gives epoch seconds.
    ``planner``/``validator`` default to :mod:`fleetwright.disruption.planner`. ``events`` publishes
    DisruptionBlocked, Unconsolidatable and DisruptionLaunching (default: through the reader's cluster).
    """

    def __init__(
        self,
        *,
        reader: InputReader,
        workflow: WorkflowStarter,
        launcher: ClaimLauncher | None,
        settings: DisruptionSettings | None = None,
        dry_run: bool = False,
        garbage_collector: Any = None,
        sweep: Any = None,
        retirer: Any = None,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        planner: Planner | None = None,
        validator: Validator | None = None,
        drain_interval_seconds: int = 5,
        poll_seconds: int = 5,
        events: EventRecorder | None = None,
    ) -> None:
        self.settings = settings or reader.settings
        reader.settings = self.settings
        self.reader = reader
        self.workflow = workflow
        self.launcher = launcher
        self.dry_run = dry_run
        self.garbage_collector = garbage_collector
        self.sweep = sweep
        self.retirer = retirer
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock
        self.monotonic = monotonic
        self._planner = planner
        self._validator = validator
        self.events, self.nodeclaim_objects = self._cluster_outputs(events)
        self.executor = CommandExecutor(
            workflow,
            launcher,
            settings=self.settings,
            metrics=self.metrics,
            logger=self.log,
            clock=clock,
            drain_interval_seconds=drain_interval_seconds,
            poll_seconds=poll_seconds,
            events=self.events,
        )

    def _cluster_outputs(
        self, events: EventRecorder | None
    ) -> tuple[EventRecorder | None, NodeClaimObjects | None]:
        """What the pass writes to the reader's cluster besides its commands: events (``events``, else a
        recorder on that cluster) and the NodeClaim objects' Drifted / Consolidatable conditions (when the
        CRD is installed); neither without a cluster."""
        kube = getattr(self.reader, "kube", None)
        if kube is None:
            return events, None
        if events is None:
            events = EventRecorder(kube.client, metrics=self.metrics, logger=self.log)
        objects = NodeClaimObjects(
            kube.client,
            clock=self.monotonic,
            metrics=self.metrics,
            logger=self.log,
            cache=getattr(self.reader, "cache", None),
        )
        return events, objects

    def _functions(self) -> tuple[Planner, Validator]:
        if self._planner is None or self._validator is None:
            planner, validator = _default_planner()
            self._planner = self._planner or planner
            self._validator = self._validator or validator
        return self._planner, self._validator

    # -- one pass --------------------------------------------------------------------------------------

    def run_once(self) -> DisruptionReport:
        """Read, plan, re-validate, act, collect garbage. Errors are reported, not raised."""
        report = DisruptionReport(dry_run=self.dry_run)
        self._begin_pass()
        if self.retirer is not None and not self.dry_run:
            try:
                report.retired = self.retirer.retire()
                report.problems.extend(getattr(report.retired, "errors", []))
            except Exception as error:
                self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "Deletion"})
                self.log.exception("retiring deleted nodes failed", extra={"error": str(error)})
                report.problems.append(f"retiring deleted nodes failed: {type(error).__name__}: {error}")
        if self.sweep is not None and not self.dry_run:
            try:
                report.swept = self.sweep.sweep()
                report.problems.extend(getattr(report.swept, "errors", []))
            except Exception as error:
                self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "Sweep"})
                self.log.exception("sweep failed", extra={"error": str(error)})
                report.problems.append(f"sweep failed: {type(error).__name__}: {error}")
        try:
            self._pass(report)
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "Pass"})
            self.log.exception("disruption pass failed", extra={"error": report.error})
        if self.garbage_collector is not None and not self.dry_run:
            try:
                report.garbage = self.garbage_collector.collect()
            except Exception as error:
                self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "GarbageCollection"})
                self.log.exception("garbage collection failed", extra={"error": str(error)})
                report.problems.append(f"garbage collection failed: {type(error).__name__}: {error}")
        return report

    def _pass(self, report: DisruptionReport) -> None:
        """Rounds of read, plan, act: after a graceful command is started the cluster is read again and
        planned again at once, as Karpenter's disruption controller re-queues after each command, so one
        invocation starts as many commands as the budgets allow (its nodes and replacements count in the
        next round's budgets and simulations); at most ``max_commands_per_pass`` rounds, none started
        ``command_window_seconds`` after the first."""
        started = self.monotonic()
        acted_on: set[str] = set()  # nodes whose workflow this invocation started
        rounds = 1
        acted = self._round(report, acted_on, first=True)
        while (
            acted
            and rounds < self.settings.max_commands_per_pass
            and self.monotonic() - started < self.settings.command_window_seconds
        ):
            self._begin_pass()  # the next read must see what this round's command did
            acted = self._round(report, acted_on, first=False)
            rounds += 1
        report.rounds = rounds

    def _read(self, acted_on: set[str], *, first: bool) -> Gathered:
        """The cluster as the planner must see it: the nodes this invocation already started workflows for
        are being disrupted (their workflows may not have cordoned them yet), and the replacements on
        their way keep the room promised to the pods they were launched for (``promised.py``)."""
        gathered = self.reader.read() if first else self.reader.read(track_emptiness=False)
        for state in gathered.input.nodes:
            if state.name in acted_on:
                state.terminating = True
        reserve_promised_pods(gathered.input, gathered.claims)
        return gathered

    def _round(self, report: DisruptionReport, acted_on: set[str], *, first: bool) -> bool:
        """One read, plan and execution; True when it started a graceful command (another round may
        follow). Only the first round demotes, observes, publishes notices and tracks emptiness."""
        plan_fn, _ = self._functions()
        read_at = self.monotonic()
        gathered = self._read(acted_on, first=first)
        report.problems.extend(p for p in gathered.problems if first or p not in report.problems)
        for problem in gathered.problems if first else ():
            self.log.warning("ignored while reading the cluster", extra={"problem": problem})
        if first and not self.dry_run:
            self._demote(gathered)
        if first:
            self._observe(gathered, report)
        started = time.perf_counter()
        plan = plan_fn(gathered.input)
        report.decision_seconds += time.perf_counter() - started
        self.metrics.add(m.DECISION_DURATION, (time.perf_counter() - started) * 1000, MILLISECONDS)
        if first:
            report.skipped = dict(plan.skipped)
        forceful = [*plan.repairs, *plan.expirations, *plan.scale_down]
        commands = [*forceful, *([plan.command] if plan.command else [])]
        self._log_plan(commands, plan, gathered)
        if first and not self.dry_run:
            self._publish_notices(plan, gathered)
            self._repair_blocked(plan, gathered)
            self._mark_claims(gathered)
        if plan.command is not None and not self.dry_run:
            self._consolidation_events(plan.command, gathered)
        if not commands:
            return False
        if self.dry_run:
            report.commands.extend(CommandOutcome.of(c, DRY_RUN) for c in commands)
            return False
        if self.monotonic() - read_at > self.settings.revalidate_after_seconds:
            commands = self._revalidate(commands, report, acted_on)
        pools = {np.name: np for np in gathered.input.nodepools}
        outcomes = [self.executor.execute(command, pools) for command in commands]
        report.commands.extend(outcomes)
        self._mark_disrupting(commands, outcomes)
        acted_on.update(name for outcome in outcomes for name in outcome.executions)
        graceful = [o for o, c in zip(outcomes, commands, strict=True) if c is plan.command]
        started = any(o.status == EXECUTED for o in graceful)
        # Plan again only when the next plan can see where this command's pods are going.
        return not forceful and started and plan.command is not None and room_is_kept(plan.command)

    def _begin_pass(self) -> None:
        """Steps from now on may reuse a sync made from now on (``ClusterCache.sync(reuse=True)``)."""
        cache = getattr(self.reader, "cache", None)
        if cache is not None:
            cache.begin_pass()

    def _revalidate(
        self, commands: list[Command], report: DisruptionReport, acted_on: set[str]
    ) -> list[Command]:
        """Read the cluster again and keep the commands the planner still accepts."""
        _, validate = self._functions()
        report.revalidated = True
        self._begin_pass()  # a re-read: nothing synced before it is reused
        fresh = self._read(acted_on, first=False)
        kept = []
        for command in commands:
            why = validate(command, fresh.input)
            if why is None:
                kept.append(command)
                continue
            report.commands.append(CommandOutcome.of(command, INVALIDATED, why))
            self._consolidation_events(command, fresh, rejected=why)
            self.metrics.add(m.COMMANDS_INVALIDATED, 1, COUNT, {"Method": command.method})
            self.log.info(
                "disruption command dropped: the cluster changed",
                extra={"method": command.method, "nodes": command.node_names, "why": why},
            )
        return kept

    # -- observability ---------------------------------------------------------------------------------

    def _demote(self, gathered: Gathered) -> None:
        """Nodes whose capacity reservation ended are relabelled on-demand (``demotion``)."""
        kube = getattr(self.reader, "kube", None)
        state = getattr(self.reader, "state", None)
        if kube is None or state is None:
            return
        from fleetwright.disruption.demotion import demote

        demote(gathered, kube, state.nodeclaims, self.log)

    def _mark_claims(self, gathered: Gathered) -> None:
        """Drifted and Consolidatable conditions on the NodeClaim objects, as this pass sees the nodes (and
        DisruptionReason removed from those no workflow disrupts)."""
        if self.nodeclaim_objects is None:
            return
        from fleetwright.disruption.notices import claim_conditions

        self.nodeclaim_objects.set_conditions(claim_conditions(gathered.input), self.clock())

    def _mark_disrupting(self, commands: list[Command], outcomes: list[CommandOutcome]) -> None:
        """DisruptionReason on the NodeClaim objects of the nodes whose termination workflow started."""
        if self.nodeclaim_objects is None:
            return
        from fleetwright.disruption.notices import disrupting_conditions

        self.nodeclaim_objects.set_conditions(disrupting_conditions(commands, outcomes), self.clock())

    def _repair_blocked(self, plan: Plan, gathered: Gathered) -> None:
        """NodeRepairBlocked (Warning) on each unhealthy node the 20 % rule keeps, and on its NodeClaim;
        a metric per NodePool; a log line per node."""
        if not plan.repair_blocked:
            return
        states = {s.name: s for s in gathered.input.nodes}
        per_pool: Counter[str] = Counter()
        found: list[Event] = []
        for name, why in sorted(plan.repair_blocked.items()):
            state = states.get(name)
            pool = state.nodepool if state is not None else ""
            per_pool[pool] += 1
            extra = {"node": name, "nodePool": pool, "why": why}
            self.log.warning("unhealthy node not repaired", extra=extra)
            node = gathered.node_objects.get(name)
            refs = [ObjectRef.of(node, kind="Node") if node is not None else reasons.node_ref(name)]
            if state is not None and state.claim_id:
                refs.append(reasons.nodeclaim_ref(state.claim_id))
            found.extend(reasons.node_repair_blocked(ref, why) for ref in refs)
        for pool, count in sorted(per_pool.items()):
            self.metrics.add(m.NODE_REPAIR_BLOCKED, count, COUNT, {"NodePool": pool})
        if self.events is not None:
            self.events.publish(*found)

    def _publish_notices(self, plan: Plan, gathered: Gathered) -> None:
        """DisruptionBlocked / Unconsolidatable on each node held back, and on its NodeClaim;
        InvalidDoNotDisruptAnnotation on pods whose annotation is ignored; ``DisruptionBlocked{Why}`` counts
        the nodes held back, by kind of reason."""
        from fleetwright.disruption.notices import (
            DISRUPTION_BLOCKED,
            blocked_pools,
            blocked_why,
            do_not_disrupt_durations,
            invalid_do_not_disrupt,
            plan_notices,
        )

        notices = plan_notices(gathered.input, plan)
        blocked = Counter(blocked_why(n.message) for n in notices if n.reason == DISRUPTION_BLOCKED)
        for why, count in sorted(blocked.items()):
            self.metrics.add(m.DISRUPTION_BLOCKED, count, COUNT, {"Why": why})
        if self.events is None:
            return
        found: list[Event] = [
            reasons.invalid_do_not_disrupt(pod, why) for pod, why in invalid_do_not_disrupt(gathered.input)
        ]
        found.extend(
            reasons.do_not_disrupt_until(pod, epoch_to_iso(until))
            if active
            else reasons.do_not_disrupt_grace_period_elapsed(pod)
            for pod, until, active in do_not_disrupt_durations(gathered.input)
        )
        for notice in notices:
            node = gathered.node_objects.get(notice.node)
            refs = [ObjectRef.of(node, kind="Node") if node is not None else reasons.node_ref(notice.node)]
            if notice.claim:
                refs.append(reasons.nodeclaim_ref(notice.claim))
            build = (
                reasons.disruption_blocked
                if notice.reason == DISRUPTION_BLOCKED
                else reasons.unconsolidatable
            )
            found.extend(build(ref, notice.message) for ref in refs)
        found.extend(
            reasons.nodepool_disruption_blocked(reasons.nodepool_ref(pool), why)
            for pool, why in blocked_pools(gathered.input)
        )
        self.events.publish(*found)

    def _consolidation_events(self, command: Command, gathered: Gathered, rejected: str = "") -> None:
        """ConsolidationCandidate on each node a consolidation command removes and on its NodeClaim (or
        ConsolidationRejected, ``rejected`` saying why, for a command dropped when checked again), and
        ConsolidationApproved for each Balanced NodePool whose score passed."""
        from fleetwright.disruption.notices import CONSOLIDATION_METHODS, command_text

        if self.events is None or command.method not in CONSOLIDATION_METHODS:
            return
        found: list[Event] = []
        for state in command.candidates:
            text = command_text(command, state)
            for ref in _refs(gathered, state.name, state.claim_id):
                if rejected:
                    found.append(reasons.consolidation_rejected(ref, text, rejected, command.savings))
                else:
                    found.append(reasons.consolidation_candidate(ref, text, command.savings))
        if not rejected:
            single = command.candidates[0] if len(command.candidates) == 1 else None
            for score in (s for s in command.scores if s.approved):
                refs = (
                    _refs(gathered, single.name, single.claim_id)
                    if single is not None
                    else [reasons.nodepool_ref(score.pool)]
                )
                found.extend(_approved(ref, score) for ref in refs)
        self.events.publish(*found)

    def _observe(self, gathered: Gathered, report: DisruptionReport) -> None:
        ours = gathered.ours()
        report.nodes = len(ours)
        report.candidates = sum(1 for n in ours if not n.terminating)
        report.hourly_cost = sum(n.price for n in ours)
        self.metrics.add(m.NODE_COUNT, report.nodes, COUNT)
        self.metrics.add(m.CLUSTER_HOURLY_COST, report.hourly_cost, NONE)
        # One series per NodePool and one per capacity type in use (not their product: fewer series to pay
        # for, and each one a gauge the dashboard can graph with any statistic).
        for pool, (count, cost) in _tally(ours, attrgetter("nodepool")).items():
            self.metrics.add(m.NODE_COUNT, count, COUNT, {"NodePool": pool})
            self.metrics.add(m.CLUSTER_HOURLY_COST, cost, NONE, {"NodePool": pool})
        for capacity_type, (count, cost) in _tally(ours, attrgetter("capacity_type")).items():
            self.metrics.add(m.NODE_COUNT, count, COUNT, {"CapacityType": capacity_type})
            self.metrics.add(m.CLUSTER_HOURLY_COST, cost, NONE, {"CapacityType": capacity_type})
        self.metrics.add(m.DISRUPTION_CANDIDATES, report.candidates, COUNT)

    def _log_plan(self, commands: list[Command], plan: Plan, gathered: Gathered) -> None:
        for command in commands:
            self.log.info(
                "disruption decision",
                extra={
                    "method": command.method,
                    "reason": command.reason,
                    "nodes": command.node_names,
                    "nodePools": sorted({c.nodepool for c in command.candidates}),
                    "instanceTypes": [c.instance_type for c in command.candidates],
                    "pricePerHour": round(sum(c.price for c in command.candidates), 6),
                    "replacements": [
                        {
                            "nodePool": r.nodepool,
                            "instanceTypes": [t.name for t in r.instance_types[:10]],
                            "pods": len(r.pods),
                            "pricePerHour": r.price,
                        }
                        for r in command.replacements
                    ],
                    "savingsPerHour": round(command.savings, 6),
                    "explanation": command.explanation,
                    "dryRun": self.dry_run,
                },
            )
        if not commands:
            self.log.debug("no disruption", extra={"nodes": len(gathered.ours())})
        for node, why in list(plan.skipped.items())[:MAX_LOGGED_SKIPS]:
            self.log.debug("node left alone", extra={"node": node, "why": why})


def _tally(nodes: list[NodeState], key: Callable[[NodeState], str]) -> dict[str, tuple[int, float]]:
    """Node count and hourly cost of ``nodes`` by ``key``, sorted by key."""
    counts: Counter[str] = Counter()
    costs: dict[str, float] = defaultdict(float)
    for node in nodes:
        counts[key(node)] += 1
        costs[key(node)] += node.price
    return {value: (counts[value], costs[value]) for value in sorted(counts)}


def _refs(gathered: Gathered, name: str, claim: str) -> list[ObjectRef]:
    """The node (as read, or by name when the pass has no object) and its NodeClaim, when it has one."""
    node = gathered.node_objects.get(name)
    refs = [ObjectRef.of(node, kind="Node") if node is not None else reasons.node_ref(name)]
    if claim:
        refs.append(reasons.nodeclaim_ref(claim))
    return refs


def _approved(ref: ObjectRef, score: Score) -> Event:
    return reasons.consolidation_approved(
        ref,
        score=score.value,
        threshold=1.0 / BALANCED_K,
        k=BALANCED_K,
        savings_pct=score.savings_fraction * 100,
        disruption_pct=score.disruption_fraction * 100,
    )
