"""Reading the cluster for a pass: three LISTs (``read_snapshot``) against the watch-fed ``ClusterCache``,
cold (first invocation: LIST everything) and warm (later invocations: sync to a quorum resourceVersion,
apply the watch events since), and the cost of converting one pod.

The API emulator runs in this process (its HTTP server in a thread, its controllers off); objects are
seeded straight into its store. Read time is wall time of the read; bytes are response bodies of
non-streamed requests (``KubeClient.bytes_received``: LISTs and the quorum read; watch streams are not
counted, their events are). Each warm pass follows ``--changes`` pod writes (half new unschedulable pods,
half bound).

    .venv/bin/python bench/cache.py [--nodes 1000] [--pods-per-node 11.6] [--pending 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers"))

from scheduling import machine  # noqa: E402  (bench/scheduling.py)


def node_object(i: int) -> dict[str, Any]:
    name = f"ip-10-0-{i // 250}-{i % 250}.ec2.internal"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}",
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand",
            },
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{i:017x}"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "7910m", "memory": "31482Mi", "pods": "58"},
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
            "images": [{"names": [f"registry/image-{k}:v1"], "sizeBytes": 10_000_000} for k in range(20)],
        },
    }


def pod_object(name: str, node: str | None, app: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": f"registry/app-{app}:v1",
                "env": [{"name": f"VAR_{k}", "value": "x" * 20} for k in range(10)],
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            },
            {"name": "sidecar", "image": "registry/proxy:v1", "resources": {"requests": {"cpu": "100m"}}},
        ],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": f"app-{app}"}},
            }
        ],
    }
    status: dict[str, Any] = {"phase": "Running"}
    if node:
        spec["nodeName"] = node
    else:
        status = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
            ],
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{app % 20}",
            "labels": {"app": f"app-{app}", "pod-template-hash": "abc123"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{app}-abc123",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def seed(store: Any, nodes: int, bound: int, pending: int) -> list[str]:
    from fleetwright.local.apiserver import resources as emu

    for team in range(20):
        store.create(
            emu.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{team}"}}
        )
    names = []
    for i in range(nodes):
        obj = node_object(i)
        store.create(emu.NODES, obj)
        names.append(obj["metadata"]["name"])
    for i in range(bound):
        obj = pod_object(f"bound-{i}", names[i % nodes], i % 300)
        store.create(emu.PODS, obj, namespace=obj["metadata"]["namespace"])
    for i in range(pending):
        obj = pod_object(f"pending-{i}", None, i % 300)
        store.create(emu.PODS, obj, namespace=obj["metadata"]["namespace"])
    return names


def change(store: Any, names: list[str], round_: int, count: int) -> None:
    from fleetwright.local.apiserver import resources as emu

    for i in range(count):
        node = names[i % len(names)] if i % 2 else None
        obj = pod_object(f"new-{round_}-{i}", node, i)
        store.create(emu.PODS, obj, namespace=obj["metadata"]["namespace"])


def conversion_micros(samples: int = 5000) -> tuple[float, float]:
    """µs per pod for ``pod_from_object``: now, and with the exact Fraction parser patched in."""
    from fleetwright.model import kube as model_kube
    from fleetwright.model import quantity

    pod = pod_object("p", "n", 1)

    def timed() -> float:
        started = time.perf_counter()
        for _ in range(samples):
            model_kube.pod_from_object(pod)
        return (time.perf_counter() - started) / samples * 1e6

    now = statistics.median(timed() for _ in range(3))
    saved = model_kube.parse_resource

    def exact(name: str, value: Any) -> int:
        return quantity.to_milli(value) if name == quantity.CPU else quantity.to_units(value)

    model_kube.parse_resource = exact  # type: ignore[assignment]
    try:
        fraction = statistics.median(timed() for _ in range(3))
    finally:
        model_kube.parse_resource = saved
    return now, fraction


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=float, default=11.6)
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from fleetwright.kube import ClusterConfig, KubeClient, KubeCluster
    from fleetwright.kube.snapshot import read_snapshot
    from fleetwright.local.apiserver import ApiServer

    print(f"machine: {machine()}")
    now, fraction = conversion_micros()
    print(f"pod_from_object: {now:.1f} µs/pod (with the Fraction parser: {fraction:.1f} µs/pod)")

    bound = math.floor(args.nodes * args.pods_per_node)
    # No emulator controllers: they re-list on every write, which would make seeding quadratic.
    with ApiServer(
        port=0, deployment_controller=False, pod_lifecycle=False, disruption_controller=False
    ) as server:
        started = time.perf_counter()
        names = seed(server.store, args.nodes, bound, args.pending)
        print(
            f"cluster: {args.nodes} nodes, {bound} bound pods, {args.pending} pending "
            f"(seeded in {time.perf_counter() - started:.1f} s)"
        )
        client = KubeClient(ClusterConfig(server=server.url), read_timeout=120)
        cluster = KubeCluster(client)

        lists = [_measure(client, lambda: read_snapshot(cluster)) for _ in range(args.runs)]
        seconds = statistics.median(s for s, _, _ in lists)
        print(
            f"three LISTs (read_snapshot): {seconds:.2f} s, {lists[0][1] / 1e6:.1f} MB per pass "
            f"(median of {args.runs})"
        )

        _cache_passes(server, client, names, args)
        client.close()


def _measure(client: Any, read: Any) -> tuple[float, int, Any]:
    """Seconds and bytes received by one read, and what it returned."""
    before = client.bytes_received
    started = time.perf_counter()
    result = read()
    return time.perf_counter() - started, client.bytes_received - before, result


def _cache_passes(server: Any, client: Any, names: Any, args: argparse.Namespace) -> None:
    """The cache's cold snapshot, then ``args.runs`` warm ones each after ``args.changes`` pod writes."""
    from fleetwright.kube.cache import ClusterCache

    cache = ClusterCache(client)
    cold_seconds, cold_bytes, snap = _measure(client, cache.snapshot)
    print(
        f"cache, cold: {cold_seconds:.2f} s, {cold_bytes / 1e6:.1f} MB "
        f"({len(snap.nodes)} nodes, {len(snap.pending_pods)} pending)"
    )
    warm = []
    for round_ in range(args.runs):
        events = sum(cache.stats()["events"].values())
        change(server.store, names, round_, args.changes)
        seconds, size, snap = _measure(client, cache.snapshot)
        warm.append((seconds, size, sum(cache.stats()["events"].values()) - events, cache.last_sync))
    seconds = statistics.median(w[0] for w in warm)
    sync = statistics.median(w[3].seconds for w in warm if w[3] is not None)
    print(
        f"cache, warm: {seconds:.3f} s per pass (sync {sync:.3f} s), {warm[-1][1] / 1e3:.1f} kB, "
        f"~{warm[-1][2]} watch events after {args.changes} pod writes (median of {args.runs}; "
        f"{len(snap.pending_pods)} pending at the end)"
    )
    cache.stop()


if __name__ == "__main__":
    main()
