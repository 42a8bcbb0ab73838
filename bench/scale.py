"""Fleetwright on a large cluster: the provisioner's and the disruption function's Lambda handlers
(``functions/*/handler.py``) against the Kubernetes API emulator holding N nodes with ~10 pods each and
moto holding their instances: all in this process (in-process ``mock_aws``), or with ``--split`` each
function in a process of its own.

The cluster is what Fleetwright would have left: an instance per node tagged with its NodePool and
NodeClaim, a NodeClaim record in the state table and a NodeClaim object, a Ready Node with its instance
type's labels and allocatable; on each node one pod of each of three DaemonSets and about seven pods of
Deployments (ReplicaSet owners, CPU and memory requests, PodDisruptionBudgets); four NodePools with
``limits``; plus ``--pending`` pods marked Unschedulable. Everything is seeded in bulk, outside what is
timed: the emulator through ``Store.seed``, moto through ``run_instances`` in batches.

Each function gets a cold invocation (the handler module freshly loaded: clients, catalogs and
configuration built) and then ``--runs - 1`` warm ones in the same process, as Lambda reuses a warm
container. The provisioner runs in economy mode (one pass per invocation); before each warm provisioner
invocation ``--pending`` new pods become Unschedulable, so every provisioner pass schedules and launches.
Per pass it prints:

- wall seconds, split into phases by where the handler's thread spent them: *read* (Kubernetes GETs and
  LISTs, AWS Describe/Get/List/Query calls), *write* (other Kubernetes requests, DynamoDB and tag
  writes), *launch* (CreateFleet, launch templates, RunInstances, TerminateInstances, StartExecution,
  and the wall time during which the launch worker threads were in any call) and *plan* (the rest:
  scheduling, planning, bookkeeping);
- the stand-ins' own time within that: ``moto`` (time inside moto's request handling, summed over
  threads) and ``emu cpu`` (CPU time of the emulator's request threads);
- Kubernetes requests and bytes (counted by the emulator), AWS calls, and the process's peak RSS
  (``ru_maxrss``, which includes the emulator and moto; ``--tracemalloc`` adds the pass's own peak of
  Python allocations above what the process held when the pass started, i.e. the function's memory
  without the emulator's and moto's copy of the cluster, though with moto's transient allocations; it
  slows the pass down, so time and memory are measured in separate runs); ``--profile DIR`` writes a
  cProfile dump of each pass.

``--split`` measures the functions' own memory: one process seeds the emulator and moto and serves them
(the emulator over HTTP as always, moto through its HTTP server, ``ThreadedMotoServer``, on the same
backends), and each function runs in a fresh interpreter of its own (a new Lambda execution
environment) that reaches them by endpoint URL (``AWS_ENDPOINT_URL``, a kubeconfig) and holds nothing
but the handler, what it builds (its cluster cache, clients, catalog) and the bench's counters. Per pass
it prints that process's peak RSS during the pass (VmHWM, reset when the pass starts through
``/proc/self/clear_refs``; "peak so far" where the kernel refuses the reset) and its RSS after the pass.
The function process also fetches its instance-type catalog itself (in-process, the seeding's copy is
reused), and moto's time is that of its request handling in the stand-in process.

Three stand-in fixes keep moto usable at this size and do not change what it answers: instance tags are
looked up by resource id instead of by scanning every tag, the AMI each new instance names is looked up
once instead of filtering every image per instance, and a subnet's private addresses are handed out under
a lock (``fleetwright.local.aws_fakes.thread_safe_moto``), since concurrent CreateFleet calls otherwise
fail in moto's shared address generator. With ``--split`` moto's server answers the Pricing API, which
moto lacks, with 404 as in-process moto does.

    .venv/bin/python bench/scale.py [--nodes 1000 3000] [--pending 100 2000] [--runs 3] [--split]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import resource
import sys
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from seeding import K8S_VERSION, seed_network  # noqa: E402  (bench/seeding.py)

REGION = "us-east-1"
CLUSTER = "scale"
TABLE = "fleetwright-state"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}

# name, instance types, capacity type, consolidation policy, share of the nodes
POOLS = (
    ("general", ["m5.xlarge", "m5.2xlarge"], "on-demand", "WhenEmptyOrUnderutilized", 0.4),
    ("compute", ["c5.xlarge", "c5.2xlarge"], "on-demand", "WhenEmptyOrUnderutilized", 0.25),
    ("memory", ["r5.xlarge", "r5.2xlarge"], "on-demand", "WhenEmpty", 0.2),
    ("batch", ["m5.4xlarge", "m5.8xlarge"], "spot", "WhenEmptyOrUnderutilized", 0.15),
    ("burst", ["m5.12xlarge", "m5.16xlarge", "m5.24xlarge"], "spot", "WhenEmpty", 0.0),
)
# The pending pods select the burst pool, which has no node yet.
PENDING_POOL, PENDING_CPU, PENDING_MEMORY = "burst", 3, "6Gi"
DAEMONSETS = (("kube-proxy", "100m", "64Mi"), ("aws-node", "50m", "128Mi"), ("node-exporter", "50m", "64Mi"))
APPS = 100  # Deployments, each with a PDB
APP_PODS_PER_NODE = 7


_CORES = {
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "12xlarge": 48,
    "16xlarge": 64,
    "24xlarge": 96,
}


def nodepool_documents(nodes: int, pending: int) -> str:
    """The NodePools (limits: room for their share of ``nodes`` and the pending pods) and the
    EC2NodeClass."""
    docs = []
    for name, types, capacity, policy, share in POOLS:
        biggest = max(_CORES[t.split(".")[1]] for t in types)
        cpu_limit = int(nodes * share * biggest * 1.2) + 100
        if name == PENDING_POOL:
            cpu_limit += int(pending * PENDING_CPU * 1.5)
        docs.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name},
                "spec": {
                    "limits": {"cpu": str(cpu_limit), "memory": f"{cpu_limit * 8}Gi"},
                    "disruption": {"consolidationPolicy": policy, "consolidateAfter": "5m"},
                    "template": {
                        "metadata": {"labels": {"pool": name}},
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "default",
                            },
                            "expireAfter": "720h",
                            "requirements": [
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "In",
                                    "values": types,
                                },
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                            ],
                        },
                    },
                },
            }
        )
    docs.append(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "instanceProfile": "scale-node-profile",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            },
        }
    )
    return "\n---\n".join(json.dumps(d) for d in docs)


# -- stand-in timing and fixes ------------------------------------------------------------------------


@dataclass
class Timings:
    """Seconds by phase of the calls made from the thread that runs the handler (outermost calls only),
    and every thread's AWS calls and moto time."""

    phases: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    other_threads: list[tuple[float, float]] = field(default_factory=list)
    aws_calls: int = 0
    moto_seconds: float = 0.0
    moto_by_operation: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def launch_seconds(self) -> float:
        """Wall seconds during which a thread other than the handler's (the launch workers) was in a
        Kubernetes or AWS call."""
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.other_threads):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total

    def reset(self) -> None:
        with self.lock:
            self.phases = defaultdict(float)
            self.other_threads = []
            self.aws_calls = 0
            self.moto_seconds = 0.0
            self.moto_by_operation = defaultdict(float)


