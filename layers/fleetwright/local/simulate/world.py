"""One replayed cluster: the virtual clock, the emulator's store and kube-scheduler, the simulated
kubelets, the in-memory cloud, the state table, and the capabilities the functions run — the
provisioner, the disruption controller (built by :func:`fleetwright.runtime.disruption.build_controller`,
as the function builds it) and the termination workflows — wired as the Lambda functions wire them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.kube import KubeCluster
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.local.apiserver.resources import DAEMON_SETS, NAMESPACES
from fleetwright.local.apiserver.store import Store
from fleetwright.local.daemonsets import DaemonSetController
from fleetwright.local.kube_scheduler import KubeScheduler
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.simulate.cache import StoreFedCache
from fleetwright.local.simulate.cloud import SimCloud
from fleetwright.local.simulate.cluster import SharedLists, SimKubelet, StoreClient
from fleetwright.local.simulate.workflows import SimWorkflows
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.nodepool import FEWER_NODES, LOWEST_COST, PACKING_ANNOTATION, NodePool
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.runtime.disruption import build_controller
from fleetwright.state import StateStore
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.claimbook import StoreClaimBook

START_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the replay's time zero
MONOTONIC_OFFSET = 1_000.0
DRAIN_INTERVAL_SECONDS = 5  # the termination workflow's Wait between drain passes (deployed default)
POLL_SECONDS = 5


class VirtualClock:
    """Epoch seconds (:meth:`now`) and a monotonic reading (:meth:`monotonic`) that move only when the
    engine moves them; :meth:`sleep` (a lease wait, a client's back-off) moves them too."""

    def __init__(self, start: float = START_EPOCH) -> None:
        self.start = start
        self.current = start

    def now(self) -> float:
        """Epoch seconds."""
        return self.current

    def monotonic(self) -> float:
        """Seconds since the replay began, plus an offset (monotonic clocks do not start at 0)."""
        return self.current - self.start + MONOTONIC_OFFSET

    def elapsed(self) -> float:
        """Seconds since the replay began."""
        return self.current - self.start

    def advance_to(self, when: float) -> None:
        """Move to ``when`` (epoch seconds); never backwards."""
        self.current = max(self.current, when)

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.current += max(0.0, seconds)


def with_packing(nodepools: Sequence[NodePool], packing: str | None) -> list[NodePool]:
    """The NodePools with annotation ``fleetwright.io/packing`` set to ``packing`` (None: as written)."""
    if packing is None:
        return list(nodepools)
    if packing not in (FEWER_NODES, LOWEST_COST):
        raise ValueError(f"unknown packing {packing!r}")
    changed = []
    for pool in nodepools:
        copy = pool.model_copy(deep=True)
        copy.metadata.annotations[PACKING_ANNOTATION] = packing
        changed.append(copy)
    return changed


@dataclass
class World:
    """The pieces of one replayed cluster (see the module's docstring)."""

    clock: VirtualClock
    store: Store
    scheduler: KubeScheduler
    kubelet: SimKubelet
    kube: KubeCluster
    cloud: SimCloud
    state: StateStore
    config: ProvisionerConfig
    provisioner: Provisioner
    workflows: SimWorkflows
    disruption: Any
    metrics: RecordingMetrics = field(default_factory=RecordingMetrics)
    daemonsets: DaemonSetController | None = None
    interruptions: Any = None  # the interruption controller, when spot interruptions are replayed


@dataclass(frozen=True)
class WorldSpec:
    """What a world is built from: the documents, the catalog, the node start and where state lives."""

    nodepools: Sequence[NodePool]
    nodeclasses: Sequence[EC2NodeClass]
    catalog: Sequence[InstanceType]
    cluster: str = "simulated"
    region: str = "us-east-1"
    start: NodeStart = NodeStart.default
    zones: frozenset[str] = frozenset()
    packing: str | None = None
    settings: DisruptionOptions = field(default_factory=DisruptionOptions)
    daemonsets: Sequence[dict[str, Any]] = ()  # DaemonSet objects, run on every node they select
    spot_interruptions: float = 0.0  # interruption warnings per spot instance per hour


def cluster_store(spec: WorldSpec, clock: VirtualClock) -> Store:
    """The emulator's store on ``clock`` with Karpenter's CRDs and the spec's DaemonSets."""
    store = Store(clock=clock.now)
    install_karpenter_crds(store)
    for daemonset in spec.daemonsets:
        namespace = daemonset.get("metadata", {}).get("namespace") or "default"
        if store.try_get(NAMESPACES, None, namespace) is None:
            store.create(NAMESPACES, {"metadata": {"name": namespace}})
        store.create(DAEMON_SETS, copy.deepcopy(daemonset), namespace)
    return store


def provisioner_for(
    kube: KubeCluster,
    cloud: SimCloud,
    state: StateStore,
    config: ProvisionerConfig,
    metrics: RecordingMetrics,
    clock: VirtualClock,
    cache: StoreFedCache | None = None,
) -> Provisioner:
    """The provisioner as the function builds it, on the replay's clocks (a lease wait moves them)."""
    return Provisioner(
        kube,
        cloud,
        state,
        config,
        clock=clock.monotonic,
        wall_clock=clock.now,
        sleep=clock.sleep,
        metrics=metrics,
        holder="provisioner",
        cache=cache,
    )


def build_world(spec: WorldSpec, table: Any, dynamodb: Any) -> World:
    """A world on a fresh clock; ``table`` names the state table ``dynamodb`` (a client) holds."""
    clock = VirtualClock()
    store = cluster_store(spec, clock)
    kube = KubeCluster(StoreClient(store), clock=clock.now)
    # The functions' warm path: each reads the cluster from its cache (one per function, as deployed).
    provisioner_cache = StoreFedCache(store, kube.client, clock=clock)
    disruption_cache = StoreFedCache(store, kube.client, clock=clock)
    state = StateStore(table, spec.cluster, client=dynamodb, clock=clock.now)
    cloud = SimCloud(
        spec.cluster, spec.catalog, clock.now, state.unavailable, spec.start, spec.zones, spec.region
    )
    # One launch at a time: the cloud numbers instances in launch order, so a replay is reproducible.
    config = ProvisionerConfig(
        cluster_name=spec.cluster,
        nodepools=with_packing(spec.nodepools, spec.packing),
        nodeclasses=list(spec.nodeclasses),
        launch_parallelism=1,
    )
    metrics = RecordingMetrics()
    provisioner = provisioner_for(kube, cloud, state, config, metrics, clock, provisioner_cache)
    claims = StoreClaimBook(state.nodeclaims, clock=clock.now)
    workflows = SimWorkflows(
        TerminationSteps(kube, cloud, claims, metrics=metrics, clock=clock.now), clock.now
    )
    controller = build_controller(
        kube,
        cloud,
        state,
        config,
        workflows,
        options=spec.settings,
        metrics=metrics,
        clock=clock.now,
        monotonic=clock.monotonic,
        drain_interval_seconds=DRAIN_INTERVAL_SECONDS,
        poll_seconds=POLL_SECONDS,
        cache=disruption_cache,
    )
    spot = spec.spot_interruptions > 0
    interruptions = interruption_controller(kube, cloud, state, provisioner, workflows, metrics, clock)
    return World(
        clock,
        store,
        KubeScheduler(SharedLists(store)),  # type: ignore[arg-type]
        SimKubelet(store, spec.region),
        kube,
        cloud,
        state,
        config,
        provisioner,
        workflows,
        controller,
        metrics,
        DaemonSetController(SharedLists(store)) if spec.daemonsets else None,  # type: ignore[arg-type]
        interruptions if spot else None,
    )


def interruption_controller(
    kube: KubeCluster,
    cloud: SimCloud,
    state: StateStore,
    provisioner: Provisioner,
    workflows: SimWorkflows,
    metrics: RecordingMetrics,
    clock: VirtualClock,
) -> Any:
    """The interruption function's controller (replacements through the provisioner, workflows as the
    replay's tasks), as the function builds it."""
    from fleetwright.interruption import samples
    from fleetwright.interruption.controller import InterruptionController, InterruptionSettings
    from fleetwright.interruption.replacement import ReplacementLauncher
    from fleetwright.interruption.trust import EventOrigin
    from fleetwright.state.interruptions import InterruptionRecords

    return InterruptionController(
        kube=kube,
        cloud=cloud,
        unavailable=cloud.unavailable,
        workflow=workflows,
        records=InterruptionRecords(state.table, state.cluster),
        claims=StoreClaimBook(state.nodeclaims, clock=clock.now),
        replacements=ReplacementLauncher(provisioner),
        settings=InterruptionSettings(),
        origin=EventOrigin(account=samples.ACCOUNT, region=cloud.region),  # the replay's warnings' own
        metrics=metrics,
        clock=clock.now,
    )


def daemonset_documents(paths: Sequence[str]) -> list[dict[str, Any]]:
    """The DaemonSet objects in manifest files or directories (the replay runs them on its nodes)."""
    import yaml

    from fleetwright.manifests import manifest_files

    found = []
    for path in manifest_files(list(paths)):
        with open(path, encoding="utf-8") as handle:
            for doc in yaml.safe_load_all(handle):
                if isinstance(doc, dict) and doc.get("kind") == "DaemonSet":
                    found.append(doc)
    return found
