"""The claim lifecycle every launcher shares: the launch lease held for a pass, claims launched (one
CreateFleet each, recorded and fenced), and launched claims followed to their node.

One :class:`ClaimLifecycle` per launcher (the provisioner, the disruption controller, the interruption
handler through the provisioner). Every write to a claim it launches is fenced by the lease
(``docs/state.md``): a launcher that lost the lease writes and launches nothing more. Claims are recorded,
with their launch deadline, before they are launched (:mod:`fleetwright.claims.launch`); a claim left
``Launching`` by a launcher that died or lost its lease counts as capacity in flight until its deadline plus
a settle grace has passed, then reconciliation adopts its instance (found by tag) or fails it
(:mod:`fleetwright.claims.reconcile`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetwright.claims.launch import Launcher
from fleetwright.claims.nodeclaim_objects import NodeClaimObjects
from fleetwright.claims.reconcile import Reconciler
from fleetwright.claims.reports import PassReport, ReconcileReport
from fleetwright.cloud.provider import LaunchCloud
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.events import EventRecorder
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.requirements import Requirements
from fleetwright.observability import metrics as obs
from fleetwright.scheduling.templates import nodepool_templates, own_reservations, with_reserved_offerings
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate
from fleetwright.state.lease import LeaseLostError, LeaseUnavailableError
from fleetwright.state.store import StateStore

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache


Listings = list[tuple[str, list[InstanceType]]]  # per node class name, the types it boots
# (listings' identities, the listings, merged catalog, accepted names and reservations per node class)
ByClass = dict[str, set[str]]
_CatalogMemo = tuple[tuple[tuple[str, tuple[int, ...]], ...], Listings, list[InstanceType], ByClass, ByClass]


def _merged_catalog(listed: Listings) -> tuple[list[InstanceType], ByClass, ByClass]:
    """The union of the node classes' types (each with every class's reserved offerings), by name, and
    per node class the names it accepts and the reservations it selects."""
    catalog: dict[str, InstanceType] = {}
    accepted: dict[str, set[str]] = {}
    reservations: dict[str, set[str]] = {}
    for name, types in listed:
        accepted[name] = {t.name for t in types}
        reservations[name] = {o.reservation_id for t in types for o in t.offerings if o.reservation_id}
        for instance_type in types:
            known = catalog.get(instance_type.name)
            catalog[instance_type.name] = with_reserved_offerings(known, instance_type)
    return sorted(catalog.values(), key=lambda t: t.name), accepted, reservations


class ClaimLifecycle:
    """Launches and follows NodeClaims for one launcher, under the cluster's launch lease.

    ``kube`` reads and updates Nodes, ``cloud`` launches and terminates instances (:class:`LaunchCloud`),
    ``state`` records claims and holds the lease. ``clock`` is monotonic (lease waits); ``wall_clock`` gives
    epoch seconds (records, the lease, launch deadlines, registration timeouts). ``holder`` names this
    launcher in the lease (default: a random id). ``cache``: the watch-fed :class:`ClusterCache` to read
    Nodes from (synced once per pass); without it each read lists them.
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: LaunchCloud,
        state: StateStore,
        config: ProvisionerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        metrics: obs.MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        spans: obs.Spans | None = None,
        holder: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        events: EventRecorder | None = None,
        cache: ClusterCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self._synced = False  # the cache was synced at the start of the pass under way
        self.cloud = cloud
        self.state = state
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.metrics = metrics or obs.NullMetrics()
        self.log = logger or logging.getLogger("fleetwright.claims")
        self.spans = spans or obs.NoSpans()
        self.holder = holder or f"launcher-{uuid.uuid4().hex[:12]}"
        self.sleep = sleep
        self._catalog_memo: _CatalogMemo | None = None  # the last catalogs() answer, with its listings
        # Per EC2NodeClass, the capacity reservations it selects (set by catalogs()).
        self.reservations_by_class: dict[str, set[str]] = {}
        # Launch failures and nominations (never breaks a pass).
        self.events = events or EventRecorder(kube.client, metrics=self.metrics, logger=self.log)
        # NodeClaim objects mirroring the claim records (when the CRD is installed).
        self.nodeclaim_objects = NodeClaimObjects(
            kube.client, clock=self.clock, metrics=self.metrics, logger=self.log, cache=cache
        )
        self.lease = state.lease(self.holder, seconds=config.lease_seconds)
        self.launching: set[str] = set()  # claims this process is launching right now
        self.run_deadline: float | None = None  # epoch seconds: the invocation's end, when it has one
        self._pass_lock = threading.RLock()
        self._lease_depth = 0  # > 0 while a pass of this launcher holds the lease
        self.launcher = Launcher(self)
        self.reconciler = Reconciler(self)

    # -- the lease ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lease_held(self, wait_until: float) -> Iterator[None]:
        """Hold the lease for a pass: take it (waiting up to ``wait_until`` on ``clock``) unless a pass of
        this launcher already holds it, and release it at the end. Raises :class:`LeaseUnavailableError`
        when another launcher keeps it."""
        with self._pass_lock:
            if self._lease_depth:
                self._lease_depth += 1
                try:
                    yield
                finally:
                    self._lease_depth -= 1
                return
            if not self._acquire(wait_until):
                raise LeaseUnavailableError(
                    f"the launch lease is held by another launcher ({self.lease.name})"
                )
            self._lease_depth = 1
            try:
                yield
            finally:
                self._lease_depth = 0
                self._release()

    def _acquire(self, deadline: float) -> bool:
        try:
            return self.lease.acquire(deadline, sleep=self.sleep, clock=self.clock)
        except Exception as error:
            self.log.error("cannot take the lease", extra={"error": str(error)})
            return False

    def _release(self) -> None:
        try:
            self.lease.release()
        except Exception as error:  # it expires by itself
            self.log.warning("cannot release the lease", extra={"error": str(error)})

    @contextlib.contextmanager
    def replacement_pass(self, deadline: float | None) -> Iterator[None]:
        """The lease for a replacement launch, waited for at most ``lease_wait_seconds`` (and not past
        ``deadline``, epoch seconds); the deadline also bounds the launch."""
        wait = self.config.lease_wait_seconds
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - self.wall_clock()))
        saved = self.run_deadline
        if deadline is not None:
            self.run_deadline = deadline if saved is None else min(saved, deadline)
        try:
            with self.lease_held(self.clock() + wait):
                yield
        except LeaseLostError as lost:
            self.metrics.add(obs.LEASE_LOST, 1)
            self.log.warning("lease lost during a replacement launch", extra={"reason": str(lost)})
            raise
        finally:
            self.run_deadline = saved

    # -- reading the cluster -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def pass_sync(self) -> Iterator[None]:
        """Sync the cache once for everything the pass reads (each step sees the cluster as of the pass's
        start or later). When the sync fails, each step syncs (and fails, and reports it) on its own."""
        if self.cache is None or self._synced:
            yield
            return
        try:
            self.cache.sync()
        except Exception as error:
            self.log.warning("cluster cache not synced", extra={"error": f"{type(error).__name__}: {error}"})
            yield
            return
        self._synced = True
        try:
            yield
        finally:
            self._synced = False

    def ensure_synced(self) -> None:
        """Sync the cache unless this pass already did (raises when it cannot be brought up to date)."""
        if self.cache is not None and not self._synced:
            self.cache.sync()

    def node_objects(self) -> list[dict[str, Any]]:
        """Every Node object: from the cache (synced), else one LIST."""
        if self.cache is None:
            return self.kube.list_nodes()
        self.ensure_synced()
        return self.cache.node_objects()

    def read_snapshot(self) -> ClusterSnapshot:
        """The cluster's pods, nodes and DaemonSets: from the cache (synced), else listed."""
        if self.cache is None:
            return read_snapshot(self.kube)
        self.ensure_synced()
        return self.cache.snapshot(sync=False)

    # -- what can be launched ----------------------------------------------------------------------------

    def catalogs(self) -> tuple[list[InstanceType], dict[str, set[str]]]:
        """The instance types the NodePools' EC2NodeClasses can boot (their union, for the scheduler)
        and, per node class, the names it accepts (a claim only launches types its node class boots).

        One provider call per node class in use; the provider caches the EC2 listings between passes.
        """
        names = sorted({np.node_class_name() for np in self.config.nodepools})
        listed = [(name, self.cloud.instance_types(self.config.nodeclass(name))) for name in names]
        # Listings are the provider's shared, frozen types: a change in one makes a new object, so the
        # same objects in the same order make the same answer (kept with them, so their ids stay theirs).
        key = tuple((name, tuple(map(id, types))) for name, types in listed)
        memo = self._catalog_memo
        if memo is None or memo[0] != key:
            memo = self._catalog_memo = (key, listed, *_merged_catalog(listed))
        _, _, catalog, accepted, reservations = memo
        self.reservations_by_class = {name: set(ids) for name, ids in reservations.items()}
        return list(catalog), {name: set(kept) for name, kept in accepted.items()}

    def templates(self, nodes: Sequence[Node] = ()) -> list[NodePoolTemplate]:
        """The NodePools as the scheduler sees them (``nodes`` count against their limits), each with its
        node class's requirements and the capacity reservations that class selects (after
        :meth:`catalogs`)."""
        return own_reservations(
            nodepool_templates(
                self.config.nodepools, self.config.nodeclasses, nodes, self._node_class_requirements()
            ),
            self.reservations_by_class,
        )

    def _node_class_requirements(self) -> dict[str, Requirements]:
        """What each node class in use adds to its NodePools' requirements (its placement group); a node
        class whose lookup fails adds nothing (its launches report why)."""
        found: dict[str, Requirements] = {}
        for name in sorted({np.node_class_name() for np in self.config.nodepools}):
            node_class = self.config.nodeclass(name)
            if node_class is None or node_class.spec.placement_group_selector is None:
                continue
            try:
                found[name] = self.cloud.node_class_requirements(node_class)
            except Exception as error:
                self.log.warning(
                    "placement group lookup failed",
                    extra={"nodeClass": name, "error": f"{type(error).__name__}: {error}"},
                )
        return found

    # -- launching ---------------------------------------------------------------------------------------

    def launch_claims(self, claims: Sequence[NewNodeClaim], *, deadline: float | None = None) -> PassReport:
        """Launch NodeClaims decided elsewhere (the disruption controller's replacements), recording and
        launching them exactly as a provisioning pass does, under the lease (waited for at most
        ``lease_wait_seconds``, and not past ``deadline``, epoch seconds, which also bounds the launches).
        Claims that could not launch are in ``PassReport.failed``; other errors are raised."""
        report = PassReport(pending=sum(len(c.pods) for c in claims))
        if claims:
            with self.replacement_pass(deadline):
                catalog, accepted = self.catalogs()
                templates = {t.name: t for t in self.templates()}
                self.launch(claims, templates, {t.name: t for t in catalog}, accepted, report)
        return report

    def launch(
        self,
        claims: Sequence[NewNodeClaim],
        templates: Mapping[str, NodePoolTemplate],
        by_name: Mapping[str, InstanceType],
        accepted: Mapping[str, set[str]],
        report: PassReport,
        *,
        nominate: bool = False,
    ) -> None:
        """Record and launch ``claims`` under the lease the caller holds (:class:`Launcher`)."""
        self.launcher.launch(claims, templates, by_name, accepted, report, nominate=nominate)

    # -- following launched claims -----------------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Match registering nodes to claims, mark them initialized, terminate claims that never
        registered, and settle claims a dead launcher left ``Launching`` (holding the lease: a pass that
        holds it already does, otherwise it is taken without waiting). Errors are reported, not raised,
        except :class:`LeaseLostError`."""
        report = ReconcileReport()
        try:
            with self.lease_held(self.clock()), self.spans.span("reconcile"):
                self.reconciler.reconcile(report)
                self.reconciler.sync_nodeclaim_objects()
        except LeaseLostError:
            raise
        except Exception as error:
            report.error = f"{type(error).__name__}: {error}"
            self.metrics.add(obs.PASS_ERRORS, 1)
            self.log.exception("reconciliation failed", extra={"error": report.error})
        return report
