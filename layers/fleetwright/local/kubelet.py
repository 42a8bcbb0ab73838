"""A kubelet simulator: a Node for every running EC2 instance of the cluster, read through the EC2 API.

It stands in for the kubelets of the instances Fleetwright launches (against moto, or any EC2 endpoint):

* every ``running`` instance tagged ``fleetwright.io/cluster=<cluster>`` registers a Node named like
  EKS names them (the instance's private DNS name, e.g. ``ip-10-0-1-23.ec2.internal``), with only the
  labels a real kubelet and cloud controller give it: the ``--node-labels`` and taints its user data
  passes (:mod:`fleetwright.local.userdata`), hostname, os and arch (and, booted from a Windows AMI,
  ``kubernetes.io/os=windows`` and the ``node.kubernetes.io/windows-build`` of the image's Windows Server
  release, as the Windows kubelet sets them), instance type, zone and region —
  never the ``karpenter.k8s.aws/*`` labels of its instance type, which Fleetwright's registration adds
  — capacity and allocatable from its instance type (and the user data's kubelet settings), and
  ``spec.providerID = aws:///<zone>/<instance-id>``;
* its start follows :class:`~fleetwright.local.nodestart.NodeStart` on ``clock``: EC2 shows the instance
  ``pending`` for ``boot_seconds`` (:class:`~fleetwright.local.aws_fakes.InstanceBoot`, installed while
  the simulator runs), the kubelet registers the Node ``register_seconds`` after it first sees the
  instance ``running``, with ``Ready=False`` (the node lifecycle controller,
  :mod:`fleetwright.local.nodelifecycle`, taints it ``node.kubernetes.io/not-ready:NoSchedule``), reports
  ``Ready=True`` ``ready_seconds`` later, and ``startup_taint_seconds`` after that the agents that own
  startup taints remove theirs: the keys in ``startup_taint_keys`` (Cilium's, the EBS and EFS CSI
  drivers') and those of the cluster's NodePools' ``startupTaints`` (removed again should anything put
  them back, as those agents do);
* pods bound to a Ready node start Running (the emulator's PodLifecycleController leaves these nodes
  alone: they carry the ``fleetwright.io/simulated-kubelet`` annotation);
* when the instance is shutting down, terminated, stopped or gone, its pods and its Node are deleted (as
  the cloud controller's node lifecycle controller does; a Node holding a finalizer stays, Terminating,
  until the finalizer is removed).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetwright.aws.tags import CLUSTER_TAG, from_aws
from fleetwright.catalog.from_ec2 import instance_type_from_ec2
from fleetwright.catalog.loader import builtin_catalog, format_quantity, with_kubelet
from fleetwright.catalog.os_family import WINDOWS_RELEASES, as_windows
from fleetwright.local.apiserver.controllers import SIMULATED_KUBELET_ANNOTATION, PodLifecycleController
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.selectors import FieldSelector
from fleetwright.local.apiserver.store import Store, WatchEvent, rfc3339
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.userdata import AL2, BOTTLEROCKET, WINDOWS, NodeBootstrap, parse_user_data
from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType

if TYPE_CHECKING:
    from fleetwright.local.apiserver.server import ApiServer
    from fleetwright.local.aws_fakes import InstanceBoot

JsonObject = dict[str, Any]

log = logging.getLogger(__name__)

LIVE_STATES = ("pending", "running")
LAUNCH_TEMPLATE_ID_TAG = "aws:ec2launchtemplate:id"
LAUNCH_TEMPLATE_VERSION_TAG = "aws:ec2launchtemplate:version"
KUBELET_VERSION = "v1.31.0-eks-fleetwright"
_OS_IMAGES = {
    AL2: "Amazon Linux 2",
    BOTTLEROCKET: "Bottlerocket OS 1.26.0 (aws-k8s-1.31)",
    WINDOWS: "Windows Server Core",
}


# Startup taints whose agents every cluster may run: Cilium's, and the EBS and EFS CSI node drivers'.
KNOWN_AGENT_TAINT_KEYS = frozenset(
    {"node.cilium.io/agent-not-ready", "ebs.csi.aws.com/agent-not-ready", "efs.csi.aws.com/agent-not-ready"}
)


@dataclass(frozen=True, slots=True)
class KubeletOptions:
    """How ``ApiServer(kubelet=...)`` builds its :class:`KubeletSimulator`."""

    ec2_client: Any
    cluster_name: str
    start: NodeStart = NodeStart.default
    poll_interval: float = 0.5
    startup_taint_keys: frozenset[str] = KNOWN_AGENT_TAINT_KEYS


def node_name_for(instance: Mapping[str, Any], region: str) -> str:
    """The Node name EKS uses: the private DNS name, else ``ip-a-b-c-d`` in the region's domain."""
    if instance.get("PrivateDnsName"):
        return str(instance["PrivateDnsName"])
    domain = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    ip = instance.get("PrivateIpAddress")
    if ip:
        return f"ip-{str(ip).replace('.', '-')}.{domain}"
    return f"{instance['InstanceId']}.{domain}"


