"""A whole EKS cluster and AWS account on one machine: moto, the Kubernetes API emulator (with its
scheduler, DaemonSet controller, EC2-driven kubelet simulator and Karpenter's CRDs) and Fleetwright's
provisioner.

The provisioner reads its NodePools and EC2NodeClasses from the cluster, as a deployed one does: they
are ``kubectl apply``-ed (:meth:`Sandbox.apply_nodepools`), not handed to it. ``fleetwright demo``
replays the walkthrough in it; ``fleetwright local up`` leaves it running for kubectl and boto3.
Nothing outside ``fleetwright.local`` imports this module.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.cluster import ClusterInfo, describe_cluster
from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.ttlcache import clear_all_caches
from fleetwright.catalog.loader import ondemand_prices
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube import ClusterConfig, KubeClient, KubeCluster
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import DAEMON_SETS, NAMESPACES, NODES, Resource
from fleetwright.local.apiserver.server import ApiServer
from fleetwright.local.aws_fakes import (
    CapacityReservations,
    PlacementGroups,
    SpotMarket,
    seed_discovery_network,
    seed_eks_amis,
    seed_windows_amis,
    thread_safe_moto,
)
from fleetwright.local.kubelet import KubeletOptions
from fleetwright.local.nodestart import NodeStart
from fleetwright.manifests import load_manifests
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.provisioning.nodepool_status import NodePoolStatus
from fleetwright.state import StateStore
from fleetwright.state.table import create_state_table

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
SPOT_DISCOUNT = 0.35  # the sandbox's spot prices: on-demand × this, a little different per zone
SYSTEM_NODE = "ip-10-0-0-10.ec2.internal"
STATE_TABLE = "fleetwright-state"
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
K8S_VERSION = "1.31"
KUBECTL_HINT = "kubectl not found: put it on the PATH (or run .ci/install-kubectl)"


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (shorter command lines)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def find_kubectl() -> str | None:
    """The kubectl to run: the project's pinned one (``.tools/bin/kubectl``), else the PATH's."""
    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        pinned = base / ".tools" / "bin" / "kubectl"
        if pinned.is_file() and os.access(pinned, os.X_OK):
            return str(pinned)
    return shutil.which("kubectl")


@dataclass
class SandboxOptions:
    """What the sandbox runs: the cluster's name, the NodePool/EC2NodeClass/workload manifests and how
    simulated nodes start (``node_start``: EKS's published figures unless a test or the demo shortens
    them). ``moto_port`` 0 keeps AWS in-process; otherwise moto serves HTTP there (for boto3 and the AWS
    CLI outside this process)."""

    cluster_name: str = ""
    region: str = "us-east-1"
    manifests: Sequence[str] = ("examples/inflate",)
    node_start: NodeStart = NodeStart.default
    moto_port: int = 0
    apiserver_port: int = 0
    provisioner_window: float = 5.0  # seconds each simulated Lambda invocation runs
    kubeconfig_dir: str = ""  # where the kubeconfig goes (default: a temporary directory)
    aws_request_log: bool = False  # the moto server's line per request (werkzeug's access log)


@dataclass
class Sandbox:
    """The running pieces. Use :func:`sandbox`."""

    options: SandboxOptions
    server: ApiServer
    clients: AwsClients
    cluster: ClusterInfo
    kube: KubeCluster
    client: KubeClient
    state: StateStore
    cloud: AwsProvider  # the cloud provider every capability runs against, over moto
    provisioner: Provisioner
    metrics: RecordingMetrics
    nodepools: NodePoolSource
    kubeconfig_path: Path
    moto_url: str = ""
    errors: list[str] = field(default_factory=list)
    # EC2 capacity reservations (moto has none): ``add`` one to launch into it.
    reservations: CapacityReservations = field(default_factory=CapacityReservations)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _disruption: threading.Thread | None = None

    def start_provisioner(self) -> None:
        """Run the provisioner like its schedule would: back-to-back invocations of a few seconds."""

        def loop() -> None:
            while not self._stop.is_set():
                report = self.provisioner.run_until(time.monotonic() + self.options.provisioner_window)
                if report.error:
                    self.errors.append(report.error)

        self._thread = threading.Thread(target=loop, name="provisioner", daemon=True)
        self._thread.start()

    def start_disruption(self, interval: float = 10.0) -> None:
        """Run a disruption pass every ``interval`` seconds, its NodePools re-read from the cluster first
        (as the disruption function does); a failed pass is kept in ``errors`` and the loop goes on."""
        from fleetwright.local.inprocess.disruption import run_disruption

        source = NodePoolSource(self.kube, self.provisioner.config, metrics=self.metrics)

        def loop() -> None:
            while not self._stop.wait(interval):
                source.refresh()
                try:
                    run = run_disruption(
                        kube=self.kube,
                        cloud=self.cloud,
                        state=self.state,
                        config=self.provisioner.config,
                        metrics=self.metrics,
                    )
                except Exception as error:  # a pass that fails must not end the loop
                    self.errors.append(f"disruption: {type(error).__name__}: {error}")
                    continue
                if run.report.error:
                    self.errors.append(f"disruption: {run.report.error}")

        self._disruption = threading.Thread(target=loop, name="disruption", daemon=True)
        self._disruption.start()

    def stop(self) -> None:
        """Stop the provisioner and disruption loops (each finishes its current invocation)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.options.provisioner_window + 5)
        if self._disruption is not None:
            self._disruption.join(timeout=30)

    def scale(self, deployment: str, replicas: int, namespace: str = "default") -> None:
        """``kubectl scale deployment``."""
        self.client.patch(DEPLOYMENTS, deployment, {"spec": {"replicas": replicas}}, namespace)

    def instances(self) -> list[dict[str, Any]]:
        """This cluster's EC2 instances (any state)."""
        pages = self.clients.ec2.describe_instances(
            Filters=[{"Name": "tag:fleetwright.io/cluster", "Values": [self.cluster.name]}]
        )["Reservations"]
        return [i for r in pages for i in r["Instances"]]

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig for the emulator (kubectl --kubeconfig PATH)."""
        self.server.write_kubeconfig(path)
        return path

    def kubectl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the emulator; raises RuntimeError when kubectl is missing."""
        binary = find_kubectl()
        if binary is None:
            raise RuntimeError(KUBECTL_HINT)
        return subprocess.run(
            [binary, "--kubeconfig", str(self.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def nodepool_files(self) -> list[Path]:
        """The files to ``kubectl apply`` for the manifests' NodePools and EC2NodeClasses: a file holding
        only those as it is, the Karpenter documents of a mixed file copied next to the kubeconfig."""
        import yaml

        from fleetwright.manifests import manifest_files
        from fleetwright.model.karpenter import is_karpenter_document

        files: list[Path] = []
        for path in manifest_files(list(self.options.manifests)):
            docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict)]
            ours = [d for d in docs if is_karpenter_document(d)]
            if not ours:
                continue
            if len(ours) == len(docs):
                files.append(Path(path))
                continue
            copy = self.kubeconfig_path.parent / f"karpenter-{Path(path).name}"
            copy.write_text(yaml.safe_dump_all(ours, sort_keys=False))
            files.append(copy)
        return files


class _Serialized:
    """A boto3 client whose calls run one at a time: moto's DynamoDB backend is not thread-safe (the
    provisioner, the interruption chain and the demo's timeline read and write it concurrently)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _aws(stack: ExitStack, options: SandboxOptions) -> str:
    """Start moto (in-process, or an HTTP server) and return its URL ('' in-process)."""
    thread_safe_moto()  # the provisioner launches in parallel threads
    stack.enter_context(_environment({**FAKE_CREDENTIALS, "AWS_DEFAULT_REGION": options.region}))
    if options.moto_port:
        from moto.server import ThreadedMotoServer

        port = options.moto_port if options.moto_port > 0 else _free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        # werkzeug logs a line per request at INFO: dozens a second once nodes come and go.
        logging.getLogger("werkzeug").setLevel(logging.INFO if options.aws_request_log else logging.WARNING)
        server.start()
        stack.callback(server.stop)
        url = f"http://127.0.0.1:{port}"
        stack.enter_context(_environment({"AWS_ENDPOINT_URL": url}))
        return url
    from moto import mock_aws

    stack.enter_context(mock_aws())
    return ""


def _seed_aws(clients: AwsClients, cluster: str, node_roles: set[str]) -> None:
    """A VPC with discovery-tagged subnets in three zones and a security group, the node role, the EKS
    cluster, AL2023 and Windows EKS AMIs published under their public SSM names, and the state table."""
    ec2 = clients.ec2
    subnets = seed_discovery_network(ec2, cluster, [f"us-east-1{zone}" for zone in "abc"])
    iam = clients.iam
    trust = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}'  # noqa: E501
    for role in sorted(node_roles | {f"{cluster}-cluster"}):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)
    clients.eks.create_cluster(
        name=cluster,
        version=K8S_VERSION,
        roleArn=f"arn:aws:iam::123456789012:role/{cluster}-cluster",
        resourcesVpcConfig={"subnetIds": subnets},
    )
    seed_eks_amis(ec2, K8S_VERSION, clients.region)
    seed_windows_amis(ec2, K8S_VERSION, clients.region)
    create_state_table(clients.client("dynamodb"), STATE_TABLE)


def _spot_market(clients: AwsClients) -> SpotMarket:
    prices = ondemand_prices(clients.region)
    zones = clients.ec2.describe_instance_type_offerings(LocationType="availability-zone")
    offered: dict[str, set[str]] = {}
    for item in zones["InstanceTypeOfferings"]:
        offered.setdefault(item["InstanceType"], set()).add(item["Location"])

    def price(name: str, zone: str) -> float:
        return round(prices.get(name, 1.0) * SPOT_DISCOUNT * (1 + 0.02 * (ord(zone[-1]) - ord("a"))), 6)

    return SpotMarket({k: frozenset(v) for k, v in offered.items() if k in prices}, price)


def _placement_groups(nodeclasses: Sequence[Any]) -> PlacementGroups:
    """A cluster placement group for every ``placementGroupSelector`` the manifests name (by name or id),
    answered by the DescribePlacementGroups fake moto lacks."""
    groups = PlacementGroups([])
    for nodeclass in nodeclasses:
        selector = nodeclass.spec.placement_group_selector
        if selector is not None:
            groups.add(selector.name or selector.id or "", "cluster", group_id=selector.id or "")
    return groups


def _seed_kubernetes(client: KubeClient, workloads: Sequence[dict[str, Any]]) -> None:
    """One system node (tainted for critical add-ons, as EKS system node groups often are), CoreDNS on
    it, a kube-proxy DaemonSet, and the manifests' workloads scaled to 0."""
    client.create(NODES, copy.deepcopy(_SYSTEM_NODE_OBJECT))
    client.create(DEPLOYMENTS, copy.deepcopy(_COREDNS), "kube-system")
    client.create(DAEMON_SETS, copy.deepcopy(_KUBE_PROXY), "kube-system")
    for workload in workloads:
        namespace = workload["metadata"].get("namespace") or "default"
        _ensure_namespace(client, namespace)
        body = {**workload, "spec": {**workload["spec"], "replicas": 0}}
        client.create(DEPLOYMENTS, body, namespace)


def _ensure_namespace(client: KubeClient, namespace: str) -> None:
    """Create ``namespace`` unless it exists already."""
    try:
        client.get(NAMESPACES, namespace)
    except KubeApiError as missing:
        if not missing.not_found:
            raise
        client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


_PAUSE = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"

_SYSTEM_NODE_OBJECT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": SYSTEM_NODE,
        "labels": {
            "kubernetes.io/hostname": SYSTEM_NODE,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-east-1a",
            "eks.amazonaws.com/nodegroup": "system",
        },
    },
    "spec": {
        "providerID": "aws:///us-east-1a/i-0system000000000",
        "taints": [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
    },
    "status": {
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7068Mi", "pods": "29"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}

_COREDNS: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "coredns", "namespace": "kube-system"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
        "template": {
            "metadata": {"labels": {"k8s-app": "kube-dns"}},
            "spec": {
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                "nodeSelector": {"eks.amazonaws.com/nodegroup": "system"},
                "containers": [
                    {
                        "name": "coredns",
                        "image": _PAUSE,
                        "resources": {"requests": {"cpu": "100m", "memory": "70Mi"}},
                    }
                ],
            },
        },
    },
}

