"""A pod's preferences as named relaxation steps, in Karpenter's order, and the attempts they give.

Everything a pod prefers is first treated as required. When the pod cannot be placed, the first step
of :data:`RELAXATIONS` that still has something to give up relaxes one preference, and the pod is tried
again; the steps run in the order of Karpenter's ``Preferences.Relax``:

1. ``preferred pod affinity``: drop the heaviest preferred pod affinity term;
2. ``preferred pod anti-affinity``: drop the heaviest preferred pod anti-affinity term;
3. ``preferred node affinity``: drop the heaviest preferred node affinity term (the heaviest one left
   is the one required);
4. ``ScheduleAnyway topology spread``: drop the first ``ScheduleAnyway`` spread;
5. ``tolerate PreferNoSchedule``: with every preference gone, tolerate ``PreferNoSchedule`` taints
   (only when some NodePool or node carries one the pod does not tolerate already).

Where Fleetwright differs on purpose: Karpenter reads only the first of several required (ORed)
node-selector terms, and its first step drops it for the next one, never to come back; here every rung
tries each of them in order instead, so no required term is given up before a preference is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import NamedTuple

from fleetwright.model.pod import Pod, PreferredTerm
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import PREFER_NO_SCHEDULE, Taint, Toleration
from fleetwright.scheduling.topology import Constraint, PodConstraints

STRICTEST = ""  # the name of the first rung: nothing relaxed yet
PREFERRED_POD_AFFINITY = "preferred pod affinity"
PREFERRED_POD_ANTI_AFFINITY = "preferred pod anti-affinity"
PREFERRED_NODE_AFFINITY = "preferred node affinity"
SCHEDULE_ANYWAY = "ScheduleAnyway topology spread"
TOLERATE_PREFER_NO_SCHEDULE = "tolerate PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class Preferences:
    """What a pod still prefers, each kind heaviest (first relaxed) first."""

    node_terms: tuple[PreferredTerm, ...] = ()  # the first is treated as required
    affinity: tuple[Constraint, ...] = ()
    anti: tuple[Constraint, ...] = ()
    anyway: tuple[Constraint, ...] = ()

    @classmethod
    def of(cls, pod: Pod, constraints: PodConstraints) -> Preferences:
        """Every preference of the pod (its topology ones already in ``constraints``)."""
        return cls(
            tuple(sorted(pod.preferred_affinity, key=lambda p: -p.weight)),
            constraints.preferred_affinity,
            constraints.preferred_anti,
            constraints.schedule_anyway,
        )

    def node_requirements(self) -> Requirements:
        """The preferred node affinity term treated as required (none once all are relaxed)."""
        return self.node_terms[0].requirements if self.node_terms else Requirements()

    def constraints(self) -> tuple[Constraint, ...]:
        """The preferred topology constraints still enforced."""
        return (*self.affinity, *self.anti, *self.anyway)


class Relaxation(NamedTuple):
    """One named step: the preferences with one given up, or None when it has nothing to give up."""

    name: str
    relax: Callable[[Preferences], Preferences | None]


def _drop_pod_affinity(p: Preferences) -> Preferences | None:
    return replace(p, affinity=p.affinity[1:]) if p.affinity else None


def _drop_pod_anti_affinity(p: Preferences) -> Preferences | None:
    return replace(p, anti=p.anti[1:]) if p.anti else None


def _drop_node_affinity(p: Preferences) -> Preferences | None:
    return replace(p, node_terms=p.node_terms[1:]) if p.node_terms else None


def _drop_schedule_anyway(p: Preferences) -> Preferences | None:
    return replace(p, anyway=p.anyway[1:]) if p.anyway else None


RELAXATIONS: tuple[Relaxation, ...] = (
    Relaxation(PREFERRED_POD_AFFINITY, _drop_pod_affinity),
    Relaxation(PREFERRED_POD_ANTI_AFFINITY, _drop_pod_anti_affinity),
    Relaxation(PREFERRED_NODE_AFFINITY, _drop_node_affinity),
    Relaxation(SCHEDULE_ANYWAY, _drop_schedule_anyway),
)


def ladder(start: Preferences) -> list[tuple[str, Preferences]]:
    """Each state from every preference held to none, named by the step that led to it."""
    rungs = [(STRICTEST, start)]
    current = start
    while True:
        for name, relax in RELAXATIONS:
            relaxed = relax(current)
            if relaxed is not None:
                rungs.append((name, relaxed))
                current = relaxed
                break
        else:
            return rungs


@dataclass(slots=True, eq=False)
class Attempt:
    """One way of placing a pod: node requirements and the topology constraints still enforced."""

    option_key: str
    option: Requirements
    constraints: tuple[Constraint, ...]
    step: str = STRICTEST  # the relaxation step that led to it


def key_of(option: Requirements) -> str:
    """The cache key of a requirement option."""
    return option.describe()


def required_options(pod: Pod, volumes: Requirements) -> list[Requirements]:
    """The pod's required (ORed) node-selector terms, each narrowed by its volumes' requirements."""
    return [option.intersect(volumes) for option in pod.node_requirement_options()]


def attempts(pod: Pod, constraints: PodConstraints, volumes: Requirements) -> list[Attempt]:
    """The ways of placing the pod, strictest first: each rung of :func:`ladder` tried with every
    required node-selector term in order (a rung that repeats an earlier attempt adds nothing)."""
    required = required_options(pod, volumes)
    found: list[Attempt] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for step, preferences in ladder(Preferences.of(pod, constraints)):
        extra = preferences.node_requirements()
        chosen = (*constraints.required, *preferences.constraints())
        for option in required:
            combined = option.intersect(extra)
            if any(r.is_empty() for r in combined):
                continue
            key = key_of(combined)
            identity = (key, tuple(id(c) for c in chosen))
            if identity not in seen:
                seen.add(identity)
                found.append(Attempt(key, combined, chosen, step))
    return found


def tolerating_attempts(
    pod: Pod, constraints: PodConstraints, volumes: Requirements, preferred_taints: Collection[Taint]
) -> tuple[tuple[Toleration, ...], list[Attempt]] | None:
    """The last step: every preference relaxed and ``PreferNoSchedule`` taints tolerated.

    The pod's tolerations with that one added, and its attempts; None when no taint of
    ``preferred_taints`` (those some NodePool or node carries) is left for it to tolerate.
    """
    if all(any(t.tolerates(taint) for t in pod.tolerations) for taint in preferred_taints):
        return None
    found = [
        Attempt(key_of(option), option, constraints.required, TOLERATE_PREFER_NO_SCHEDULE)
        for option in required_options(pod, volumes)
        if not any(r.is_empty() for r in option)
    ]
    return (*pod.tolerations, Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)), found
