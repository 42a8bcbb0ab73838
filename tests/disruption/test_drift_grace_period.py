"""terminationGracePeriod lets drift through, as Karpenter's eventual disruption: a drifted node whose pods
are do-not-disrupt or held by a PodDisruptionBudget is still replaced when its NodeClaim has a
terminationGracePeriod (the drain then ends at that deadline); without one it stays blocked."""

from __future__ import annotations

from fleetwright.claims.terms import ClaimTerms
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT, NodeState, Pdb
from fleetwright.local.inprocess.disruption import run_disruption
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.model.pod import LabelSelector, Pod
from tests.disruption.plan_builders import busy, node, planner_input, pod
from tests.support.disruption import RigFactory, nodepool

WITH_GRACE = ClaimTerms(expire_after=None, termination_grace_period=3600)
WITHOUT_GRACE = ClaimTerms(expire_after=None, termination_grace_period=None)
HASHES = {"default": "h2"}
FROZEN = Pdb("default", "web", LabelSelector(match_labels=(("app", "web"),)), disruptions_allowed=0)


def _drifted(terms: ClaimTerms, pods: list[Pod], annotations: dict[str, str] | None = None) -> NodeState:
    return node(
        "drifted", "m5.xlarge", pods=pods, nodepool_hash="h1", terms=terms, annotations=annotations or {}
    )


def _guarded() -> list[Pod]:
    return [pod("batch-0", "1", "1Gi", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"}), *busy("w", 2)]


def _budgeted() -> list[Pod]:
    return [pod("web-0", "1", "1Gi", labels={"app": "web"}), *busy("w", 2)]


def test_drifted_node_with_termination_grace_period_is_disrupted_despite_do_not_disrupt_pods() -> None:
    result = plan(planner_input([_drifted(WITH_GRACE, _guarded())], nodepool_hashes=HASHES))
    assert result.command is not None and result.command.method == DRIFT
    assert result.command.node_names == ["drifted"]


def test_drifted_node_with_termination_grace_period_is_disrupted_despite_a_blocking_pdb() -> None:
    inp = planner_input([_drifted(WITH_GRACE, _budgeted())], nodepool_hashes=HASHES, pdbs=[FROZEN])
    result = plan(inp)
    assert result.command is not None and result.command.method == DRIFT


def test_drifted_node_without_termination_grace_period_stays_blocked_by_its_pods() -> None:
    result = plan(planner_input([_drifted(WITHOUT_GRACE, _guarded())], nodepool_hashes=HASHES))
    assert result.command is None
    assert DO_NOT_DISRUPT_ANNOTATION in result.skipped["drifted"]
    inp = planner_input([_drifted(WITHOUT_GRACE, _budgeted())], nodepool_hashes=HASHES, pdbs=[FROZEN])
    result = plan(inp)
    assert result.command is None
    assert "PodDisruptionBudget default/web" in result.skipped["drifted"]


def test_a_do_not_disrupt_node_stays_blocked_even_with_a_termination_grace_period() -> None:
    guarded = _drifted(WITH_GRACE, busy("w", 2), annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    result = plan(planner_input([guarded], nodepool_hashes=HASHES))
    assert result.command is None
    assert "node is annotated" in result.skipped["drifted"]


def test_termination_grace_period_does_not_let_consolidation_through() -> None:
    # Only drift is eventual: an underutilized node's do-not-disrupt pod still holds it.
    lonely = node("lonely", "m5.xlarge", pods=_guarded()[:1], terms=WITH_GRACE)
    other = node("other", "m5.xlarge", pods=busy("x", 2))
    result = plan(planner_input([lonely, other]))
    assert result.command is None or "lonely" not in result.command.node_names


def test_a_drifted_node_with_grace_period_drains_until_that_deadline_then_deletes(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="Never", grace="90m"))
    name = rig.node("m5.large")
    rig.pod("batch-0", name, cpu="500m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    rig.config.nodepools[0] = nodepool(consolidate_after="Never", grace="90m", labels={"team": "a"})

    rig.controller().run_once()

    [request] = rig.workflows.started.values()
    assert request.node == name and request.reason == "Drifted"
    assert abs(request.deadline_epoch - (rig.world.wall() + 5400)) < 2
    assert request.on_deadline == "delete"


def test_a_drifted_node_without_grace_period_and_a_do_not_disrupt_pod_is_left(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    name = rig.node("m5.large")
    rig.pod("batch-0", name, cpu="500m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    rig.config.nodepools[0] = nodepool(consolidate_after="Never", labels={"team": "a"})

    rig.controller().run_once()

    assert rig.workflows.started == {}


def test_fault_a_blocked_drift_holds_its_pod_until_the_grace_period_then_the_node_goes(
    make_rig: RigFactory,
) -> None:
    # The promise: no pod is pushed past do-not-disrupt before the explicit deadline. The drifted node's
    # do-not-disrupt pod keeps running through the drain and goes only at the terminationGracePeriod.
    rig = make_rig(nodepool(consolidate_after="Never", grace="90m", instance_types=["m5.large", "m5.xlarge"]))
    drifted = rig.node("m5.large")
    room = rig.node("m5.xlarge")
    rig.pod("batch-0", drifted, cpu="500m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    # Requirement drift: the NodePool no longer allows m5.large (the pod fits on the other node).
    rig.config.nodepools[0] = nodepool(consolidate_after="Never", grace="90m", instance_types=["m5.xlarge"])
    started = rig.world.wall()
    seen: list[tuple[float, bool]] = []

    def sleep(seconds: float) -> None:
        alive = any(p["metadata"]["name"] == "batch-0" for p in rig.world.kube.list_pods_on_node(drifted))
        seen.append((rig.world.wall() - started, alive))
        rig.world.wall.advance(seconds)

    run = run_disruption(
        kube=rig.world.kube,
        cloud=rig.world.cloud,
        state=rig.world.state,
        config=rig.config,
        clock=rig.world.wall,
        sleep=sleep,
        collect_garbage=False,
    )

    assert [e.status for e in run.executions] == ["SUCCEEDED"]
    assert rig.world.kube.get_node(drifted) is None and rig.world.kube.get_node(room) is not None
    # Running at every drain pass; the drain ended (the pod deleted) no earlier than its own grace period
    # (30 s) before the 90-minute deadline.
    assert seen and all(alive for _, alive in seen)
    assert rig.world.wall() - started >= 5400 - 30
