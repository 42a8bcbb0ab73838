"""A node launched for pods keeps them while it starts: not-ready and startup taints held for minutes across
many provisioner passes give no second launch (Karpenter ignores them on a node it launched until the node
is initialized); slow registration launches nothing more; a node that never becomes Ready is terminated
once its registration timeout has passed, and its pods get exactly one replacement. Virtual clock."""

from __future__ import annotations

from dataclasses import replace

from fleetwright.claims.registration import INITIALIZED_LABEL
from fleetwright.claims.starting import is_starting, scheduling_node
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.kubelet import KubeletSimulator
from fleetwright.local.nodestart import NodeStart
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.state import ClaimStatus
from fleetwright.state.nodeclaims import NodeClaimRecord
from tests.support.aws import CLUSTER
from tests.support.provisioning import World, make_config, nodepool

STARTUP = {"key": "node.cilium.io/agent-not-ready", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
PASS_SECONDS = 10.0


def _provisioner(world: World, **options: float) -> Provisioner:
    pool = nodepool(instance_types=["c5.xlarge"], startup_taints=[STARTUP])
    return world.provisioner(make_config(pool, **options))


def _passes(world: World, provisioner: Provisioner, seconds: float) -> list[str]:
    """Reconcile and provision every ``PASS_SECONDS`` for ``seconds``; the claims launched meanwhile."""
    launched: list[str] = []
    end = world.wall() + seconds
    while world.wall() < end:
        world.wall.advance(PASS_SECONDS)
        report = provisioner.run_once()
        assert not report.error and all(not p.error for p in report.passes)
        launched += [c.id for p in report.passes for c in p.launched]
    return launched


def test_a_startup_taint_held_five_minutes_gives_exactly_one_launch(world: World) -> None:
    world.pending(2, cpu="1")  # app-0, app-1
    provisioner = _provisioner(world)
    [claim] = provisioner.run_once().launched
    assert claim.instance_type == "c5.xlarge"

    # The node registers NotReady (not-ready taint, startup taint), then is Ready with its startup taint.
    world.register_node(claim.provider_id, "node-a", ready=False, taints=[NOT_READY, STARTUP])
    assert _passes(world, provisioner, 60) == []
    assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.REGISTERED
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[STARTUP])
    assert _passes(world, provisioner, 300) == []
    assert world.create_fleet_calls() == 1

    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])  # the agent is up
    assert _passes(world, provisioner, 20) == []
    assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.INITIALIZED
    assert world.create_fleet_calls() == 1


def test_slow_registration_launches_nothing_more(world: World) -> None:
    world.pending(2, cpu="1")
    provisioner = _provisioner(world)
    [claim] = provisioner.run_once().launched
    assert _passes(world, provisioner, 600) == []  # ten minutes without a Node: under the timeout
    world.register_node(claim.provider_id, "node-a", ready=False, taints=[NOT_READY, STARTUP])
    assert _passes(world, provisioner, 60) == []
    assert world.create_fleet_calls() == 1


def test_an_initialized_node_is_taken_at_face_value(world: World) -> None:
    """Once initialized, a taint is real: a node cordoned by its startup taint's key again takes no pods."""
    world.pending(2, cpu="1")
    provisioner = _provisioner(world)
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    _passes(world, provisioner, PASS_SECONDS)  # registration puts the claim's startup taint on
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])  # which its agent removes
    _passes(world, provisioner, PASS_SECONDS)
    assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.INITIALIZED
    world.register_node(claim.provider_id, "node-a", ready=True, taints=[STARTUP])
    assert len(_passes(world, provisioner, PASS_SECONDS)) == 1


def test_a_node_that_never_becomes_ready_is_replaced_once(world: World) -> None:
    world.pending(2, cpu="1")
    provisioner = _provisioner(world, registration_timeout_seconds=900.0)
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=False, taints=[NOT_READY, STARTUP])
    assert _passes(world, provisioner, 880) == []

    replacements = _passes(world, provisioner, 200)

    first = world.state.nodeclaims.get(claim.id)
    assert first.status == ClaimStatus.TERMINATED
    assert first.reason == "node did not initialize within 900 s"
    assert len(replacements) == 1
    assert world.create_fleet_calls() == 2
    assert claim.instance_id not in {i["InstanceId"] for i in world.instances(("pending", "running"))}


def _record(status: ClaimStatus) -> NodeClaimRecord:
    return NodeClaimRecord(
        id="default-abc",
        nodepool="default",
        status=str(status),
        created_at=0.0,
        instance_id="i-0123",
        zone="us-east-1a",
        startup_taints=["node.cilium.io/agent-not-ready:NoSchedule"],
        allocatable={"cpu": 3920, "memory": 6_000_000_000, "pods": 58, "nvidia.com/gpu": 1},
    )


