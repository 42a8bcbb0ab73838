"""Provisioning latency: seconds from pod creation in the Kubernetes API emulator to the CreateFleet call,
and the provisioner handler's cold-start import time.

Everything runs in-process against moto (EC2, SSM, DynamoDB) and the emulator, with the production batching
window (idle 1 s, max 10 s), so the figures are dominated by that window; what is left is the provisioner's
own work (LISTs, scheduling, DynamoDB writes, launch preparation). Pods are created over HTTP, as the
kube-scheduler would mark them: one POST, then a status PATCH marking them Unschedulable.

    .venv/bin/python bench/latency.py [--pods 1 5 100 1000] [--skip-import] [--memory 512 1024]

Lambda memory is not reproduced: the bench runs at this machine's full CPU (shared with whatever else
runs). ``--memory`` models it: Lambda gives CPU in proportion to memory (1,769 MB is one vCPU), so the CPU
seconds the provisioner's threads (named ``fleetwright-*``: the loop, the pod watch, the launches; not the
emulator's) spent from the end of the batch idle window (taken at 95% of it after the last pod) to
CreateFleet, the pass's own work, are stretched by 1,769 / memory and added to the window, the one wait
on the way (``batch_idle + pass_cpu * 1769 / memory``; ``cpu`` is the threads' CPU from the first pod on,
window included). Left out of those CPU seconds: the time inside AWS requests, from signing to the
response (moto's work here, network waiting on AWS); botocore's serializing and parsing stay in. Not in
the model: network round trips to AWS and the API server, and this machine's queueing (in the measured
wall time, not in the model).
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


from scheduling import machine  # noqa: E402  (bench/scheduling.py)
from seeding import K8S_VERSION, seed_network  # noqa: E402  (bench/seeding.py)

REGION = "us-east-1"
CLUSTER = "bench"
TABLE = "fleetwright-state"
_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@dataclass
class Figure:
    pods: int
    create_seconds: float  # creating the pods themselves
    first_to_fleet: float  # first pod created → first CreateFleet call
    last_to_fleet: float  # last pod created → first CreateFleet call
    scheduling_seconds: float
    claims: int
    create_fleet_calls: int
    cpu_to_fleet: float = 0.0  # the provisioner threads' CPU seconds from the pods' creation to CreateFleet
    batch_idle: float = 1.0  # the batch window's idle time (FLEETWRIGHT_BATCH_IDLE_SECONDS)
    pass_cpu: float = 0.0  # the same from the end of the batch window on

    def modelled(self, memory_mb: int) -> float:
        """First pod → CreateFleet on a Lambda of ``memory_mb`` (see the module's docstring)."""
        return self.batch_idle + self.pass_cpu * LAMBDA_MB_PER_VCPU / memory_mb


LAMBDA_MB_PER_VCPU = 1769
FUNCTION_THREADS = "fleetwright"  # the name prefix of the provisioner's threads


def function_cpu() -> dict[int, float]:
    """CPU seconds so far of each live thread of the provisioner (named ``fleetwright-*``), by thread id."""
    seconds: dict[int, float] = {}
    for thread in threading.enumerate():
        if thread.name.startswith(FUNCTION_THREADS) and thread.ident is not None:
            try:
                seconds[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, ProcessLookupError):  # ended meanwhile
                continue
    return seconds


class RequestCpu:
    """CPU seconds the provisioner's threads spend inside AWS requests, from signing to the response (moto
    answering in the calling thread), as (when it ended, seconds)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.spent: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def start(self, **_: Any) -> None:
        self.local.cpu = time.thread_time()

    def end(self, **_: Any) -> None:
        started = getattr(self.local, "cpu", None)
        self.local.cpu = None
        if started is not None and threading.current_thread().name.startswith(FUNCTION_THREADS):
            with self.lock:
                self.spent.append((time.perf_counter(), time.thread_time() - started))

    def between(self, start: float, end: float) -> float:
        with self.lock:
            return sum(cpu for when, cpu in self.spent if start <= when <= end)


REQUEST_CPU = RequestCpu()


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the provisioner's threads spent between two :func:`function_cpu` readings."""
    return sum(value - before.get(ident, 0.0) for ident, value in after.items())


def _seed_aws(clients: Any) -> Any:
    """A VPC with tagged subnets and security group, EKS AMIs, the state table; returns the ClusterInfo."""
    from fleetwright.aws.cluster import ClusterInfo

    seed_network(clients, CLUSTER, ("us-east-1a", "us-east-1b"), TABLE)
    return ClusterInfo(
        name=CLUSTER,
        endpoint="https://EXAMPLE.gr7.us-east-1.eks.amazonaws.com",
        ca_bundle=base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n").decode(),
        version=K8S_VERSION,
    )


def _config() -> Any:
    from fleetwright.config.settings import ProvisionerConfig
    from fleetwright.model.karpenter import EC2NodeClass, NodePool

    nodepool = NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-category",
                                "operator": "In",
                                "values": ["c", "m", "r"],
                            },
                            {
                                "key": "karpenter.k8s.aws/instance-generation",
                                "operator": "Gt",
                                "values": ["4"],
                            },
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    }
                }
            },
        }
    )
    nodeclass = EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "instanceProfile": "bench-node-profile",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            },
        }
    )
    return ProvisionerConfig(cluster_name=CLUSTER, nodepools=[nodepool], nodeclasses=[nodeclass])


