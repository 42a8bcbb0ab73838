"""Provisioning latency: seconds from pod creation in the Kubernetes API emulator to the CreateFleet call,
and the provisioner handler's cold-start import time.

Everything runs in-process against moto (EC2, SSM, DynamoDB) and the emulator, with the production batching
window (idle 1 s, max 10 s), so the figures are dominated by that window; what is left is the provisioner's
own work (LISTs, scheduling, DynamoDB writes, launch preparation). Pods are created over HTTP, as the
kube-scheduler would mark them: one POST, then a status PATCH marking them Unschedulable.

    .venv/bin/python bench/latency.py [--pods 1 5 100 1000] [--skip-import]
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


def _seed_aws(clients: Any) -> Any:
    """A VPC with tagged subnets and security group, EKS AMIs, the state table; returns the ClusterInfo."""
    from fleetwright.aws.cluster import ClusterInfo
    from fleetwright.local.aws_fakes import seed_eks_amis
    from fleetwright.state.table import create_state_table

    ec2 = clients.ec2
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    tags = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    for cidr, zone in (("10.0.0.0/18", "us-east-1a"), ("10.0.64.0/18", "us-east-1b")):
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=cidr,
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
        )
    ec2.create_security_group(
        GroupName="nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )
    version = "1.31"
    seed_eks_amis(ec2, version)
    create_state_table(clients.client("dynamodb"), TABLE)
    return ClusterInfo(
        name=CLUSTER,
        endpoint="https://EXAMPLE.gr7.us-east-1.eks.amazonaws.com",
        ca_bundle=base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n").decode(),
        version=version,
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


def measure(pods: int, clients: Any, cluster_info: Any) -> Figure:
    """One scenario on a fresh emulator and a fresh cluster partition of the state table."""
    from fleetwright.aws.provider import AwsProvider
    from fleetwright.kube import ClusterConfig, KubeClient, KubeCluster
    from fleetwright.local.apiserver import ApiServer
    from fleetwright.provisioning import Provisioner
    from fleetwright.state import StateStore

    fleet_calls: list[float] = []

    def record(**_: Any) -> None:
        fleet_calls.append(time.perf_counter())

    clients.ec2.meta.events.register("before-call.ec2.CreateFleet", record)
    try:
        # No kubelet stand-in: nothing binds pods here, and the emulator's pod-lifecycle controller
        # rescans every pod on each write (1,000 creations take ~25 s with it).
        with ApiServer(port=0, pod_lifecycle=False) as server:
            client = KubeClient(ClusterConfig(server=server.url))
            state = StateStore(TABLE, f"{CLUSTER}-{pods}", client=clients.client("dynamodb"))
            cloud = AwsProvider(cluster_info, REGION, clients=clients, unavailable=state.unavailable)
            cloud.instance_types(None)  # warm caches, as a warm Lambda has them
            provisioner = Provisioner(KubeCluster(client), cloud, state, _config())
            runs: list[Any] = []
            worker = threading.Thread(
                target=lambda: runs.append(provisioner.run_until(time.monotonic() + 40))
            )
            worker.start()
            time.sleep(1.5)  # the provisioner has reconciled and is watching
            started = time.perf_counter()
            first, last = _create_pods(server, f"p{pods}", pods)
            create_seconds = last - started
            while not fleet_calls and worker.is_alive():
                time.sleep(0.01)
            fleet = fleet_calls[0] if fleet_calls else float("nan")
            # Let the pass finish its launches (no new CreateFleet for 3 s), then end the run.
            give_up = time.perf_counter() + 60
            while worker.is_alive() and time.perf_counter() < give_up:
                if fleet_calls and time.perf_counter() - fleet_calls[-1] > 3:
                    break
                time.sleep(0.1)
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
        clients = AwsClients(REGION)
        cluster_info = _seed_aws(clients)
        started = time.perf_counter()
        instancetypes.describe_instance_types(clients)
        instancetypes.describe_zone_offerings(clients)
        print(f"(moto instance-type listing, once: {time.perf_counter() - started:.1f} s)")
        print(
            "pods  create(s)  first pod→CreateFleet(s)  last pod→CreateFleet(s)  scheduling(s)"
            "  claims  fleets"
        )
        for count in args.pods:
            f = measure(count, clients, cluster_info)
            print(
                f"{f.pods:>4}  {f.create_seconds:>9.2f}  {f.first_to_fleet:>24.2f}  {f.last_to_fleet:>23.2f}"
                f"  {f.scheduling_seconds:>13.3f}  {f.claims:>6}  {f.create_fleet_calls:>6}"
            )


def logging_quiet() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)


if __name__ == "__main__":
    main()