_KUBE_PROXY: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
        "template": {
            "metadata": {"labels": {"k8s-app": "kube-proxy"}},
            "spec": {
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "kube-proxy",
                        "image": _PAUSE,
                        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                    }
                ],
            },
        },
    },
}


def _deployments(paths: Sequence[str]) -> list[dict[str, Any]]:
    import yaml

    from fleetwright.manifests import manifest_files

    found = []
    for path in manifest_files(paths):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "Deployment":
                found.append(doc)
    return found


@contextmanager
def sandbox(options: SandboxOptions | None = None) -> Iterator[Sandbox]:
    """Start everything; stop everything on exit. Raises DocumentError for bad manifests."""
    options = options or SandboxOptions()
    manifests = load_manifests(list(options.manifests))
    if not options.cluster_name:
        options.cluster_name = _discovery_name(manifests.nodeclasses) or "my-cluster"
    with ExitStack() as stack:
        moto_url = _aws(stack, options)
        clear_all_caches()
        stack.callback(clear_all_caches)
        clients = AwsClients(options.region)
        reservations = _seed_fake_aws(clients, options.cluster_name, manifests.nodeclasses)
        cluster = describe_cluster(clients, options.cluster_name)
        server, kubeconfig = _start_apiserver(stack, options, clients)
        client = KubeClient(ClusterConfig(server=server.url))
        _seed_kubernetes(client, _deployments(options.manifests))
        kube = KubeCluster(client)
        state = StateStore(STATE_TABLE, options.cluster_name, client=_Serialized(clients.client("dynamodb")))
        cloud = AwsProvider(cluster, options.region, clients=clients, unavailable=state.unavailable)
        metrics = RecordingMetrics()
        # No NodePool documents: like a kubectl-only deployment, NodePools come from the cluster only.
        config = ProvisionerConfig(cluster_name=options.cluster_name)
        source = NodePoolSource(
            kube,
            config,
            metrics=metrics,
            status=NodePoolStatus(kube, cloud=cloud, metrics=metrics, claims=state.nodeclaims.list),
        )
        provisioner = Provisioner(kube, cloud, state, config, metrics=metrics, nodepool_source=source)
        box = Sandbox(
            options,
            server,
            clients,
            cluster,
            kube,
            client,
            state,
            cloud,
            provisioner,
            metrics,
            source,
            kubeconfig,
            moto_url,
            reservations=reservations,
        )
        stack.callback(box.stop)
        yield box