def _node(labels: dict[str, str] | None = None) -> Node:
    return Node(
        name="node-a",
        labels=labels or {},
        allocatable={"cpu": 3920, "memory": 6_000_000_000, "pods": 58},
        taints=(
            Taint("node.kubernetes.io/not-ready", NO_SCHEDULE),
            Taint("node.kubernetes.io/not-ready", NO_EXECUTE),
            Taint("node.cilium.io/agent-not-ready", NO_SCHEDULE),
            Taint("node.cilium.io/agent-not-ready", NO_EXECUTE),  # not the startup taint's effect
            Taint("dedicated", NO_SCHEDULE, "db"),
        ),
        provider_id="aws:///us-east-1a/i-0123",
        ready=False,
    )


def test_a_starting_node_loses_only_ephemeral_and_startup_taints_and_gains_the_claims_allocatable() -> None:
    seen = scheduling_node(_node(), _record(ClaimStatus.REGISTERED))
    assert seen.taints == (
        Taint("node.cilium.io/agent-not-ready", NO_EXECUTE),
        Taint("dedicated", NO_SCHEDULE, "db"),
    )
    assert seen.allocatable["nvidia.com/gpu"] == 1  # the device plugin has not reported it yet
    assert seen.allocatable["cpu"] == 3920


def test_initialized_nodes_and_nodes_without_a_claim_are_taken_as_they_are() -> None:
    node = _node()
    assert scheduling_node(node, None) is node
    assert scheduling_node(node, _record(ClaimStatus.INITIALIZED)) is node
    assert scheduling_node(node, _record(ClaimStatus.TERMINATED)) is node
    labelled = _node({INITIALIZED_LABEL: "true"})
    assert not is_starting(labelled, _record(ClaimStatus.REGISTERED))
    assert scheduling_node(labelled, _record(ClaimStatus.REGISTERED)) is labelled


class Monotonic:
    """The kubelet simulator's clock (and EC2's boot), moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reported_reproduction_a_registered_node_with_its_startup_taint_gets_no_second_launch(
    world: World, apiserver: ApiServer
) -> None:
    """A first pass launched a c5.xlarge for app-0 and app-1; once the node registered with its startup
    taint, the next pass launched a second c5.xlarge for the same two pods. Against the emulator, its
    kubelet booting the instance from its user data and its node lifecycle controller tainting it."""
    start = NodeStart(boot_seconds=10, register_seconds=20, ready_seconds=15, startup_taint_seconds=600)
    clock = Monotonic()
    kubelet = KubeletSimulator(apiserver, world.aws.clients.ec2, CLUSTER, start=start, clock=clock)
    kubelet.start(poll=False)
    try:
        world.pending(2, cpu="1")  # app-0, app-1
        provisioner = _provisioner(world)
        [claim] = provisioner.run_once().launched
        assert claim.instance_type == "c5.xlarge"
        launches = []
        for _ in range(40):  # 400 s of passes: boot, registration, Ready, then the startup taint held 5 min
            clock.now += PASS_SECONDS
            kubelet.poll_once()
            launches += _passes(world, provisioner, PASS_SECONDS)
        [node] = [n for n in world.kube.list_nodes() if n["spec"].get("providerID") == claim.provider_id]
        assert {t["key"] for t in node["spec"]["taints"]} == {STARTUP["key"]}  # Ready, agent not yet up
        assert launches == [] and world.create_fleet_calls() == 1

        clock.now += start.startup_taint_seconds
        kubelet.poll_once()  # the agent removes its taint
        assert _passes(world, provisioner, PASS_SECONDS) == []
        assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.INITIALIZED
        assert world.create_fleet_calls() == 1
    finally:
        kubelet.stop()


def _daemon(name: str, **extra: object) -> Pod:
    return Pod(
        namespace="kube-system",
        name=name,
        requests={"cpu": 100, "memory": 50_000_000},
        owner=("DaemonSet", name),
        **extra,  # type: ignore[arg-type]
    )


def test_a_starting_node_keeps_room_for_the_daemonsets_that_will_run_there() -> None:
    node = _node()
    bound = replace(_daemon("kube-proxy"), name="kube-proxy-x2b9k")
    node.pods.append(bound)
    dedicated = Toleration("dedicated", "Equal", "db", NO_SCHEDULE)
    agent = Toleration("node.cilium.io/agent-not-ready", "Exists")  # its NoExecute taint is no startup taint
    daemonsets = [
        _daemon("kube-proxy"),  # its pod is there already
        _daemon("log-agent", tolerations=(dedicated, agent)),  # will run once the node is up
        _daemon("picky", tolerations=(agent,)),  # does not tolerate dedicated=db: never runs there
    ]

    seen = scheduling_node(node, _record(ClaimStatus.REGISTERED), daemonsets)

    assert [p.name for p in seen.pods] == ["kube-proxy-x2b9k", "log-agent"]
    assert [p.name for p in node.pods] == ["kube-proxy-x2b9k"]  # the snapshot's node is left as it is
