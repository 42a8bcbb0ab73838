"""The whole drift roll-out, invocation after invocation, as Karpenter rolls it: N nodes drift under a
budget of B nodes; every disruption invocation (once a minute) starts as many replacements as the budget
allows, the replacements boot, register and become Ready through the emulator's node start, the
termination workflows wait for them, drain and terminate, and the next invocations take the rest.

Replayed on the virtual clock of ``fleetwright simulate`` (provisioner, disruption controller,
termination workflows and the emulator's cluster, as the functions wire them)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.simulate.engine import Outcome, Replay, seeded_claim_ids
from fleetwright.local.simulate.runner import STATE_TABLE, create_namespaces, state_client
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.world import World, WorldSpec, build_world
from fleetwright.manifests import load_manifests
from tests.support.simulate import NODECLASS

INTERVAL = 60.0  # the disruption function's schedule
DRIFT_AT = 300.0  # every node is up and running its pod well before
START = NodeStart.default
DRAIN_SECONDS = 30.0  # cordon, wait, drain passes 5 s apart, terminate: well within this here


def pool(budget: str, release: str) -> str:
    """One m5.large NodePool whose nodes carry ``release`` (changing it drifts every node)."""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        example.com/release: "{release}"
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["m5.large"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: Never
    budgets:
      - nodes: "{budget}"
"""


@dataclass
class Pass:
    """One disruption invocation after the drift: when, how many workflows it started, and how many
    nodes were being disrupted when it ended."""

    at: float
    started: int
    disrupting: int


@dataclass
class Rollout:
    """Wraps the world's disruption controller: drifts the NodePool at ``DRIFT_AT`` and records every
    invocation from then on."""

    world: World
    drifted: list[Any]
    inner: Any = None
    passes: list[Pass] = field(default_factory=list)
    original: set[str] = field(default_factory=set)

    def run_once(self) -> Any:
        elapsed = self.world.clock.elapsed()
        if elapsed >= DRIFT_AT and not self.original:
            self.original = set(self.world.cloud.instances)
            self.world.config.nodepools = list(self.drifted)  # the NodePool is edited
        before = sum(self.world.workflows.reasons.values())
        report = self.inner.run_once()
        if self.original:
            started = sum(self.world.workflows.reasons.values()) - before
            self.passes.append(Pass(elapsed, started, len(self.world.workflows.running())))
        return report


def documents(tmp_path: Path, budget: str, release: str) -> Any:
    path = tmp_path / f"{release}.yaml"
    path.write_text(pool(budget, release) + "\n---\n" + NODECLASS)
    return load_manifests([str(path)])


def roll(tmp_path: Path, nodes: int, budget: int, start: NodeStart) -> tuple[Rollout, Outcome]:
    """``nodes`` pods of 1500m (one m5.large each) from t=5, the NodePool drifted at ``DRIFT_AT``; the
    replay runs long enough for every round and the invocations a round's replacements need."""
    before = documents(tmp_path, str(budget), "one")
    after = documents(tmp_path, str(budget), "two")
    spec = WorldSpec(before.nodepools, before.nodeclasses, builtin_catalog("us-east-1"), start=start)
    items = tuple(TracePod(f"web-{i}", 5.0, None, "1500m", "1Gi") for i in range(nodes))
    duration = DRIFT_AT + (math.ceil(nodes / budget) * invocations_per_round(start) + 3) * INTERVAL
    with state_client() as client, seeded_claim_ids(0):
        world = build_world(spec, STATE_TABLE, client)
        trace = Trace(items, duration)
        create_namespaces(world, trace)
        rollout = Rollout(world, list(after.nodepools), world.disruption)
        world.disruption = rollout
        outcome = Replay(world, trace, disruption_interval=INTERVAL).run()
    return rollout, outcome


def invocations_per_round(start: NodeStart) -> int:
    """Invocations one round may take at most: its replacements start, then its nodes drain (their pods
    have somewhere to go at once) and terminate, within ``DRAIN_SECONDS``."""
    return math.ceil((start.total + DRAIN_SECONDS) / INTERVAL)


SLOW = NodeStart(boot_seconds=60.0, register_seconds=20.0, ready_seconds=15.0, startup_taint_seconds=5.0)
CASES = [
    (10, 5, START),
    (10, 3, START),
    (7, 2, START),
    (4, 1, START),
    # Replacements that take longer than an invocation to start: the budget is still used up when the
    # next invocation comes, which starts nothing.
    (10, 3, SLOW),
    (4, 1, SLOW),
]


@pytest.mark.parametrize(("nodes", "budget", "start"), CASES)
def test_drifted_nodes_roll_within_the_budget_in_about_n_over_b_invocations(
    tmp_path: Path, nodes: int, budget: int, start: NodeStart
) -> None:
    rounds = math.ceil(nodes / budget)
    rollout, outcome = roll(tmp_path, nodes, budget, start)
    assert outcome.errors == []

    # Never more than B nodes disrupted at once (workflows start only in an invocation, so the most
    # run right after one), and every round starts all the budget allows.
    assert rollout.passes and max(p.disrupting for p in rollout.passes) <= budget
    starting = [p for p in rollout.passes if p.started]
    assert [p.started for p in starting] == [budget] * (nodes // budget) + [nodes % budget] * (
        nodes % budget > 0
    )
    assert len(starting) == rounds

    # Every drifted node replaced: its instance ended, as many new ones running, each pod running again.
    instances = {i.id: i for i in outcome.instances}
    assert len(rollout.original) == nodes
    assert all(instances[i].ended_at is not None for i in rollout.original)
    running = [i for i in outcome.instances if i.ended_at is None]
    assert len(running) == nodes and not {i.id for i in running} & rollout.original
    assert all(life.evictions == 1 for life in outcome.lives.values())

    # ⌈N/B⌉ rounds, each as long as its replacements' start and drain make it, not N invocations.
    per_round = invocations_per_round(start)
    assert starting[0].at == DRIFT_AT  # the first invocation that sees the drift starts the first round
    assert starting[-1].at - starting[0].at <= (rounds - 1) * per_round * INTERVAL
    done = max(instances[i].ended_at or 0.0 for i in rollout.original) - rollout.world.clock.start
    assert done <= starting[-1].at + per_round * INTERVAL

    # No pod waits for a node longer than a replacement's start: its node goes only once the
    # replacement is Ready.
    for life in outcome.lives.values():
        moved_at, started = life.created[-1], life.started[-1]
        assert started is not None and started - moved_at <= start.total