TIMINGS = Timings()
PROFILE: dict[str, Path] = {}  # --profile: "dir" → where each pass's cProfile dump goes
_LOCAL = threading.local()
_HANDLER_THREAD: dict[str, int] = {}

_LAUNCH_OPERATIONS = {
    "CreateFleet",
    "CreateLaunchTemplate",
    "CreateLaunchTemplateVersion",
    "DeleteLaunchTemplate",
    "RunInstances",
    "TerminateInstances",
    "StartExecution",
}


def _aws_phase(operation: str) -> str:
    if operation in _LAUNCH_OPERATIONS:
        return "launch"
    if operation.startswith(("Describe", "Get", "List", "Query", "Scan", "BatchGet")):
        return "read"
    return "write"


@contextmanager
def _timed(phase: str) -> Iterator[None]:
    """Add the call's duration to ``phase`` when it is the outermost timed call of the handler thread."""
    depth = getattr(_LOCAL, "depth", 0)
    _LOCAL.depth = depth + 1
    started = time.perf_counter()
    try:
        yield
    finally:
        _LOCAL.depth = depth
        if depth == 0:
            with TIMINGS.lock:
                if threading.get_ident() == _HANDLER_THREAD.get("id"):
                    TIMINGS.phases[phase] += time.perf_counter() - started
                else:
                    TIMINGS.other_threads.append((started, time.perf_counter()))


