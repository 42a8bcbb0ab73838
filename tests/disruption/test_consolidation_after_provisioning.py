"""The provisioner and consolidation pack alike: what the provisioner launches, consolidation keeps."""

from __future__ import annotations

import random

import pytest

from fleetwright.disruption.planner import plan
from fleetwright.model import labels as wk
from fleetwright.model.pod import Pod
from fleetwright.model.resources import parse_resources
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import SchedulingInput
from tests.disruption.plan_builders import catalog, node, planner_input, pod, pool

BROAD = [
    {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
]
AGENT = Pod(
    namespace="kube-system",
    name="agent",
    requests=parse_resources({"cpu": "150m", "memory": "200Mi", "pods": 1}),
    owner=("DaemonSet", "agent"),
)


def workload(seed: int, count: int) -> list[Pod]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        p = pod(f"w{i}-0", rng.choice(["250m", "500m", "1", "1500m"]), rng.choice(["256Mi", "1Gi", "4Gi"]))
        p.node_name = None
        pods.append(p)
    return pods


@pytest.mark.parametrize(("seed", "count"), [(1, 40), (2, 120), (3, 300)])
def test_the_provisioners_nodes_once_running_are_not_consolidated(seed: int, count: int) -> None:
    nodepool = pool(requirements=BROAD)
    pending = workload(seed, count)
    provisioned = schedule(
        SchedulingInput(pending, nodepool_templates([nodepool], []), list(catalog()), daemonsets=[AGENT])
    )
    assert not provisioned.errors and len(provisioned.new_claims) > 1
    running = []
    for i, claim in enumerate(provisioned.new_claims):
        agent = pod(f"agent-{i}", "150m", "200Mi", daemonset=True)
        running.append(
            node(f"n{i}", claim.instance_types[0].name, pods=[*claim.pods, agent], zone=claim.zones[0])
        )
    assert sum(n.price for n in running) == pytest.approx(provisioned.hourly_cost)
    decision = plan(planner_input(running, [nodepool], daemonsets=[AGENT]))
    assert decision.command is None
