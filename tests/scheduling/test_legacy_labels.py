"""Deprecated label keys in DaemonSet and pod node selection read as their GA forms."""

from __future__ import annotations

from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, nodepool, pod, req


def test_daemonset_selecting_the_beta_arch_label_takes_room_on_those_nodes() -> None:
    # the agent runs on amd64 nodes: with it, a 1-CPU pod no longer fits a 2-CPU node
    agent = pod("agent", cpu="1500m", memory="100Mi", selector={"beta.kubernetes.io/arch": "amd64"})
    pool = nodepool(requirements=req("node.kubernetes.io/instance-type", "In", "m5.large", "m5.xlarge"))
    result = schedule(
        SchedulingInput([pod("web", cpu="1", memory="1Gi")], [pool], SMALL_CATALOG, daemonsets=[agent])
    )
    (claim,) = result.new_claims
    assert [it.name for it in claim.instance_types] == ["m5.xlarge"]


def test_pod_node_affinity_on_the_beta_instance_type_label() -> None:
    web = pod("web", cpu="1", memory="1Gi", selector={"beta.kubernetes.io/instance-type": "m5.xlarge"})
    result = schedule(SchedulingInput([web], [nodepool()], SMALL_CATALOG))
    (claim,) = result.new_claims
    assert [it.name for it in claim.instance_types] == ["m5.xlarge"]