def instrument(in_process_moto: bool = True) -> None:
    """Time Kubernetes requests (``KubeClient.request``), AWS calls (botocore) and, with
    ``in_process_moto``, moto's share (a function process of ``--split`` has no moto: the stand-in process
    times it, :func:`time_moto_server`)."""
    import botocore.client

    from fleetwright.kube.client import KubeClient

    request = KubeClient.request

    def timed_request(self: Any, method: str, path: str, **kwargs: Any) -> Any:
        with _timed("read" if method == "GET" else "write"):
            return request(self, method, path, **kwargs)

    KubeClient.request = timed_request  # type: ignore[method-assign]

    make_api_call = botocore.client.BaseClient._make_api_call

    def timed_call(self: Any, operation: str, params: Any) -> Any:
        with TIMINGS.lock:
            TIMINGS.aws_calls += 1
        with _timed(_aws_phase(operation)):
            return make_api_call(self, operation, params)

    botocore.client.BaseClient._make_api_call = timed_call
    if not in_process_moto:
        return
    from moto.core.botocore_stubber import BotocoreStubber

    stub = BotocoreStubber.__call__

    def timed_stub(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return stub(self, event_name, request, **kwargs)
        finally:
            spent = time.perf_counter() - started
            with TIMINGS.lock:
                TIMINGS.moto_seconds += spent
                TIMINGS.moto_by_operation[event_name.rsplit(".", 1)[-1]] += spent

    BotocoreStubber.__call__ = timed_stub  # type: ignore[method-assign]


def time_moto_server() -> None:
    """Time moto's answers in the stand-in process of ``--split`` (summed over its request threads)."""
    from moto.core.responses import BaseResponse

    call_action = BaseResponse.call_action

    def timed_action(self: Any) -> Any:
        started = time.perf_counter()
        try:
            return call_action(self)
        finally:
            spent = time.perf_counter() - started
            try:
                operation = str(self._get_action())
            except Exception:  # a name for the figure only
                operation = "?"
            with TIMINGS.lock:
                TIMINGS.moto_seconds += spent
                TIMINGS.moto_by_operation[operation] += spent

    BaseResponse.call_action = timed_action  # type: ignore[method-assign]


def answer_unknown_services() -> None:
    """moto's server answers a service it lacks (the Pricing API) with 404, as in-process moto does, instead
    of 500s that botocore retries for seconds."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from werkzeug.wrappers import Response

    backend_for_host = DomainDispatcherApplication.get_backend_for_host

    def known_backend(self: Any, host: str | None) -> Any:
        if host and host.startswith(("pricing.", "api.pricing.")):
            return None  # without moto's "Unable to find appropriate backend" line per request
        return backend_for_host(self, host)

    def answer(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        try:
            app = self.get_application(environ)
        except AttributeError:  # no backend: moto names it None
            app = Response("no such service", status=404)
        return app(environ, start_response)

    DomainDispatcherApplication.get_backend_for_host = known_backend  # type: ignore[method-assign]
    DomainDispatcherApplication.__call__ = answer  # type: ignore[method-assign]


def speed_up_moto() -> None:
    """Index moto's tag lookup by resource id and remember each AMI lookup by image id (same answers);
    serialize its subnet address pool, which concurrent CreateFleet calls otherwise break."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        if not resource_id:
            return []
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [
            {"resource_id": resource_id, "key": k, "value": v, "resource_type": kind}
            for k, v in self.ec2_backend.tags.get(resource_id, {}).items()
        ]

    TaggedEC2Resource.get_tags = get_tags  # type: ignore[method-assign]

    describe_images = EC2Backend.describe_images
    cache: dict[tuple[int, str], Any] = {}

    def cached_images(self: Any, *args: Any, **kwargs: Any) -> Any:
        filters = kwargs.get("filters")
        if not args and set(kwargs) == {"filters"} and filters and set(filters) == {"image-id"}:
            key = (id(self), str(filters["image-id"]))
            if key not in cache:
                cache[key] = describe_images(self, filters=filters)
            return cache[key]
        return describe_images(self, *args, **kwargs)

    EC2Backend.describe_images = cached_images  # type: ignore[method-assign]
    from fleetwright.local.aws_fakes import thread_safe_moto

    thread_safe_moto()


# -- seeding ------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    nodes: int
    pods: int
    pending: int
    seconds: float


def seed_aws(clients: Any) -> tuple[Any, str]:
    """VPC, subnets and security group tagged for discovery, EKS AMIs, the state table, the EKS cluster
    and a pass-through termination state machine; returns (ClusterInfo, state machine ARN)."""
    from fleetwright.aws.cluster import describe_cluster

    subnets = seed_network(clients, CLUSTER, ZONES, TABLE)
    clients.eks.create_cluster(
        name=CLUSTER,
        version=K8S_VERSION,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": subnets},
    )
    machine_arn = clients.client("stepfunctions").create_state_machine(
        name="fleetwright-termination",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/fleetwright-termination",
    )["stateMachineArn"]
    return describe_cluster(clients, CLUSTER), machine_arn


def _dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, list):
        return [_dynamo(v) for v in value]
    if isinstance(value, dict):
        return {k: _dynamo(v) for k, v in value.items()}
    return value


def seed_cluster(server: Any, clients: Any, info: Any, nodes: int, pending: int) -> Cluster:
    """Instances, NodeClaim records and objects, Nodes, DaemonSets, Deployments' ReplicaSets, PDBs, pods."""
    from fleetwright.aws.provider import AwsProvider
    from fleetwright.local.apiserver.karpenter import install_karpenter_crds
    from fleetwright.local.apiserver.resources import NODES, PODS
    from fleetwright.model.karpenter import EC2NodeClass, NodePool

    started = time.perf_counter()
    store = server.store
    install_karpenter_crds(store)
    documents = [json.loads(d) for d in nodepool_documents(nodes, pending).split("\n---\n")]
    pools = {d["metadata"]["name"]: NodePool.model_validate(d) for d in documents if d["kind"] == "NodePool"}
    nodeclass = EC2NodeClass.model_validate(documents[-1])
    catalog = {t.name: t for t in AwsProvider(info, REGION, clients=clients).instance_types(nodeclass)}
    image = sorted(i["ImageId"] for i in clients.ec2.describe_images(Owners=["self"])["Images"])[0]
    plan = _placement(nodes)
    instance_ids = _launch_instances(clients, plan, image)
    seeded = _SeededNodes(pools, nodeclass, catalog, image)
    for index, where in enumerate(plan):
        seeded.add(index, where, instance_ids[index])
    _write_records(clients.client("dynamodb"), seeded.records)
    store.seed(NODES, seeded.node_objects)
    store.seed(store.registry.lookup("karpenter.sh", "v1", "nodeclaims"), seeded.claim_objects)
    owners = _seed_workloads(store)
    pods = _node_pods(seeded.node_names, plan, catalog, owners)
    store.seed(PODS, pods)
    store.seed(PODS, pending_pods(pending, "initial"))
    return Cluster(nodes, len(pods), pending, time.perf_counter() - started)


_Where = tuple[str, str, str, str]  # pool, instance type, zone, capacity type


def _placement(nodes: int) -> list[_Where]:
    """Which node goes where: pools by share, types and zones round-robin."""
    plan: list[_Where] = []
    counts = {name: round(nodes * share) for name, _t, _c, _p, share in POOLS}
    counts[POOLS[0][0]] += nodes - sum(counts.values())
    for name, types, capacity, _policy, _share in POOLS:
        plan += [(name, types[i % len(types)], ZONES[i % len(ZONES)], capacity) for i in range(counts[name])]
    return plan


