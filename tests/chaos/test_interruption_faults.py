"""Interruption messages as SQS delivers them — duplicated, concurrently duplicated, out of order, about
instances this cluster does not own, malformed, stale, redelivered after a failed workflow, twenty at once
under throttling — and the cluster they leave: no message lost, no instance touched that is not ours, one
replacement per interrupted node."""

from __future__ import annotations

import copy
import threading
from typing import Any

from fleetwright.kube.resources import NODES
from tests.chaos.faults import During, throttle
from tests.chaos.figures import check
from tests.chaos.harness import Chaos
from tests.support.disruption import nodepool
from tests.support.interruption import STATE_CHANGE, for_instance


def spot_pool(chaos: Chaos) -> None:
    chaos.use(nodepool(consolidate_after="Never", capacity_types=["spot", "on-demand"]))
    chaos.explicit_deadlines = True


def spot_node(chaos: Chaos, pods: int = 1, cpu: str = "1500m") -> tuple[str, str]:
    """A spot node whose pods fill it (so its replacement is one node of its own)."""
    node = chaos.node("m5.large", capacity_type="spot")
    for i in range(pods):
        chaos.pod(f"{node}-web-{i}", node, cpu=cpu)
    return node, chaos.instance_of(node)


def test_duplicate_warning(chaos: Chaos) -> None:
    spot_pool(chaos)
    _, instance_id = spot_node(chaos)
    queue = chaos.queue()
    event = chaos.spot_warning(instance_id)
    for _ in range(2):
        queue.send(event, expect=chaos.terminated(instance_id))
    queue.drain()
    chaos.settle(disruption=True)
    check("duplicate warning", chaos.figures(needed=1))


