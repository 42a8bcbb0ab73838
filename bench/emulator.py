"""The Kubernetes API emulator at scale: LIST of every pod (paged with limit/continue, as client-go and
kubectl page, and unpaged) and WATCH throughput with several watchers, over HTTP.

The client runs in the same process, so LIST seconds include its own JSON decoding; "emulator CPU" is
the CPU time of the emulator's request threads alone (the first of the runs serializes every pod, the
later ones reuse the cached JSON). WATCH seconds run from the first of the PATCHes (made in-process)
to the last watcher having read every event.

Objects are seeded through ``Store.seed`` when the store has it (else one ``Store.create`` each), with
the built-in controllers off so only the requests measured run.

    .venv/bin/python bench/emulator.py [--pods 100000] [--nodes 10000] [--watchers 1 10] [--events 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling import machine  # bench/scheduling.py


def _pod(i: int, nodes: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"web-{i:06d}",
            "namespace": f"team-{i % 20}",
            "labels": {"app": f"app-{i % 500}", "tier": "web"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{i % 500}-5d8f",
                    "uid": f"00000000-0000-0000-0000-{i % 500:012d}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{i % nodes:05d}",
            "containers": [
                {
                    "name": "app",
                    "image": "public.ecr.aws/nginx/nginx:1.27",
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def _node(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"node-{i:05d}",
            "labels": {"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "us-east-1a"},
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{i:017x}"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def seed(store: Any, nodes: int, pods: int) -> float:
    from fleetwright.local.apiserver.resources import NAMESPACES, NODES, PODS

    start = time.perf_counter()
    for ns in range(20):
        store.create(NAMESPACES, {"metadata": {"name": f"team-{ns}"}})
    node_objects = [_node(i) for i in range(nodes)]
    pod_objects = [_pod(i, nodes) for i in range(pods)]
    if hasattr(store, "seed"):
        store.seed(NODES, node_objects)
        store.seed(PODS, pod_objects)
    else:
        for obj in node_objects:
            store.create(NODES, obj)
        for obj in pod_objects:
            store.create(PODS, obj)
    return time.perf_counter() - start


def list_all(host: str, port: int, path: str, limit: int) -> tuple[int, int, int]:
    """Page through ``path``; returns (items, pages, bytes)."""
    conn = http.client.HTTPConnection(host, port)
    items = pages = size = 0
    token = ""
    while True:
        query = f"?limit={limit}" if limit else ""
        if token:
            query += f"&continue={quote(token)}"
        conn.request("GET", path + query)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"LIST {path}: {response.status} {body[:200]!r}")
        size += len(body)
        doc = json.loads(body)
        items += len(doc["items"])
        pages += 1
        token = doc["metadata"].get("continue") or ""
        if not token:
            break
    conn.close()
    return items, pages, size


def _server_cpu(server: Any) -> float:
    """CPU seconds of the emulator's request threads so far (-1 when the emulator does not count them)."""
    traffic = getattr(server, "traffic", None)
    return traffic.snapshot().cpu_seconds if traffic is not None else -1.0


def watch_throughput(server: Any, watchers: int, events: int) -> tuple[float, int]:
    """Open ``watchers`` pod watches, PATCH ``events`` pods' labels; seconds until every watcher has read
    every event, and the bytes each read."""
    from fleetwright.local.apiserver.resources import PODS

    store = server.store
    rv = store.resource_version
    ready = threading.Barrier(watchers + 1)
    done: list[float] = []
    sizes: list[int] = []

    def watcher() -> None:
        conn = http.client.HTTPConnection(server.host, server.port)
        conn.request("GET", f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=600")
        response = conn.getresponse()
        ready.wait()
        seen = size = 0
        while seen < events:
            line = response.readline()
            if not line:
                break
            size += len(line)
            if json.loads(line)["type"] == "MODIFIED":
                seen += 1
        done.append(time.perf_counter())
        sizes.append(size)
        conn.close()

    threads = [threading.Thread(target=watcher, daemon=True) for _ in range(watchers)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.2)  # the watch requests are being served
    start = time.perf_counter()
    for i in range(events):
        store.mutate(
            PODS,
            f"team-{i % 20}",
            f"web-{i:06d}",
            lambda p, i=i: {
                **p,
                "metadata": {**p["metadata"], "labels": {**p["metadata"]["labels"], "v": f"{watchers}-{i}"}},
            },
        )
    for t in threads:
        t.join(timeout=600)
    return max(done) - start, sizes[0] if sizes else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--limit", type=int, nargs="+", default=[500, 0], help="page sizes (0 = unpaged)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--watchers", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--skip-list", action="store_true")
    args = parser.parse_args()

    from fleetwright.local.apiserver import ApiServer

    print(machine())
    server = ApiServer(
        port=0, deployment_controller=False, pod_lifecycle=False, disruption_controller=False
    ).start()
    try:
        seconds = seed(server.store, args.nodes, args.pods)
        print(f"seeded {args.nodes} nodes, {args.pods} pods in {seconds:.2f} s")
        if not args.skip_list:
            for limit in args.limit:
                times, cpu = [], []
                for _ in range(args.repeat):
                    before = _server_cpu(server)
                    start = time.perf_counter()
                    items, pages, size = list_all(server.host, server.port, "/api/v1/pods", limit)
                    times.append(time.perf_counter() - start)
                    cpu.append(_server_cpu(server) - before)
                print(
                    f"LIST pods limit={limit or 'none'}: {items} items, {pages} pages, {size / 1e6:.1f} MB, "
                    f"median {statistics.median(times):.2f} s of {args.repeat} "
                    f"({', '.join(f'{t:.2f}' for t in times)}), emulator CPU "
                    + (", ".join(f"{c:.2f}" for c in cpu) if cpu[0] >= 0 else "not counted")
                )
            times = []
            for i in range(args.repeat):
                start = time.perf_counter()
                list_all(
                    server.host, server.port, f"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-{i:05d}", 0
                )
                times.append(time.perf_counter() - start)
            print(f"LIST pods fieldSelector=spec.nodeName=X: median {statistics.median(times) * 1000:.1f} ms")
        for watchers in args.watchers:
            seconds, size = watch_throughput(server, watchers, args.events)
            print(
                f"WATCH {watchers} watcher(s), {args.events} events: {seconds:.2f} s, "
                f"{args.events * watchers / seconds:,.0f} events/s delivered, {size / 1e6:.1f} MB each"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