def _seed_fake_aws(
    clients: AwsClients, cluster_name: str, nodeclasses: Sequence[Any]
) -> CapacityReservations:
    """The cluster's AWS side: roles, network, spot prices, placement groups; returns the reservations."""
    _seed_aws(clients, cluster_name, {nc.spec.role for nc in nodeclasses if nc.spec.role})
    _spot_market(clients).install(clients.ec2)
    reservations = CapacityReservations()
    reservations.install(clients.ec2)
    _placement_groups(nodeclasses).install(clients.ec2)
    return reservations


def _start_apiserver(
    stack: ExitStack, options: SandboxOptions, clients: AwsClients
) -> tuple[ApiServer, Path]:
    """The emulated API server with Karpenter's CRDs and its simulated kubelets, and a kubeconfig for it."""
    from fleetwright.local.apiserver.karpenter import install_karpenter_crds

    server = ApiServer(
        port=options.apiserver_port,
        scheduler=True,
        daemonset_controller=True,
        kubelet=KubeletOptions(clients.ec2, options.cluster_name, start=options.node_start),
    ).start()
    stack.callback(server.stop)
    install_karpenter_crds(server.store)
    directory = options.kubeconfig_dir or stack.enter_context(
        tempfile.TemporaryDirectory(prefix="fleetwright-")
    )
    return server, server.write_kubeconfig(Path(directory) / "config")


def _discovery_name(nodeclasses: Sequence[Any]) -> str:
    """The cluster name the EC2NodeClasses' ``karpenter.sh/discovery`` selector tags expect."""
    for nc in nodeclasses:
        for term in nc.spec.subnet_selector_terms:
            value = (term.tags or {}).get("karpenter.sh/discovery")
            if value:
                return str(value)
    return ""
