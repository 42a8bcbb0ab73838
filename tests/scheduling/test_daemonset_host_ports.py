"""DaemonSets' hostPorts are taken on every node they run on (modelled on Karpenter's provisioning tests)."""

from __future__ import annotations

from fleetwright.model.labels import ARCH, HOSTNAME, INSTANCE_TYPE
from fleetwright.model.node import Node
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.taints import Taint, Toleration
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, nodepool, pod


def daemonset(name: str, *ports: HostPort, selector: dict[str, str] | None = None) -> Pod:
    ds = pod(name, cpu="100m", memory="64Mi", namespace="kube-system", selector=selector)
    ds.host_ports = ports
    ds.owner = ("DaemonSet", name)
    return ds


def wants(name: str, *ports: HostPort, selector: dict[str, str] | None = None) -> Pod:
    p = pod(name, cpu="1", memory="1Gi", selector=selector)
    p.host_ports = ports
    return p


def run(
    pods: list[Pod],
    daemonsets: list[Pod],
    pools: list[NodePoolTemplate] | None = None,
    nodes: list[Node] | None = None,
) -> Results:
    return schedule(
        SchedulingInput(
            pods, pools or [nodepool()], list(SMALL_CATALOG), nodes=nodes or [], daemonsets=daemonsets
        )
    )


def test_a_pod_cannot_bind_a_host_port_a_daemonset_binds_on_the_nodepools_nodes() -> None:
    result = run([wants("web", HostPort(8080))], [daemonset("agent", HostPort(8080))])
    assert not result.new_claims
    assert [e.reason for e in result.errors] == [
        "NodePool default: hostPort 8080/TCP is bound by DaemonSet kube-system/agent on its nodes"
    ]


def test_other_ports_protocols_and_host_ips_do_not_conflict() -> None:
    ports = [
        HostPort(8081),  # another port
        HostPort(8080, "UDP"),  # another protocol
        HostPort(8080, host_ip="10.0.0.2"),  # another address than the DaemonSet's
    ]
    result = run(
        [wants(f"web-{i}", port) for i, port in enumerate(ports)],
        [daemonset("agent", HostPort(8080, host_ip="10.0.0.1"))],
    )
    assert not result.errors
    assert result.scheduled == 3
    # a wildcard address overlaps every address
    wildcard = run([wants("web", HostPort(8080))], [daemonset("agent", HostPort(8080, host_ip="10.0.0.1"))])
    assert [e.pod.name for e in wildcard.errors] == ["web"]


def test_another_nodepool_without_the_daemonset_takes_the_pod() -> None:
    monitored = nodepool("monitored", weight=100)
    dedicated = nodepool("dedicated", taints=(Taint("dedicated", "NoSchedule", "web"),))
    # the DaemonSet does not tolerate the dedicated NodePool's taint, so it does not run there
    p = wants("web", HostPort(8080))
    p.tolerations = (Toleration("dedicated", "Equal", "web", "NoSchedule"),)
    result = run([p], [daemonset("agent", HostPort(8080))], pools=[monitored, dedicated])
    assert not result.errors
    assert [c.nodepool for c in result.new_claims] == ["dedicated"]


def test_only_instance_types_the_daemonset_runs_on_are_excluded() -> None:
    # the DaemonSet only runs on arm64 nodes: the pod gets an amd64 node
    result = run(
        [wants("web", HostPort(8080))], [daemonset("agent", HostPort(8080), selector={ARCH: "arm64"})]
    )
    assert not result.errors
    claim = result.new_claims[0]
    assert all(t.labels[ARCH] == "amd64" for t in claim.instance_types)


def test_a_pod_joining_a_claim_narrows_it_to_types_where_the_port_is_free() -> None:
    # the DaemonSet runs on amd64 nodes only: the claim both pods share must launch an arm64 type
    pods = [wants("plain"), wants("web", HostPort(8080))]
    result = run(pods, [daemonset("agent", HostPort(8080), selector={ARCH: "amd64"})])
    assert not result.errors
    assert len(result.new_claims) == 1
    claim = result.new_claims[0]
    assert [t.name for t in claim.instance_types] == ["m6g.large"]
    assert claim.price == round(0.077 * 0.4, 10)


def test_two_pods_with_the_same_port_never_share_a_node() -> None:
    result = run([wants(f"web-{i}", HostPort(9000)) for i in range(3)], [daemonset("agent", HostPort(8080))])
    assert not result.errors
    assert sorted(len(c.pods) for c in result.new_claims) == [1, 1, 1]


def test_an_existing_node_running_the_daemonset_pod_refuses_the_port() -> None:
    running = daemonset("agent", HostPort(8080))
    running.node_name = "n1"
    existing = node("n1", "8", "32Gi", labels={HOSTNAME: "n1"}, pods=[running])
    result = run(
        [wants("web", HostPort(8080)), wants("api")], [daemonset("agent", HostPort(8080))], nodes=[existing]
    )
    placed = {p.name for e in result.existing for p in e.pods}
    assert placed == {"api"}
    assert [e.pod.name for e in result.errors] == ["web"]


def test_a_node_still_launching_counts_the_daemonsets_that_will_run_on_it() -> None:
    launching = node(
        "nodeclaim-x", "8", "32Gi", labels={HOSTNAME: "nodeclaim-x", INSTANCE_TYPE: "m5.2xlarge"}
    )
    launching.in_flight = True
    ds = [daemonset("agent", HostPort(8080)), daemonset("arm-only", HostPort(9100), selector={ARCH: "arm64"})]
    result = run([wants("web", HostPort(8080)), wants("metrics", HostPort(9100))], ds, nodes=[launching])
    assert {p.name for e in result.existing for p in e.pods} == {"metrics"}
    assert [e.pod.name for e in result.errors] == ["web"]