def _create_pods(server: Any, prefix: str, count: int) -> tuple[float, float]:
    """Create ``count`` pods already marked Unschedulable (as the kube-scheduler marks them) straight in
    the emulator's store (its HTTP front end is not what is measured); returns when the first and the last
    were stored. The provisioner sees them through its watch, as in a cluster."""
    from fleetwright.local.apiserver.resources import PODS

    first = last = 0.0
    for i in range(count):
        server.store.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{prefix}-{i}", "namespace": "default", "labels": {"app": prefix}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "pause",
                            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                        }
                    ]
                },
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/0",
                        }
                    ],
                },
            },
        )
        last = time.perf_counter()
        if i == 0:
            first = last
    return first, last


def _start_watching(provisioner: Any) -> tuple[threading.Thread, list[Any]]:
    """Run the provisioner's watch loop in a thread (40 s), once it has reconciled and is watching."""
    runs: list[Any] = []
    worker = threading.Thread(
        target=lambda: runs.append(provisioner.run_until(time.monotonic() + 40)),
        name=f"{FUNCTION_THREADS}-provisioner",
    )
    worker.start()
    time.sleep(1.5)  # the provisioner has reconciled and is watching
    return worker, runs


def _await_launches(worker: threading.Thread, fleet_calls: list[float]) -> None:
    """Let the pass finish its launches: no new CreateFleet for 3 s (at most 60 s)."""
    give_up = time.perf_counter() + 60
    while worker.is_alive() and time.perf_counter() < give_up:
        if fleet_calls and time.perf_counter() - fleet_calls[-1] > 3:
            break
        time.sleep(0.1)


def _cpu_until_fleet(
    cpu_mark: dict[int, float], wall_mark: float, fleet_cpu: list[dict[int, float]], fleet: float
) -> float:
    """The function threads' CPU seconds from the marks to the first CreateFleet, less the requests' own."""
    if not fleet_cpu or wall_mark >= fleet:
        return float("nan")
    return cpu_between(cpu_mark, fleet_cpu[0]) - REQUEST_CPU.between(wall_mark, fleet)


def measure(pods: int, clients: Any, cluster_info: Any) -> Figure:
    """One scenario on a fresh emulator and a fresh cluster partition of the state table."""
    from fleetwright.aws.provider import AwsProvider
    from fleetwright.kube import ClusterConfig, KubeClient, KubeCluster
    from fleetwright.local.apiserver import ApiServer
    from fleetwright.provisioning import Provisioner
    from fleetwright.state import StateStore

    fleet_calls: list[float] = []
    fleet_cpu: list[dict[int, float]] = []

    def record(**_: Any) -> None:
        fleet_calls.append(time.perf_counter())
        fleet_cpu.append(function_cpu())

    clients.ec2.meta.events.register("before-call.ec2.CreateFleet", record)
    try:
        # No kubelet stand-in: nothing binds pods here, and the emulator's pod-lifecycle controller
        # rescans every pod on each write (1,000 creations take ~25 s with it).
        with ApiServer(port=0, pod_lifecycle=False) as server:
            client = KubeClient(ClusterConfig(server=server.url))
            state = StateStore(TABLE, f"{CLUSTER}-{pods}", client=clients.client("dynamodb"))
            cloud = AwsProvider(cluster_info, REGION, clients=clients, unavailable=state.unavailable)
            cloud.instance_types(None)  # warm caches, as a warm Lambda has them
            config = _config()
            provisioner = Provisioner(KubeCluster(client), cloud, state, config)
            worker, runs = _start_watching(provisioner)
            started = time.perf_counter()
            cpu_started = function_cpu()
            first, last = _create_pods(server, f"p{pods}", pods)
            create_seconds = last - started
            # The batch window closes batch_idle after the last pod: what the threads spend from then on
            # is the pass.
            time.sleep(max(0.0, last + 0.95 * config.batch_idle_seconds - time.perf_counter()))
            window_ended = time.perf_counter()
            cpu_window_ended = function_cpu()
            while not fleet_calls and worker.is_alive():
                time.sleep(0.01)
            fleet = fleet_calls[0] if fleet_calls else float("nan")
            _await_launches(worker, fleet_calls)
            provisioner_stop(provisioner)
            worker.join(60)
            report = runs[0] if runs else None
            passes = [p for p in report.passes if p.launched] if report else []
            return Figure(
                pods=pods,
                create_seconds=create_seconds,
                first_to_fleet=fleet - first,
                last_to_fleet=fleet - last,
                scheduling_seconds=sum(p.scheduling_seconds for p in passes),
                claims=sum(len(p.launched) for p in passes),
                create_fleet_calls=len(fleet_calls),
                cpu_to_fleet=_cpu_until_fleet(cpu_started, started, fleet_cpu, fleet),
                batch_idle=config.batch_idle_seconds,
                pass_cpu=_cpu_until_fleet(cpu_window_ended, window_ended, fleet_cpu, fleet),
            )
    finally:
        clients.ec2.meta.events.unregister("before-call.ec2.CreateFleet", record)