def _launch_instances(clients: Any, plan: list[_Where], image: str) -> dict[int, str]:
    """An instance per planned node, tagged with its NodePool, launched in batches; node index → id."""
    from fleetwright.aws.tags import ownership_tags, to_aws

    subnets = {
        s["AvailabilityZone"]: s["SubnetId"]
        for s in clients.ec2.describe_subnets(
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [CLUSTER]}]
        )["Subnets"]
    }
    groups: dict[_Where, list[int]] = defaultdict(list)
    for index, where in enumerate(plan):
        groups[where].append(index)
    instance_ids: dict[int, str] = {}
    for (pool, itype, zone, capacity), indexes in groups.items():
        market: dict[str, Any] = (
            {"InstanceMarketOptions": {"MarketType": "spot"}} if capacity == "spot" else {}
        )
        for start in range(0, len(indexes), 250):
            batch = indexes[start : start + 250]
            launched = clients.ec2.run_instances(
                ImageId=image,
                InstanceType=itype,
                MinCount=len(batch),
                MaxCount=len(batch),
                SubnetId=subnets[zone],
                TagSpecifications=[
                    {"ResourceType": "instance", "Tags": to_aws(ownership_tags(CLUSTER, nodepool=pool))}
                ],
                **market,
            )["Instances"]
            for index, instance in zip(batch, launched, strict=True):
                instance_ids[index] = instance["InstanceId"]
    return instance_ids


class _SeededNodes:
    """What Fleetwright would have recorded for each launched node: its NodeClaim record and object, and
    the Ready Node its kubelet registered."""

    def __init__(self, pools: dict[str, Any], nodeclass: Any, catalog: dict[str, Any], image: str) -> None:
        from moto.ec2.models import ec2_backends

        from fleetwright.model.hashes import nodeclass_hash, nodepool_hash

        self.pools = pools
        self.catalog = catalog
        self.image = image
        self.backend = ec2_backends["123456789012"][REGION]
        self.hashes = {name: nodepool_hash(p) for name, p in pools.items()}
        self.class_hash = nodeclass_hash(nodeclass)
        self.now = time.time() - 3600
        self.records: list[Any] = []
        self.node_objects: list[dict[str, Any]] = []
        self.claim_objects: list[dict[str, Any]] = []
        self.node_names: list[str] = []

    def add(self, index: int, where: _Where, instance_id: str) -> None:
        from fleetwright.aws.tags import NODECLAIM_TAG
        from fleetwright.claims.nodeclaim_objects import labels_of, spec_of, status_of
        from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

        pool, itype, zone, capacity = where
        claim = f"{pool}-{index:06x}"
        self.backend.create_tags([instance_id], {NODECLAIM_TAG: claim, "Name": claim})
        known = self.catalog[itype]
        name = f"ip-10-{index // 65536}-{(index // 256) % 256}-{index % 256}.ec2.internal"
        self.node_names.append(name)
        now = self.now
        record = NodeClaimRecord(
            id=claim,
            nodepool=pool,
            status=str(ClaimStatus.INITIALIZED),
            created_at=now,
            node_class="default",
            instance_id=instance_id,
            instance_type=itype,
            zone=zone,
            capacity_type=capacity,
            price=next(o.price for o in known.offerings if o.zone == zone and o.capacity_type == capacity),
            launched_at=now,
            registered_at=now,
            initialized_at=now,
            node_name=name,
            nodepool_hash=self.hashes[pool],
            nodeclass_hash=self.class_hash,
        )
        self.records.append(record)
        self.claim_objects.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {
                    "name": claim,
                    "labels": labels_of(record),
                    "finalizers": ["karpenter.sh/termination"],
                },
                "spec": spec_of(record),
                "status": status_of(record, self.image),
            }
        )
        self.node_objects.append(self._node_object(name, where, instance_id))

    def _node_object(self, name: str, where: _Where, instance_id: str) -> dict[str, Any]:
        from fleetwright.model import labels as wk
        from fleetwright.model.allocatable import instance_type_allocatable

        pool, itype, zone, capacity = where
        known = self.catalog[itype]
        allocatable = instance_type_allocatable(known, None)
        quantities = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in allocatable.items()}
        labels = {
            **known.labels,
            **self.pools[pool].labels(),
            wk.NODEPOOL: pool,
            wk.INSTANCE_TYPE: itype,
            wk.ZONE: zone,
            wk.CAPACITY_TYPE: capacity,
            wk.HOSTNAME: name,
            "pool": pool,
        }
        return {
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": quantities,
                "capacity": quantities,
                "nodeInfo": {"kubeletVersion": "v1.31.2-eks-7f9249a"},
            },
        }


def _write_records(dynamo: Any, records: list[Any]) -> None:
    """The NodeClaim records into the state table, 25 to a batch write."""
    from boto3.dynamodb.types import TypeSerializer  # type: ignore[import-untyped]

    serializer = TypeSerializer()
    pk = f"NODECLAIM#{CLUSTER}"
    for start in range(0, len(records), 25):
        items = [
            {"PutRequest": {"Item": {k: serializer.serialize(_dynamo(v)) for k, v in r.to_item(pk).items()}}}
            for r in records[start : start + 25]
        ]
        dynamo.batch_write_item(RequestItems={TABLE: items})
    # The claim revision a table whose claims were written by Fleetwright has (docs/state.md).
    dynamo.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": f"REVISION#{CLUSTER}"},
            "sk": {"S": "nodeclaims"},
            "revision": {"N": str(len(records))},
        },
    )


@dataclass
class _Owners:
    daemonsets: dict[str, str]  # DaemonSet name → uid
    apps: list[tuple[str, str]]  # (app, namespace) per Deployment
    replica_sets: dict[tuple[str, str], str]  # (namespace, app) → its ReplicaSet's uid


