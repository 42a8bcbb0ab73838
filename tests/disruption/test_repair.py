"""Node repair: a node whose condition has said it is broken for longer than tolerated is replaced at once;
never when more than 20 % of its NodePool is unhealthy (an outage, not a broken node)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleetwright.disruption import metrics as m
from fleetwright.disruption.config import DisruptionOptions, options_from_env
from fleetwright.disruption.planner import plan, validate
from fleetwright.disruption.types import REPAIR, UNHEALTHY, DisruptionSettings, NodeState, Plan
from fleetwright.kube.resources import EVENTS, NODES, POD_DISRUPTION_BUDGETS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.inprocess.disruption import run_disruption
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.state.nodeclaims import ClaimStatus
from tests.disruption.plan_builders import NOW, busy, node, planner_input, pool
from tests.support.disruption import RigFactory, nodepool

REPAIRING = DisruptionSettings(node_repair=True)
MINUTE = 60.0


def sick(name: str, condition: str = "Ready", status: str = "False", for_seconds: float = 31 * MINUTE,
         **fields: Any) -> NodeState:  # fmt: skip
    state = node(name, "m5.large", pods=busy(name, 2), **fields)
    state.conditions = {"Ready": ("True", NOW - 86400.0), condition: (status, NOW - for_seconds)}
    return state


def healthy(name: str) -> NodeState:
    state = node(name, "m5.large", pods=busy(name, 2))
    state.conditions = {"Ready": ("True", NOW - 86400.0)}
    return state


def _plan(nodes: list[NodeState], settings: DisruptionSettings = REPAIRING, **fields: Any) -> Plan:
    return plan(planner_input(nodes, settings=settings, **fields))


def test_a_node_not_ready_for_longer_than_30_minutes_is_repaired() -> None:
    nodes = [sick("bad"), *(healthy(f"ok-{i}") for i in range(9))]
    result = _plan(nodes)
    [command] = result.repairs
    assert (command.method, command.reason, command.node_names) == (REPAIR, UNHEALTHY, ["bad"])
    assert command.condition == "Ready" and command.replacements == []
    assert command.explanation == "repair node bad (m5.large): Ready=False for 31m, tolerated 30m"
    assert result.command is None and result.expirations == []  # the rest waits for the next pass


def test_within_its_toleration_a_node_is_left_alone() -> None:
    nodes = [sick("bad", for_seconds=29 * MINUTE), *(healthy(f"ok-{i}") for i in range(9))]
    assert _plan(nodes).repairs == []
    unknown = [
        sick("lost", status="Unknown", for_seconds=30 * MINUTE),
        *(healthy(f"ok-{i}") for i in range(9)),
    ]
    assert [c.node_names for c in _plan(unknown).repairs] == [["lost"]]


def test_node_monitoring_agent_conditions_have_their_own_tolerations() -> None:
    gpu = [
        sick("gpu", "AcceleratedHardwareReady", for_seconds=11 * MINUTE),
        *(healthy(f"ok-{i}") for i in range(9)),
    ]
    [command] = _plan(gpu).repairs
    assert command.condition == "AcceleratedHardwareReady"
    disk = [sick("disk", "StorageReady", for_seconds=11 * MINUTE), *(healthy(f"ok-{i}") for i in range(9))]
    assert _plan(disk).repairs == []
    ready_true = [sick("odd", "Ready", status="True"), *(healthy(f"ok-{i}") for i in range(9))]
    assert _plan(ready_true).repairs == []


def test_repair_is_off_unless_enabled() -> None:
    nodes = [sick("bad", for_seconds=5 * 3600), *(healthy(f"ok-{i}") for i in range(9))]
    result = _plan(nodes, settings=DisruptionSettings())
    assert result.repairs == [] and result.repair_blocked == {}
    assert options_from_env({}).settings.node_repair is False
    assert options_from_env({"FLEETWRIGHT_DISRUPTION_NODE_REPAIR": "true"}).settings.node_repair is True


def test_budgets_and_do_not_disrupt_do_not_hold_a_repair() -> None:
    frozen = pool(budgets=[{"nodes": "0"}])
    nodes = [
        sick("bad", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"}),
        *(healthy(f"ok-{i}") for i in range(9)),
    ]
    assert [c.node_names for c in plan(planner_input(nodes, [frozen], settings=REPAIRING)).repairs] == [
        ["bad"]
    ]


def test_fault_a_cluster_wide_outage_repairs_nothing() -> None:
    # Every kubelet lost the API server two hours ago: all nodes Ready=Unknown.
    nodes = [sick(f"n{i}", status="Unknown", for_seconds=2 * 3600) for i in range(10)]
    result = _plan(nodes)
    assert result.repairs == []
    assert result.repair_blocked == {
        f"n{i}": "more than 20% nodes are unhealthy in the nodepool" for i in range(10)
    }


def test_fault_up_to_20_percent_rounded_up_are_repaired_and_no_more() -> None:
    two = [sick("a"), sick("b"), *(healthy(f"ok-{i}") for i in range(8))]
    assert sorted(c.node_names[0] for c in _plan(two).repairs) == ["a", "b"]
    # A third unhealthy node (still within its toleration) counts too: 3 of 10 is past 20 %.
    three = [sick("a"), sick("b"), sick("c", for_seconds=MINUTE), *(healthy(f"ok-{i}") for i in range(7))]
    result = _plan(three)
    assert result.repairs == [] and sorted(result.repair_blocked) == ["a", "b"]
    small = [sick("a"), healthy("b"), healthy("c")]  # 1 of 3 rounds up to an allowance of 1
    assert [c.node_names for c in _plan(small).repairs] == [["a"]]


def test_fault_a_flapping_node_is_never_repaired() -> None:
    # The condition flips every few minutes: its transition time keeps moving, the toleration starts over.
    others = [healthy(f"ok-{i}") for i in range(9)]
    for flipped_ago in (4 * MINUTE, 12 * MINUTE, 2 * MINUTE, 29 * MINUTE):
        assert _plan([sick("flappy", for_seconds=flipped_ago), *others]).repairs == []
    no_time = sick("flappy")
    no_time.conditions["Ready"] = ("False", None)
    assert _plan([no_time, *others]).repairs == []


def test_a_repair_is_dropped_when_the_node_recovers_before_it_is_acted_on() -> None:
    nodes = [sick("bad"), *(healthy(f"ok-{i}") for i in range(9))]
    [command] = _plan(nodes).repairs
    recovered = [healthy("bad"), *(healthy(f"ok-{i}") for i in range(9))]
    assert validate(command, planner_input(recovered, settings=REPAIRING)) == (
        "node bad is no longer unhealthy long enough"
    )
    outage = [sick("bad"), *(sick(f"ok-{i}", for_seconds=MINUTE) for i in range(9))]
    assert validate(command, planner_input(outage, settings=REPAIRING)) == (
        "more than 20% nodes are unhealthy in the nodepool"
    )
    assert validate(command, planner_input(nodes, settings=REPAIRING)) is None


# -- the controller, against moto and the Kubernetes API emulator ------------------------------------------


def _stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_ready(rig: Any, minutes: float) -> list[dict[str, Any]]:
    since = _stamp(rig.world.wall() - minutes * MINUTE)
    return [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastTransitionTime": since}]


def test_the_controller_terminates_a_repaired_node_at_once(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    bad = rig.node("m5.large", conditions=_not_ready(rig, 45))
    rig.pod("web-0", bad, cpu="500m")
    for _ in range(4):
        rig.node("m5.large")
    controller = rig.controller(settings=DisruptionSettings(min_node_age_seconds=0, node_repair=True))

    report = controller.run_once()

    [request] = rig.workflows.started.values()
    assert (request.node, request.reason) == (bad, "Unhealthy")
    assert request.deadline == datetime.fromtimestamp(rig.world.wall(), UTC)  # no drain wait
    assert request.on_deadline == "delete" and not request.wait_for_replacement
    assert [c.method for c in report.commands] == ["repair"]
    assert rig.metrics.total(m.NODES_REPAIRED, Condition="Ready", NodePool="default") == 1
    assert rig.metrics.total(m.NODES_DISRUPTED, Reason="Unhealthy") == 1


def _set_ready(rig: Any, name: str, status: str) -> None:
    """What the kubelet (or the node lifecycle controller) does: a new Ready status, transitioned now."""
    condition = {"type": "Ready", "status": status, "lastTransitionTime": _stamp(rig.world.wall())}
    rig.world.client.patch(NODES, name, {"status": {"conditions": [condition]}}, subresource="status")


def test_fault_the_api_server_unreachable_deletes_nothing_and_the_repair_waits(
    make_rig: RigFactory, apiserver: ApiServer
) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    bad = rig.node("m5.large", conditions=_not_ready(rig, 45))
    for _ in range(4):
        rig.node("m5.large")
    controller = rig.controller(settings=DisruptionSettings(min_node_age_seconds=0, node_repair=True))

    # Down for the whole pass: the cluster cannot be read, nothing is decided.
    apiserver.faults.down()
    assert controller.run_once().error is not None
    apiserver.faults.up()
    assert rig.workflows.started == {}

    # Down between the decision and the act: the re-read fails, nothing is acted on.
    read = controller.reader.read
    calls: list[int] = []

    def read_then_fail(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            rig.ticker.now += 60  # acting comes late enough to re-read first
        else:
            apiserver.faults.down()
        return read(*args, **kwargs)

    controller.reader.read = read_then_fail  # type: ignore[method-assign]
    report = controller.run_once()
    apiserver.faults.up()
    assert report.error is not None and len(calls) == 2
    assert rig.workflows.started == {}
    assert rig.metrics.total(m.DISRUPTION_ERRORS, Stage="Pass") == 2
    assert rig.metrics.total(m.NODES_REPAIRED, Condition="Ready", NodePool="default") == 0

    # Back up: the node is still unhealthy and is repaired, once.
    controller.reader.read = read  # type: ignore[method-assign]
    controller.run_once()
    controller.run_once()
    assert [r.node for r in rig.workflows.started.values()] == [bad]
    assert rig.metrics.total(m.NODES_REPAIRED, Condition="Ready", NodePool="default") == 1


def test_fault_a_node_that_flaps_is_not_repaired_until_it_stays_broken(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    bad = rig.node("m5.large", conditions=_not_ready(rig, 45))
    for _ in range(4):
        rig.node("m5.large")
    controller = rig.controller(settings=DisruptionSettings(min_node_age_seconds=0, node_repair=True))
    read = controller.reader.read
    calls: list[int] = []

    def recover_before_acting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            rig.ticker.now += 60
        else:
            _set_ready(rig, bad, "True")  # the node came back between the decision and the act
        return read(*args, **kwargs)

    controller.reader.read = recover_before_acting  # type: ignore[method-assign]
    report = controller.run_once()
    controller.reader.read = read  # type: ignore[method-assign]
    assert [(c.method, c.status, c.detail) for c in report.commands] == [
        ("repair", "invalidated", f"node {bad} is no longer unhealthy long enough")
    ]
    assert rig.workflows.started == {}

    # It goes NotReady again: the toleration starts over from this transition.
    _set_ready(rig, bad, "False")
    rig.world.wall.now += 29 * MINUTE
    controller.run_once()
    assert rig.workflows.started == {}
    rig.world.wall.now += 2 * MINUTE
    controller.run_once()
    assert [r.node for r in rig.workflows.started.values()] == [bad]


def test_fault_an_unhealthy_nodepool_is_not_repaired_and_says_so(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    nodes = [rig.node("m5.large", conditions=_not_ready(rig, 120)) for _ in range(3)]
    controller = rig.controller(settings=DisruptionSettings(min_node_age_seconds=0, node_repair=True))

    controller.run_once()
    controller.run_once()  # a second pass, same verdict

    assert rig.workflows.started == {}
    assert rig.metrics.total(m.NODE_REPAIR_BLOCKED, NodePool="default") == 6
    message = "more than 20% nodes are unhealthy in the nodepool"
    for name in nodes:
        listed = rig.world.client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
        found = {
            (e["involvedObject"]["kind"], e["type"], e["message"])
            for e in listed
            if e["reason"] == "NodeRepairBlocked"
        }
        assert found == {("Node", "Warning", message)}
        claim = next(r.id for r in rig.world.state.nodeclaims.list() if r.node_name == name)
        listed = rig.world.client.list(EVENTS, field_selector=f"involvedObject.name={claim}").items
        assert ("NodeRepairBlocked", message) in {(e["reason"], e["message"]) for e in listed}


def test_in_process_a_repaired_node_is_drained_past_its_pdb_and_terminated(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="Never"))
    bad = rig.node("m5.large", conditions=_not_ready(rig, 45))
    rig.pod("web-0", bad, cpu="500m", annotations={DO_NOT_DISRUPT_ANNOTATION: "true"})
    for _ in range(4):
        rig.node("m5.large")
    rig.world.client.create(
        POD_DISRUPTION_BUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    instance_id = rig.instance_id(bad)

    run = run_disruption(
        kube=rig.world.kube,
        cloud=rig.world.cloud,
        state=rig.world.state,
        config=rig.config,
        options=DisruptionOptions(settings=DisruptionSettings(min_node_age_seconds=0, node_repair=True)),
        clock=rig.world.wall,
        sleep=lambda _s: None,
        collect_garbage=False,
    )

    assert [e.status for e in run.executions] == ["SUCCEEDED"]
    assert rig.world.kube.get_node(bad) is None
    assert rig.world.kube.list_pods_on_node(bad) == []
    found = rig.world.aws.clients.ec2.describe_instances(InstanceIds=[instance_id])
    assert found["Reservations"][0]["Instances"][0]["State"]["Name"] in ("shutting-down", "terminated")
    claims = [r for r in rig.world.state.nodeclaims.list() if r.instance_id == instance_id]
    assert [c.status for c in claims] == [ClaimStatus.TERMINATED]
    listed = rig.world.client.list(EVENTS, field_selector=f"involvedObject.name={bad}").items
    assert ("DisruptionTerminating", "Disrupting Node: Unhealthy") in {
        (e["reason"], e["message"]) for e in listed
    }