def test_concurrent_duplicate_warning(chaos: Chaos) -> None:
    spot_pool(chaos)
    _, instance_id = spot_node(chaos)
    queue = chaos.queue()
    event = chaos.spot_warning(instance_id)
    for _ in range(2):
        queue.send(event, expect=chaos.terminated(instance_id))
    batches = [queue.receive(most=1), queue.receive(most=1)]
    start = threading.Barrier(2)

    def invoke(batch: list[dict[str, Any]]) -> None:
        start.wait()
        queue.invoke(batch)

    threads = [threading.Thread(target=invoke, args=(b,)) for b in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    queue.drain()
    chaos.settle(disruption=True)
    check("concurrent duplicate warning", chaos.figures(needed=1))


def test_state_change_before_the_warning(chaos: Chaos) -> None:
    spot_pool(chaos)
    node = chaos.node("m5.large", capacity_type="spot")
    instance_id = chaos.instance_of(node)
    chaos.observer.terminate_instances(InstanceIds=[instance_id])  # EC2 reclaimed it
    queue = chaos.queue()
    gone = chaos.terminated(instance_id)
    queue.send(for_instance(STATE_CHANGE, instance_id), expect=gone)
    queue.send(chaos.spot_warning(instance_id), expect=gone)
    queue.drain()
    chaos.settle(disruption=True)
    assert chaos.world.kube.get_node(node) is None
    check("state change before the warning", chaos.figures(needed=0))


def test_warning_for_an_instance_of_another_owner(chaos: Chaos) -> None:
    spot_pool(chaos)
    stranger = chaos.harness.launch_instance(owned=False)["InstanceId"]
    chaos.mark_baseline()
    queue = chaos.queue()
    queue.send(chaos.spot_warning(stranger))
    queue.drain()
    chaos.settle(disruption=True)
    assert chaos.instance_state(stranger) == "running"
    check("warning for an instance of another owner", chaos.figures(needed=0))


def test_malformed_messages(chaos: Chaos) -> None:
    spot_pool(chaos)
    queue = chaos.queue()
    queue.send("definitely not an event")
    broken = chaos.spot_warning("i-0123456789abcdef0")
    del broken["detail"]
    queue.send(broken)
    queue.drain()
    chaos.settle(disruption=True)
    check("malformed messages", chaos.figures(needed=0))


def test_stale_warning_for_a_replaced_instance(chaos: Chaos) -> None:
    spot_pool(chaos)
    _, instance_id = spot_node(chaos)
    queue = chaos.queue()
    event = chaos.spot_warning(instance_id)
    queue.send(event, expect=chaos.terminated(instance_id))
    queue.drain()
    # An hour later the same warning arrives again (a replayed archive, a stuck consumer).
    chaos.wall.advance(3600)
    queue.send(copy.deepcopy(event), expect=chaos.terminated(instance_id))
    queue.drain()
    chaos.settle(disruption=True)
    check("stale warning", chaos.figures(needed=1))


def test_failed_workflow_then_redelivery(chaos: Chaos) -> None:
    spot_pool(chaos)
    _, instance_id = spot_node(chaos)
    terminate = throttle(chaos.ec2, "TerminateInstances", 40)
    queue = chaos.queue()
    event = chaos.spot_warning(instance_id)
    queue.send(event, expect=chaos.terminated(instance_id))
    queue.drain()
    failed = [e for e in chaos.wait_executions() if e["status"] != "SUCCEEDED"]
    terminate.times = terminate.throttled  # EC2 answers again
    queue.send(copy.deepcopy(event), expect=chaos.terminated(instance_id))
    queue.drain()
    chaos.settle(disruption=True)
    assert failed, "the first workflow was meant to fail"
    check("failed workflow, then the warning again", chaos.figures(needed=1))


def test_mass_interruption_under_throttling(chaos: Chaos) -> None:
    # One pod per m5.large: each pod needs a node of its own, whoever launches it.
    chaos.use(
        nodepool(consolidate_after="Never", capacity_types=["spot", "on-demand"], instance_types=["m5.large"])
    )
    chaos.explicit_deadlines = True
    instances = [spot_node(chaos)[1] for _ in range(20)]
    throttle(chaos.ec2, "CreateFleet", 4)
    throttle(chaos.ec2, "TerminateInstances", 4)
    throttle(chaos.ec2, "DescribeInstances", 4)
    chaos.apiserver.faults.inject(
        429, verb="POST", resource="pods", subresource="eviction", times=10, retry_after=1
    )
    queue = chaos.queue()
    for instance_id in instances:
        queue.send(chaos.spot_warning(instance_id), expect=chaos.terminated(instance_id))
    queue.drain(polls=60)
    # The pods' controllers create them again (pending): the provisioner launches for any the
    # replacements did not cover (throttled launches), and the replacements take the rest.
    chaos.world.pending(20, cpu="1500m", prefix="web-again")
    chaos.provision("after")
    chaos.settle(disruption=True)
    check("20 spot interruptions under throttling", chaos.figures(needed=20))


def test_replacement_races_the_provisioner(chaos: Chaos) -> None:
    spot_pool(chaos)
    node, instance_id = spot_node(chaos, pods=1)

    # While the replacement launches, the pods' copies are already pending and a provisioner pass runs.
    def race() -> None:
        chaos.world.pending(1, cpu="1500m", prefix="web-copy")
        chaos.provision("racing")

    During("before-call.ec2.CreateFleet", race).install(chaos.ec2)
    queue = chaos.queue()
    queue.send(chaos.spot_warning(instance_id), expect=chaos.terminated(instance_id))
    queue.drain()
    chaos.provision("after")
    chaos.settle(disruption=True)
    assert node
    check("replacement races the provisioner", chaos.figures(needed=1))


def test_nodes_whose_instance_is_gone(chaos: Chaos) -> None:
    spot_pool(chaos)
    nodes = [chaos.node("m5.large") for _ in range(2)]
    chaos.world.client.patch(NODES, nodes[1], {"spec": {"unschedulable": True}})
    chaos.observer.terminate_instances(InstanceIds=[chaos.instance_of(n) for n in nodes])
    chaos.settle(disruption=True, register=False)
    assert all(chaos.world.kube.get_node(n) is None for n in nodes)
    check("Nodes whose instance is gone", chaos.figures(needed=0))