def _seed_workloads(store: Any) -> _Owners:
    """Three DaemonSets in kube-system, APPS Deployments (one ReplicaSet and a PDB each) in ten
    namespaces; the pods' owners."""
    from fleetwright.local.apiserver.resources import (
        DAEMON_SETS,
        NAMESPACES,
        POD_DISRUPTION_BUDGETS,
        REPLICA_SETS,
    )

    for team in range(10):
        store.create(NAMESPACES, {"metadata": {"name": f"team-{team}"}})
    store.seed(DAEMON_SETS, _daemonset_objects())
    ds_uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in store.list(DAEMON_SETS, "kube-system")[0]}
    apps = [(f"app-{a:03d}", f"team-{a % 10}") for a in range(APPS)]
    store.seed(REPLICA_SETS, _replica_set_objects(apps))
    rs_uids = {
        (o["metadata"]["namespace"], o["metadata"]["labels"]["app"]): o["metadata"]["uid"]
        for o in store.list(REPLICA_SETS)[0]
    }
    store.seed(POD_DISRUPTION_BUDGETS, _pdb_objects(apps))
    return _Owners(ds_uids, apps, rs_uids)


def _daemonset_objects() -> list[dict[str, Any]]:
    """The DaemonSets every node runs a pod of."""
    return [
        {
            "metadata": {"name": ds, "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": ds}},
                "template": {
                    "metadata": {"labels": {"k8s-app": ds}},
                    "spec": {"containers": [{"name": ds, "image": ds, "resources": _requests(cpu, mem)}]},
                },
            },
        }
        for ds, cpu, mem in DAEMONSETS
    ]


def _replica_set_objects(apps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A ReplicaSet (scaled to 0: its pods are seeded directly) per Deployment."""
    return [
        {
            "metadata": {"name": f"{app}-7d4b9", "namespace": ns, "labels": {"app": app}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "app"}]},
                },
            },
        }
        for app, ns in apps
    ]


def _pdb_objects(apps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A PodDisruptionBudget per Deployment allowing one disruption."""
    return [
        {
            "metadata": {"name": app, "namespace": ns},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}},
            "status": {
                "disruptionsAllowed": 1,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            },
        }
        for app, ns in apps
    ]


def _node_pods(
    node_names: list[str], plan: list[_Where], catalog: dict[str, Any], owners: _Owners
) -> list[dict[str, Any]]:
    """On each node one pod per DaemonSet and APP_PODS_PER_NODE Deployment pods, spread by round robin."""
    from fleetwright.model.allocatable import instance_type_allocatable

    pods: list[dict[str, Any]] = []
    for index, name in enumerate(node_names):
        for ds, cpu, mem in DAEMONSETS:
            pods.append(
                _pod(
                    f"{ds}-{index:06x}",
                    "kube-system",
                    {"k8s-app": ds},
                    cpu,
                    mem,
                    name,
                    ("DaemonSet", ds, owners.daemonsets[ds]),
                )
            )
        millicores = int(instance_type_allocatable(catalog[plan[index][1]], None)["cpu"])
        for slot in range(APP_PODS_PER_NODE):
            app, ns = owners.apps[(index * APP_PODS_PER_NODE + slot) % APPS]
            app_cpu = f"{millicores * 7 // (10 * APP_PODS_PER_NODE)}m"  # ~70% of the node's CPU
            pods.append(
                _pod(
                    f"{app}-{index:06x}-{slot}",
                    ns,
                    {"app": app},
                    app_cpu,
                    "512Mi",
                    name,
                    ("ReplicaSet", f"{app}-7d4b9", owners.replica_sets[(ns, app)]),
                )
            )
    return pods


def _requests(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}}


def _pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    cpu: str,
    memory: str,
    node: str | None,
    owner: tuple[str, str, str],
) -> dict[str, Any]:
    kind, owner_name, uid = owner
    status: dict[str, Any] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    if node is None:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu.",
                }
            ],
        }
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "public.ecr.aws/nginx/nginx:1.27", "resources": _requests(cpu, memory)}
        ]
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": uid, "controller": True}
            ],
        },
        "spec": spec,
        "status": status,
    }


def pending_pods(count: int, batch: str) -> list[dict[str, Any]]:
    """``count`` Unschedulable pods of one Deployment in ``team-0``, for the batch pool."""
    pods = [
        _pod(
            f"pending-{batch}-{i:05d}",
            "team-0",
            {"app": f"pending-{batch}"},
            str(PENDING_CPU),
            PENDING_MEMORY,
            None,
            ("ReplicaSet", f"pending-{batch}-5c6f8", "00000000-0000-0000-0000-00000000beef"),
        )
        for i in range(count)
    ]
    for pod in pods:
        pod["spec"]["nodeSelector"] = {"pool": PENDING_POOL}
    return pods


# -- passes -------------------------------------------------------------------------------------------


class FakeContext:
    """The Lambda context the handlers read."""

    memory_limit_in_mb = 1024
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def __init__(self, function: str, seconds: float, request: int) -> None:
        self.function_name = function
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function}"
        self.aws_request_id = f"00000000-0000-0000-0000-{request:012d}"
        self.seconds = seconds
        self.started = time.monotonic()

    def get_remaining_time_in_millis(self) -> int:
        return int(max(0.0, self.seconds - (time.monotonic() - self.started)) * 1000)


