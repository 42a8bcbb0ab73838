"""The interface every disruption method implements, so the planner can try them in one ordered list.

It follows Karpenter's ``Method`` (``ShouldDisrupt`` / ``ComputeCommands``): a method names itself and its
disruption reason, says whether a node is a candidate for it, computes its commands for one pass within
the budgets, and re-checks its own condition before a stale command is acted on. The planner owns what
the methods share: the order, which method's commands hold the others, and the checks every graceful
command passes again (the node still there, budgets, PodDisruptionBudgets, do-not-disrupt, the same pods).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fleetwright.disruption.candidates import Cluster
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.types import Command, NodeState, Plan


class PassContext:
    """One planning pass as the methods share it.

    ``cluster`` is the pass's view of the input; ``plan`` collects the methods' notes (``skipped``,
    ``unconsolidatable``, ``repair_blocked``); ``going`` holds the nodes forceful methods already take
    this pass; ``static`` the nodes of static NodePools, which only the static methods touch. The
    scheduler simulation is built on first use (a pass that only repairs needs none) and shared.
    """

    def __init__(self, cluster: Cluster, plan: Plan) -> None:
        self.cluster = cluster
        self.plan = plan
        self.going: set[str] = set()
        self.static: set[str] = {s.name for s in cluster.ours if cluster.is_static(s)}
        self._simulator: Simulator | None = None

    @property
    def skipped(self) -> dict[str, str]:
        """Why notable nodes were left alone this pass (node name → reason; the first reason stays)."""
        return self.plan.skipped

    @property
    def simulator(self) -> Simulator:
        """The pass's scheduler simulation (one per pass: its setup is the costly part)."""
        if self._simulator is None:
            self._simulator = Simulator(self.cluster)
        return self._simulator


class DisruptionMethod(Protocol):
    """One way of disrupting nodes (emptiness, drift, consolidation, expiration, repair, ...).

    ``forceful`` methods ignore budgets, PodDisruptionBudgets and do-not-disrupt and may return several
    commands; graceful ones keep all three and return at most one.
    """

    @property
    def name(self) -> str:
        """The method as commands, logs and metrics name it (``Command.method``)."""
        ...

    @property
    def reason(self) -> str:
        """The disruption reason its commands carry (what budgets' ``reasons`` match)."""
        ...

    @property
    def forceful(self) -> bool:
        """True when budgets, PodDisruptionBudgets and do-not-disrupt do not hold it."""
        ...

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """True when ``state`` is a candidate of this method now (budgets and blocks aside)."""
        ...

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """This pass's commands of the method, within the budgets left; why candidates were left alone
        goes into ``ctx.skipped``."""
        ...

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """None when the method's own condition still holds for ``fresh`` (the command's nodes in the fresh
        ``cluster``, in order); otherwise why not."""
        ...