def _instance_id(node: JsonObject) -> str:
    return str(node.get("spec", {}).get("providerID") or "").rpartition("/")[2]


def _is_ready(node: JsonObject) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions") or []
    )


class KubeletSimulator(PodLifecycleController):
    """Registers, readies, runs and removes the Nodes of a cluster's EC2 instances.

    ``server_or_store``: an ``ApiServer`` or its ``Store``. ``ec2_client``: a boto3 EC2 client (moto in
    tests). ``clock`` (monotonic seconds) times every phase of ``start`` (:class:`NodeStart`); with
    ``boot_instances`` the instances moto creates meanwhile stay ``pending`` for its ``boot_seconds``.
    ``start()`` polls EC2 every ``poll_interval`` seconds on a thread; ``poll_once()`` does one round in
    the calling thread.
    """

    watches = (PODS, NODES)

    def __init__(
        self,
        server_or_store: ApiServer | Store,
        ec2_client: Any,
        cluster_name: str,
        *,
        start: NodeStart = NodeStart.default,
        poll_interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        startup_taint_keys: Iterable[str] = KNOWN_AGENT_TAINT_KEYS,
        boot_instances: bool = True,
    ) -> None:
        store = server_or_store if isinstance(server_or_store, Store) else server_or_store.store
        super().__init__(store)
        self.ec2 = ec2_client
        self.cluster_name = cluster_name
        self.node_start = start
        self.poll_interval = poll_interval
        self.clock = clock
        self.startup_taint_keys = frozenset(startup_taint_keys)
        self.region = str(getattr(getattr(ec2_client, "meta", None), "region_name", None) or "us-east-1")
        self._boot: InstanceBoot | None = None
        if boot_instances:
            from fleetwright.local.aws_fakes import InstanceBoot  # moto: imported only when simulated

            self._boot = InstanceBoot(start.boot_seconds, clock)
        self._running_since: dict[str, float] = {}  # instance id → clock() when first seen running
        self._registered_at: dict[str, float] = {}  # node uid → clock() at registration
        self._ready_at: dict[str, float] = {}  # node uid → clock() when it reported Ready
        self._user_data: dict[str, NodeBootstrap] = {}
        self._types: dict[str, InstanceType | None] = {}
        self._node_names: frozenset[str] = frozenset()
        self._poll_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self, *, poll: bool = True) -> None:
        """Start running the pods bound to Ready nodes as they come, and (with ``poll``) poll EC2 on a
        background thread; without it, call ``poll_once()`` yourself (tests with a fake clock)."""
        if self._subscription is not None:
            return
        self._stopping.clear()
        if self._boot is not None:
            self._boot.install()
        super().start()
        if not poll:
            return
        self._thread = threading.Thread(target=self._loop, name="fleetwright-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling and running pods (Nodes stay as they are)."""
        super().stop()
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._boot is not None:
            self._boot.uninstall()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.poll_once()
            except Exception:
                log.exception("kubelet simulator poll failed")
            self._stopping.wait(self.poll_interval)

    def wants(self, event: WatchEvent) -> bool:
        """Nodes, and pods bound to this simulator's nodes: only they can give it pods to start."""
        return (
            event.resource.key == NODES.key
            or event.object.get("spec", {}).get("nodeName") in self._node_names
        )

    # -- pods -----------------------------------------------------------------------------------------

    def _mine(self, node: JsonObject) -> bool:
        return (node["metadata"].get("annotations") or {}).get(
            SIMULATED_KUBELET_ANNOTATION
        ) == self.cluster_name

    def runs_pods_of(self, node: JsonObject) -> bool:
        """This simulator starts the pods of its own nodes once they are Ready."""
        return self._mine(node) and _is_ready(node)

    def reconcile(self) -> None:
        """Start the Pending pods bound to this simulator's Ready nodes."""
        nodes = [n for n in self.store.list(NODES)[0] if self._mine(n)]
        self._node_names = frozenset(n["metadata"]["name"] for n in nodes)
        with self.store.transaction():  # started pods reach subscribers as one batch
            for node in nodes:
                if not _is_ready(node):
                    continue
                on_node = FieldSelector((("spec.nodeName", True, node["metadata"]["name"]),))
                for pod in self.store.list(PODS, fields=on_node)[0]:
                    if pod["metadata"].get("deletionTimestamp"):
                        continue
                    if pod.get("status", {}).get("phase", "Pending") == "Pending":
                        self._start(pod, node)

    # -- EC2 ------------------------------------------------------------------------------------------

    def poll_once(self) -> None:
        """Read the cluster's instances once: register those running long enough, ready those registered
        long enough, let the agents remove their startup taints, remove the nodes of instances gone."""
        with self._poll_lock:
            instances = self._describe()
            nodes = {_instance_id(n): n for n in self.store.list(NODES)[0] if self._mine(n)}
            for instance_id, node in nodes.items():
                state = instances.get(instance_id, {}).get("State", {}).get("Name")
                if state not in LIVE_STATES:
                    self._remove(node)
            self._boot_instances(instances, nodes)
            agent_keys = self.startup_taint_keys | self._nodepool_startup_taint_keys()
            for node in self.store.list(NODES)[0]:
                if not self._mine(node) or _instance_id(node) not in instances:
                    continue
                if not _is_ready(node):
                    self._maybe_ready(node)
                else:
                    self._maybe_untaint(node, agent_keys)
        self._runner.notify()

    def _boot_instances(self, instances: Mapping[str, JsonObject], nodes: Mapping[str, JsonObject]) -> None:
        """Register the Node of each running instance whose kubelet has had ``register_seconds``."""
        taken = {n["metadata"]["name"] for n in self.store.list(NODES)[0]}
        now = self.clock()
        for gone in self._running_since.keys() - instances.keys():
            del self._running_since[gone]
        for instance_id, instance in instances.items():
            if instance.get("State", {}).get("Name") != "running" or instance_id in nodes:
                continue
            since = self._running_since.get(instance_id)
            if since is None:
                self._running_since[instance_id] = since = now
                log.info("instance %s running; its kubelet starts", instance_id)
            if now - since >= self.node_start.register_seconds:
                self._register(instance, taken)

    def _nodepool_startup_taint_keys(self) -> frozenset[str]:
        """The ``startupTaints`` keys of the cluster's NodePools (none while their CRD is not served)."""
        nodepools = self.store.registry.lookup("karpenter.sh", "v1", "nodepools")
        if nodepools is None:
            return frozenset()
        keys: set[str] = set()
        for pool in self.store.list(nodepools)[0]:
            spec = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
            keys.update(str(t.get("key")) for t in spec.get("startupTaints") or [] if isinstance(t, dict))
        return frozenset(keys)

    def _describe(self) -> dict[str, JsonObject]:
        paginator = self.ec2.get_paginator("describe_instances")
        found: dict[str, JsonObject] = {}
        pages = paginator.paginate(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster_name]}])
        for page in pages:
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    found[str(instance["InstanceId"])] = instance
        return found

    def _bootstrap(self, instance: Mapping[str, Any]) -> NodeBootstrap:
        instance_id = str(instance["InstanceId"])
        cached = self._user_data.get(instance_id)
        if cached is None:
            cached = parse_user_data(self._read_user_data(instance))
            self._user_data[instance_id] = cached
        return cached

    def _read_user_data(self, instance: Mapping[str, Any]) -> str:
        """The instance's user data; else its launch template version's (for EC2 fleets that do not
        copy it onto the instance)."""
        answer = self.ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
        encoded = (answer.get("UserData") or {}).get("Value")
        if not encoded:
            tags = from_aws(instance.get("Tags"))
            template = tags.get(LAUNCH_TEMPLATE_ID_TAG)
            if template:
                versions = self.ec2.describe_launch_template_versions(
                    LaunchTemplateId=template, Versions=[tags.get(LAUNCH_TEMPLATE_VERSION_TAG, "$Default")]
                )["LaunchTemplateVersions"]
                if versions:
                    encoded = versions[0].get("LaunchTemplateData", {}).get("UserData")
        if not encoded:
            return ""
        return base64.b64decode(encoded).decode("utf-8", errors="replace")

    def _windows_build(self, instance: Mapping[str, Any]) -> str | None:
        """The Windows build of the image the instance booted (its name names the Windows Server
        release, as the EKS-optimized Windows AMIs' do); None when it is no Windows image."""
        image_id = str(instance.get("ImageId") or "")
        if not image_id:
            return None
        with contextlib.suppress(Exception):
            images = self.ec2.describe_images(ImageIds=[image_id]).get("Images", [])
            name = str(images[0].get("Name", "")) if images else ""
            for release, build in WINDOWS_RELEASES.values():
                if f"Windows_Server-{release}" in name:
                    return build
        return None

    def _instance_type(self, name: str) -> InstanceType | None:
        if name not in self._types:
            found: InstanceType | None = None
            with contextlib.suppress(ValueError):
                found = next((t for t in builtin_catalog(self.region) if t.name == name), None)
            if found is None:
                infos = self.ec2.describe_instance_types(InstanceTypes=[name]).get("InstanceTypes", [])
                with contextlib.suppress(ValueError, KeyError):
                    found = instance_type_from_ec2(infos[0]) if infos else None
            self._types[name] = found
        return self._types[name]

    # -- nodes ----------------------------------------------------------------------------------------

    def node_object(self, instance: Mapping[str, Any]) -> JsonObject:
        """The Node a kubelet on ``instance`` registers (``Ready=False``)."""
        bootstrap = self._bootstrap(instance)
        zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
        name = node_name_for(instance, self.region)
        build = self._windows_build(instance) if bootstrap.family == WINDOWS else None
        arch, capacity, allocatable = self._hardware(instance, bootstrap, build)
        now = rfc3339(self.store.clock())
        spec: JsonObject = {"providerID": f"aws:///{zone}/{instance['InstanceId']}"}
        if bootstrap.taints:
            spec["taints"] = [
                {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
                for t in bootstrap.taints
            ]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": self._labels(instance, bootstrap, name, arch, build),
                "annotations": {SIMULATED_KUBELET_ANNOTATION: self.cluster_name},
            },
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": _starting_conditions(now),
                "addresses": _addresses(instance, name),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": _node_info(instance, arch, bootstrap.family, build),
            },
        }

    def _hardware(
        self, instance: Mapping[str, Any], bootstrap: NodeBootstrap, build: str | None
    ) -> tuple[str, dict[str, str], dict[str, str]]:
        """Architecture, capacity and allocatable as the kubelet measures them (after its reservations)."""
        arch = "arm64" if instance.get("Architecture") == "arm64" else "amd64"
        instance_type = self._instance_type(str(instance.get("InstanceType", "")))
        if instance_type is not None and build is not None:
            instance_type = as_windows(instance_type, build) or instance_type
        if instance_type is None:
            return arch, {}, {}
        adjusted = with_kubelet([instance_type], bootstrap.kubelet)[0]
        arch = adjusted.labels.get(wk.ARCH, arch)
        capacity = {k: format_quantity(k, v) for k, v in sorted(adjusted.capacity.items())}
        allocatable = {k: format_quantity(k, v) for k, v in sorted(adjusted.allocatable.items())}
        return arch, capacity, allocatable

    def _labels(
        self, instance: Mapping[str, Any], bootstrap: NodeBootstrap, name: str, arch: str, build: str | None
    ) -> dict[str, str]:
        """Its --node-labels, then what the kubelet sets itself (hostname, os, arch) and what the cloud
        controller adds (instance type, zone, region): nothing else, as on EKS."""
        zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
        type_name = str(instance.get("InstanceType", ""))
        labels = dict(bootstrap.labels)
        labels.update(
            {
                wk.HOSTNAME: name,
                wk.OS: "linux",
                "beta.kubernetes.io/os": "linux",
                wk.ARCH: arch,
                "beta.kubernetes.io/arch": arch,
                wk.INSTANCE_TYPE: type_name,
                "beta.kubernetes.io/instance-type": type_name,
                wk.ZONE: zone,
                "failure-domain.beta.kubernetes.io/zone": zone,
                wk.REGION: self.region,
                "failure-domain.beta.kubernetes.io/region": self.region,
            }
        )
        if build is not None:
            labels.update({wk.OS: "windows", "beta.kubernetes.io/os": "windows", wk.WINDOWS_BUILD: build})
        zone_id = str(instance.get("Placement", {}).get("AvailabilityZoneId") or "")
        if zone_id:
            labels["topology.k8s.aws/zone-id"] = zone_id
        return dict(sorted(labels.items()))

    def _register(self, instance: Mapping[str, Any], taken: set[str]) -> None:
        node = self.node_object(instance)
        name = node["metadata"]["name"]
        if name in taken:
            log.warning("instance %s: a node named %s exists already", instance["InstanceId"], name)
            return
        try:
            created = self.store.create(NODES, node)
        except ApiError as err:
            log.warning("instance %s: cannot register node %s: %s", instance["InstanceId"], name, err.message)
            return
        taken.add(name)
        self._registered_at[created["metadata"]["uid"]] = self.clock()
        self._running_since.pop(str(instance["InstanceId"]), None)
        log.info("node %s registered NotReady for %s", name, instance["InstanceId"])

    def _maybe_ready(self, node: JsonObject) -> None:
        uid = node["metadata"]["uid"]
        since = self._registered_at.setdefault(uid, self.clock())
        if self.clock() - since < self.node_start.ready_seconds:
            return
        now = rfc3339(self.store.clock())

        def ready(obj: JsonObject) -> JsonObject:
            for condition in obj.get("status", {}).get("conditions") or []:
                if condition.get("type") == "Ready":
                    condition.update(
                        status="True",
                        reason="KubeletReady",
                        message="kubelet is posting ready status",
                        lastHeartbeatTime=now,
                        lastTransitionTime=now,
                    )
            return obj

        with contextlib.suppress(ApiError):
            self.store.mutate(NODES, None, node["metadata"]["name"], ready, "status")
            self._ready_at[uid] = self.clock()
            log.info("node %s Ready", node["metadata"]["name"])

    def _maybe_untaint(self, node: JsonObject, keys: frozenset[str]) -> None:
        """``startup_taint_seconds`` after the node became Ready, its agents remove their taints (``keys``),
        and keep them off."""
        taints = (node.get("spec") or {}).get("taints") or []
        if not any(t.get("key") in keys for t in taints):
            return
        uid = node["metadata"]["uid"]
        since = self._ready_at.setdefault(uid, self.clock())
        if self.clock() - since < self.node_start.startup_taint_seconds:
            return

        def untaint(obj: JsonObject) -> JsonObject:
            spec = obj.setdefault("spec", {})
            kept = [t for t in spec.get("taints") or [] if t.get("key") not in keys]
            if kept:
                spec["taints"] = kept
            else:
                spec.pop("taints", None)
            return obj

        with contextlib.suppress(ApiError):
            self.store.mutate(NODES, None, node["metadata"]["name"], untaint)
            log.info("node %s: startup taints removed by their agents", node["metadata"]["name"])

    def _remove(self, node: JsonObject) -> None:
        name = node["metadata"]["name"]
        on_node = FieldSelector((("spec.nodeName", True, name),))
        for pod in self.store.list(PODS, fields=on_node)[0]:
            with contextlib.suppress(ApiError):
                self.store.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], grace_period=0)
        with contextlib.suppress(ApiError):
            self.store.delete(NODES, None, name)
        self._registered_at.pop(node["metadata"]["uid"], None)
        self._ready_at.pop(node["metadata"]["uid"], None)
        self._user_data.pop(_instance_id(node), None)
        log.info("node %s removed: its instance is gone", name)