def load_handler(function: str) -> ModuleType:
    """A fresh copy of ``functions/<function>/handler.py`` (a cold Lambda container)."""
    path = ROOT / "functions" / function / "handler.py"
    spec = importlib.util.spec_from_file_location(f"{function}_handler_scale", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class PassFigure:
    function: str
    kind: str
    wall: float
    phases: dict[str, float]
    moto: float
    emulator_cpu: float
    kube_requests: int
    kube_bytes_out: int
    kube_bytes_in: int
    aws_calls: int
    rss_mb: float
    traced_mb: float | None
    summary: str
    moto_top: str = ""
    kube_verbs: str = ""
    # --split: the function process's resident memory after the pass, and whether ``rss_mb`` is the
    # pass's own peak (the peak was reset when it started) or the process's peak so far.
    steady_mb: float | None = None
    pass_peak: bool = False


class StandIns:
    """What a pass asks of the emulator and moto: their counters, and new pending pods."""

    def reset(self) -> None:
        """Start counting moto's time anew."""
        TIMINGS.reset()

    def traffic(self) -> Any:
        """The emulator's request counters (a ``Traffic``)."""
        raise NotImplementedError

    def moto(self) -> tuple[float, dict[str, float]]:
        """moto's seconds since :meth:`reset` (summed over threads), and by operation."""
        return TIMINGS.moto_seconds, dict(TIMINGS.moto_by_operation)

    def add_pending(self, count: int, batch: str) -> None:
        """``count`` new Unschedulable pods."""
        raise NotImplementedError


class InProcessStandIns(StandIns):
    """The emulator and moto in this process."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def traffic(self) -> Any:
        return self.server.traffic.snapshot()

    def add_pending(self, count: int, batch: str) -> None:
        from fleetwright.local.apiserver.resources import PODS

        self.server.store.seed(PODS, pending_pods(count, batch))


class _Counted(NamedTuple):
    """The emulator's counters as a ``Traffic`` snapshot has them (without importing the emulator into a
    function process)."""

    requests: int
    bytes_in: int
    bytes_out: int
    cpu_seconds: float
    by_verb: dict[str, int]


class RemoteStandIns(StandIns):
    """The emulator and moto in the stand-in process of ``--split``, asked over a pipe
    (:func:`_serve_requests` answers)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def _ask(self, *request: Any) -> Any:
        self.conn.send(request)
        return self.conn.recv()

    def reset(self) -> None:
        TIMINGS.reset()
        self._ask("reset")

    def traffic(self) -> Any:
        return _Counted(*self._ask("traffic"))

    def moto(self) -> tuple[float, dict[str, float]]:
        seconds, by_operation = self._ask("moto")
        return float(seconds), dict(by_operation)

    def add_pending(self, count: int, batch: str) -> None:
        self._ask("pending", count, batch)