def provisioner_stop(provisioner: Any) -> None:
    """End a running provisioner's loop early by moving its deadline (its clock) forward."""
    offset = 3600.0
    provisioner.clock = lambda: time.monotonic() + offset


def import_seconds(statement: str, repeat: int = 5) -> float:
    """Median cumulative import time (``python -X importtime``) of the handler module, in seconds."""
    samples = []
    for _ in range(repeat):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", statement],
            cwd=ROOT / "functions" / "provisioner",
            capture_output=True,
            text=True,
            check=True,
        )
        total = 0
        for line in result.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
            if match and not line.split("|")[2].startswith("  "):
                total += int(match.group(1))  # top-level imports only (cumulative)
        samples.append(total / 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[1, 5, 100, 1000])
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument(
        "--memory",
        type=int,
        nargs="*",
        default=[],
        help="Lambda memory (MB) to model first pod→CreateFleet at",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if not args.skip_import:
        handler = import_seconds("import handler")
        first = import_seconds(
            "import handler; import fleetwright.provisioning, fleetwright.aws.provider, fleetwright.kube, "
            "fleetwright.state, boto3, aws_lambda_powertools.utilities.idempotency"
        )
        print(f"cold start: handler module import {handler:.3f} s (target <= 1.0 s)")
        print(
            f"            + what the first invocation imports (boto3, idempotency, adapters): {first:.3f} s"
        )
    os.environ.update(_CREDENTIALS)
    from moto import mock_aws

    from fleetwright.aws import instancetypes
    from fleetwright.aws.clients import AwsClients

    logging_quiet()
    with mock_aws():
        import boto3

        session = boto3.session.Session()
        # Every client inherits these: the CPU spent inside requests is moto's, not the function's.
        session.events.register("before-sign", REQUEST_CPU.start)
        session.events.register("needs-retry", REQUEST_CPU.end)
        clients = AwsClients(REGION, session=session)
        cluster_info = _seed_aws(clients)
        started = time.perf_counter()
        instancetypes.describe_instance_types(clients)
        instancetypes.describe_zone_offerings(clients)
        print(f"(moto instance-type listing, once: {time.perf_counter() - started:.1f} s)")
        print(
            "pods  create(s)  first pod→CreateFleet(s)  last pod→CreateFleet(s)  scheduling(s)"
            "  claims  fleets  cpu(s)  pass cpu(s)" + "".join(f"  at {mb} MB(s)" for mb in args.memory)
        )
        for count in args.pods:
            f = measure(count, clients, cluster_info)
            print(
                f"{f.pods:>4}  {f.create_seconds:>9.2f}  {f.first_to_fleet:>24.2f}  {f.last_to_fleet:>23.2f}"
                f"  {f.scheduling_seconds:>13.3f}  {f.claims:>6}  {f.create_fleet_calls:>6}"
                f"  {f.cpu_to_fleet:>6.2f}  {f.pass_cpu:>11.2f}"
                + "".join(f"  {f.modelled(mb):>{len(f'at {mb} MB(s)')}.2f}" for mb in args.memory)
            )


def logging_quiet() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)


if __name__ == "__main__":
    main()