def _starting_conditions(now: str) -> list[JsonObject]:
    """A just-registered kubelet's conditions: no pressure, not Ready until its network is."""
    pressure: list[JsonObject] = [
        {
            "type": kind,
            "status": "False",
            "reason": f"KubeletHas{reason}",
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, reason, message in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    ready: JsonObject = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "container runtime network not ready: NetworkReady=false",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return [*pressure, ready]


def _addresses(instance: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """The private IP (when the instance has one), then the node name as DNS name and hostname."""
    ip = str(instance.get("PrivateIpAddress") or "")
    addresses = [{"type": "InternalIP", "address": ip}] if ip else []
    return [*addresses, {"type": "InternalDNS", "address": name}, {"type": "Hostname", "address": name}]


def _node_info(instance: Mapping[str, Any], arch: str, family: str, build: str | None) -> JsonObject:
    """The kubelet's report of the machine and its software."""
    return {
        "architecture": arch,
        "bootID": f"boot-{instance['InstanceId']}",
        "containerRuntimeVersion": "containerd://1.7.22",
        "kernelVersion": "6.1.0",
        "kubeProxyVersion": KUBELET_VERSION,
        "kubeletVersion": KUBELET_VERSION,
        "machineID": str(instance["InstanceId"]).replace("-", ""),
        "operatingSystem": "windows" if build is not None else "linux",
        "osImage": _OS_IMAGES.get(family, "Amazon Linux 2023"),
        "systemUUID": str(instance["InstanceId"]),
    }