def _status_mb() -> tuple[float, float]:
    """This process's resident memory now and its peak (VmRSS, VmHWM; MB)."""
    fields: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                fields[line[:5]] = int(line.split()[1]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def _reset_peak() -> bool:
    """Start the peak (VmHWM) anew from the current resident memory; False where Linux refuses."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


@contextmanager
def _profiled(name: str) -> Iterator[None]:
    """Run the body quietly (unless SCALE_DEBUG) and, with --profile, write its cProfile dump."""
    profiler = None
    if "dir" in PROFILE:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    quiet = contextlib.redirect_stdout(io.StringIO()) if not os.environ.get("SCALE_DEBUG") else None
    with quiet or contextlib.nullcontext():
        try:
            yield
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(PROFILE["dir"] / f"{name}.pstats"))


def _invoke(function: str, module: ModuleType, kind: str, request: int) -> tuple[dict[str, Any], float]:
    """The handler's answer to a scheduled event, and its wall seconds."""
    _HANDLER_THREAD["id"] = threading.get_ident()
    event = {
        "id": f"scale-{function}-{request}",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "detail": {},
    }
    started = time.perf_counter()
    with _profiled(f"{function}-{request}-{kind}"):
        result = module.handler(event, FakeContext(f"fleetwright-{function}", 900.0, request))
    return result, time.perf_counter() - started


def run_pass(
    function: str,
    module: ModuleType,
    standins: StandIns,
    kind: str,
    request: int,
    trace: bool,
    split: bool = False,
) -> PassFigure:
    standins.reset()
    before = standins.traffic()
    traced_before = 0
    if trace:
        tracemalloc.reset_peak()
        traced_before = tracemalloc.get_traced_memory()[0]
    pass_peak = split and _reset_peak()
    result, wall = _invoke(function, module, kind, request)
    steady_mb, peak_mb = _status_mb()
    after = standins.traffic()
    moto_seconds, moto_by_operation = standins.moto()
    phases = dict(TIMINGS.phases)
    # Launches run on worker threads while the handler's thread waits for them.
    phases["launch"] = phases.get("launch", 0.0) + TIMINGS.launch_seconds()
    phases["plan"] = max(0.0, wall - sum(phases.values()))
    # The pass's own peak: Python memory allocated during the pass above what was held when it started
    # (in-process: the emulator's and moto's cluster, the kept caches), so not the whole process as RSS
    # is; in-process, moto's transient allocations for the requests it answers are still in it.
    traced = (tracemalloc.get_traced_memory()[1] - traced_before) / 2**20 if trace else None
    return PassFigure(
        function=function,
        kind=kind,
        wall=wall,
        phases=phases,
        moto=moto_seconds,
        emulator_cpu=after.cpu_seconds - before.cpu_seconds,
        kube_requests=after.requests - before.requests,
        kube_bytes_out=after.bytes_out - before.bytes_out,
        kube_bytes_in=after.bytes_in - before.bytes_in,
        aws_calls=TIMINGS.aws_calls,
        rss_mb=peak_mb if split else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        traced_mb=traced,
        summary=_summary(function, result),
        kube_verbs=" ".join(
            f"{verb} {after.by_verb[verb] - before.by_verb.get(verb, 0)}"
            for verb in sorted(after.by_verb)
            if after.by_verb[verb] != before.by_verb.get(verb, 0)
        ),
        moto_top=", ".join(
            f"{op} {seconds:.1f}"
            for op, seconds in sorted(moto_by_operation.items(), key=lambda kv: -kv[1])[:3]
        ),
        steady_mb=steady_mb if split else None,
        pass_peak=pass_peak,
    )


def _summary(function: str, result: dict[str, Any]) -> str:
    if function == "provisioner":
        return (
            f"launched {len(result.get('launched') or [])}, errors {len(result.get('errors') or [])},"
            f" lease {result.get('leaseAcquired')}"
        )
    return (
        f"candidates {result.get('candidates')}, commands {len(result.get('commands') or [])},"
        f" problems {len(result.get('problems') or [])}{', error' if result.get('error') else ''}"
    )


def _memory_text(f: PassFigure) -> str:
    traced = f" pass peak {f.traced_mb:.0f} MB" if f.traced_mb is not None else ""
    if f.steady_mb is None:
        return f"rss {f.rss_mb:6.0f} MB{traced}"
    peak = "pass peak" if f.pass_peak else "peak so far"
    return f"function rss: {peak} {f.rss_mb:5.0f} MB, after {f.steady_mb:5.0f} MB{traced}"


def print_figure(f: PassFigure) -> None:
    p = f.phases
    print(
        f"  {f.function:<11} {f.kind:<4} {f.wall:7.2f} s | read {p.get('read', 0):6.2f}"
        f" write {p.get('write', 0):6.2f} launch {p.get('launch', 0):6.2f} plan {p['plan']:6.2f}"
        f" | moto {f.moto:6.2f} emu cpu {f.emulator_cpu:5.2f} | kube {f.kube_requests:5d} req"
        f" {f.kube_bytes_out / 1e6:8.3f} MB down {f.kube_bytes_in / 1e6:5.2f} MB up | aws {f.aws_calls:5d}"
        f" | {_memory_text(f)} | {f.summary} | kube: {f.kube_verbs} | moto top: {f.moto_top}",
        flush=True,
    )


def _handler_environment(documents: Path, kubeconfig: Path, machine_arn: str) -> dict[str, str]:
    """The handlers' configuration, as Lambda would pass it."""
    return {
        "FLEETWRIGHT_CLUSTER_NAME": CLUSTER,
        "FLEETWRIGHT_STATE_TABLE": TABLE,
        "FLEETWRIGHT_NODEPOOLS_FILE": str(documents),
        "FLEETWRIGHT_KUBECONFIG": str(kubeconfig),
        "FLEETWRIGHT_ECONOMY_MODE": "true",
        "FLEETWRIGHT_BATCH_IDLE_SECONDS": "0",
        # moto answers a Query of 10,000 claim records in tens of seconds (DynamoDB in well under
        # one): a lease as long as the stand-ins make a pass keeps the launch from being given up.
        "FLEETWRIGHT_LEASE_SECONDS": "900",
        "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN": machine_arn,
        "POWERTOOLS_METRICS_NAMESPACE": "FleetwrightScale",
        "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "ERROR"),
    }


FUNCTIONS = ("provisioner", "disruption")


@contextmanager
def seeded(nodes: int, pending: int, runs: int) -> Iterator[tuple[Any, Cluster, dict[str, str]]]:
    """moto and the emulator seeded with the cluster; yields the API server, the cluster and the handlers'
    environment."""
    import shutil

    from moto import mock_aws

    from fleetwright.aws import clients as aws_clients
    from fleetwright.aws.clients import AwsClients
    from fleetwright.local.apiserver import ApiServer

    with (
        mock_aws(),
        ApiServer(
            port=0, deployment_controller=False, pod_lifecycle=False, disruption_controller=False
        ) as server,
    ):
        aws_clients.reset_clients()
        seeding = AwsClients(REGION)
        info, machine_arn = seed_aws(seeding)
        cluster = seed_cluster(server, seeding, info, nodes, pending)
        work = Path(os.environ.get("TMPDIR", "/tmp")) / f"fleetwright-scale-{os.getpid()}"
        work.mkdir(exist_ok=True)
        documents = work / "nodepools.yaml"
        documents.write_text(nodepool_documents(nodes, pending * runs))
        kubeconfig = server.write_kubeconfig(work / "kubeconfig")
        try:
            yield server, cluster, _handler_environment(documents, kubeconfig, machine_arn)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _seeded_line(cluster: Cluster) -> str:
    return (
        f"{cluster.nodes} nodes, {cluster.pods} running pods, {cluster.pending} pending:"
        f" seeded in {cluster.seconds:.1f} s"
    )


def function_passes(
    function: str, standins: StandIns, runs: int, pending: int, first_request: int, trace: bool, split: bool
) -> Iterator[PassFigure]:
    """A cold invocation of ``function``'s handler, then ``runs - 1`` warm ones; before each warm
    provisioner invocation ``pending`` new pods become Unschedulable, so every pass launches."""
    module = load_handler(function)
    for run in range(runs):
        if function == "provisioner" and run > 0:
            standins.add_pending(pending, f"warm{run}")
        kind = "cold" if run == 0 else "warm"
        yield run_pass(function, module, standins, kind, first_request + run, trace, split)


def scenario(nodes: int, pending: int, runs: int, trace: bool) -> list[PassFigure]:
    """One cluster of ``nodes`` nodes and ``pending`` pending pods; ``runs`` passes of each function, all in
    this process."""
    figures: list[PassFigure] = []
    with seeded(nodes, pending, runs) as (server, cluster, environment):
        if trace and not tracemalloc.is_tracing():
            tracemalloc.start()  # after seeding, which it would slow down most
        os.environ.update(environment)
        print(_seeded_line(cluster), flush=True)
        for index, function in enumerate(FUNCTIONS):
            for figure in function_passes(
                function, InProcessStandIns(server), runs, pending, index * runs + 1, trace, False
            ):
                print_figure(figure)
                figures.append(figure)
    return figures


# -- --split: the functions in a process of their own -------------------------------------------------


def _quiet_logging() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto server's request log


def standin_process(conn: Any, nodes: int, pending: int, runs: int) -> None:
    """The stand-in process of ``--split``: moto and the emulator seeded as in-process, moto then also
    served over HTTP (the same backends); answers the function processes until told to stop."""
    from moto.server import ThreadedMotoServer

    os.environ.update(_CREDENTIALS)
    _quiet_logging()
    speed_up_moto()
    time_moto_server()
    answer_unknown_services()
    with seeded(nodes, pending, runs) as (server, cluster, environment):
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        conn.send((cluster, {**environment, **_CREDENTIALS, "AWS_ENDPOINT_URL": f"http://{host}:{port}"}))
        try:
            _serve_requests(conn, InProcessStandIns(server))
        finally:
            moto.stop()


def _serve_requests(conn: Any, standins: InProcessStandIns) -> None:
    """Answer :class:`RemoteStandIns` until ``stop``."""
    while True:
        request = conn.recv()
        if request[0] == "stop":
            return
        if request[0] == "reset":
            TIMINGS.reset()
            conn.send(None)
        elif request[0] == "traffic":
            t = standins.traffic()
            conn.send((t.requests, t.bytes_in, t.bytes_out, t.cpu_seconds, t.by_verb))
        elif request[0] == "moto":
            conn.send(standins.moto())
        elif request[0] == "pending":
            standins.add_pending(request[1], request[2])
            conn.send(None)


@dataclass
class FunctionJob:
    """What a function process of ``--split`` runs."""

    function: str
    runs: int
    pending: int
    first_request: int
    trace: bool
    profile: Path | None
    environment: dict[str, str]


def function_process(job: FunctionJob, standins_conn: Any, results: Any) -> None:
    """A function process of ``--split``: holds only the handler and what it builds (a fresh interpreter, as
    a new Lambda execution environment), the stand-ins reached over HTTP; sends back each pass's figure."""
    os.environ.update(job.environment)
    _quiet_logging()
    if job.profile:
        PROFILE["dir"] = job.profile
    instrument(in_process_moto=False)
    if job.trace:
        tracemalloc.start()
    standins = RemoteStandIns(standins_conn)
    for figure in function_passes(
        job.function, standins, job.runs, job.pending, job.first_request, job.trace, True
    ):
        print_figure(figure)
        results.send(figure)
    results.send(None)


def scenario_split(nodes: int, pending: int, runs: int, trace: bool) -> list[PassFigure]:
    """As :func:`scenario`, but moto and the emulator in one process and each function in a fresh process
    of its own, so the function process's memory is the function's."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    standins = context.Process(target=standin_process, args=(theirs, nodes, pending, runs), daemon=True)
    standins.start()
    figures: list[PassFigure] = []
    try:
        cluster, environment = ours.recv()
        print(_seeded_line(cluster), flush=True)
        for index, function in enumerate(FUNCTIONS):
            profile = PROFILE.get("dir")
            job = FunctionJob(function, runs, pending, index * runs + 1, trace, profile, environment)
            figures += _run_function_process(context, job, ours)
        ours.send(("stop",))
        standins.join()
    finally:
        if standins.is_alive():
            standins.terminate()
    return figures


def _run_function_process(context: Any, job: FunctionJob, standins_conn: Any) -> list[PassFigure]:
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=function_process, args=(job, standins_conn, send))
    process.start()
    send.close()
    figures: list[PassFigure] = []
    try:
        while (figure := receive.recv()) is not None:
            figures.append(figure)
    except EOFError:
        process.join()
        raise SystemExit(f"the {job.function} process failed (exit code {process.exitcode})") from None
    process.join()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--pending", type=int, nargs="+", default=[100, 2000])
    parser.add_argument(
        "--runs", type=int, default=3, help="passes of each function: one cold, the rest warm"
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="each function in a process of its own, moto and the emulator in another: the function"
        " process's peak and steady RSS per pass",
    )
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slow)")
    parser.add_argument("--profile", type=Path, help="write a cProfile dump of each pass to this directory")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE["dir"] = args.profile
    os.environ.update(_CREDENTIALS)
    _quiet_logging()
    from scheduling import machine  # bench/scheduling.py (here: a function process needs none of it)

    print(f"machine: {machine()}")
    print(f"runs: {args.runs} per function (the first cold), the provisioner in economy mode")
    if args.split:
        print("split: each function in its own process, moto (HTTP) and the emulator in another")
    else:
        instrument()
        speed_up_moto()
    for nodes in args.nodes:
        for pending in args.pending:
            (scenario_split if args.split else scenario)(nodes, pending, args.runs, args.tracemalloc)


if __name__ == "__main__":
    main()
