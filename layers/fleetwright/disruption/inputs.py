"""Reading the cluster into a :class:`DisruptionInput`: Kubernetes (nodes, pods, DaemonSets, PDBs), the
state table (NodeClaims, "empty since" markers), EC2 (the nodes' instances, current AMIs) and the catalog.

Only nodes whose instance carries this cluster's ownership tag keep their ``karpenter.sh/nodepool`` label
here: a node launched by someone else (Karpenter itself, during a migration) receives pods in the
simulation but is never a candidate, since Fleetwright could not terminate it anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetwright.claims.records import in_flight_node, offering_price
from fleetwright.claims.registration import EPHEMERAL_TAINTS, instance_id_of, is_initialized
from fleetwright.claims.starting import scheduling_node
from fleetwright.claims.terms import recorded_terms
from fleetwright.cloud.instances import Instance
from fleetwright.cloud.provider import InstanceReader
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.emptiness import is_empty
from fleetwright.disruption.podevents import update_pod_events
from fleetwright.disruption.types import DisruptionInput, DisruptionSettings, NodeState, Pdb
from fleetwright.kube.cluster import DISRUPTED_TAINT, KubeCluster
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.hashes import UNVERSIONED, nodeclass_hashes, nodepool_hashes
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.pod import LabelSelector, Pod
from fleetwright.model.requirements import requirements_from_expressions
from fleetwright.model.volumes import volume_requirements
from fleetwright.state.emptiness import EmptinessStore
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.state.podevents import PodSetMarker
from fleetwright.state.store import StateStore

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

log = logging.getLogger(__name__)

LIVE_INSTANCE_STATES = frozenset({"pending", "running"})

Catalogs = Callable[[], tuple[list[InstanceType], dict[str, set[str]]]]


@dataclass(slots=True)
class Gathered:
    """One reading of the cluster: the planner's input, plus what execution needs that the planner does
    not (the Node objects and NodeClaim records), and what could not be read."""

    input: DisruptionInput
    node_objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    claims: dict[str, NodeClaimRecord] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def ours(self) -> list[NodeState]:
        """The nodes Fleetwright launched (they carry a NodePool label here)."""
        return [n for n in self.input.nodes if n.nodepool]


def _parse_time(text: Any) -> float | None:
    if not text:
        return None
    try:
        moment = (
            text if isinstance(text, datetime) else datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        )
    except ValueError:
        return None
    return moment.timestamp()


def pdb_from_object(obj: Mapping[str, Any]) -> Pdb:
    """A PodDisruptionBudget object as the planner's :class:`Pdb` (``status.disruptionsAllowed``: 0 until
    the disruption controller of the API server has computed it)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    raw = spec.get("selector") or {}
    selector = LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items())),
        requirements_from_expressions(raw.get("matchExpressions") or []),
    )
    allowed = int((obj.get("status") or {}).get("disruptionsAllowed") or 0)
    return Pdb(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), selector, allowed)


def read_pdbs(kube: KubeCluster, objects: Iterable[Mapping[str, Any]] | None = None) -> list[Pdb]:
    """Every PodDisruptionBudget with a selector (one without selects no pod): ``objects`` when given
    (the cluster cache's), else listed."""
    found = kube.list_pdbs() if objects is None else objects
    return [pdb_from_object(o) for o in found if (o.get("spec") or {}).get("selector") is not None]


def node_initialized(obj: Mapping[str, Any], record: NodeClaimRecord | None) -> bool:
    """The claim says Initialized, or the Node is Ready without its startup or not-ready taints and, for
    a claim of ours, with every extended resource its pods requested registered (``is_initialized``)."""
    if record is not None:
        return record.status == ClaimStatus.INITIALIZED or is_initialized(obj, record)
    conditions = (obj.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return False
    return not any(t.get("key") in EPHEMERAL_TAINTS for t in (obj.get("spec") or {}).get("taints") or [])


def node_conditions(obj: Mapping[str, Any]) -> dict[str, tuple[str, float | None]]:
    """The Node's status conditions: type → (status, lastTransitionTime as epoch seconds or None)."""
    found: dict[str, tuple[str, float | None]] = {}
    for condition in (obj.get("status") or {}).get("conditions") or []:
        kind = condition.get("type")
        if kind:
            found[str(kind)] = (
                str(condition.get("status") or ""),
                _parse_time(condition.get("lastTransitionTime")),
            )
    return found


def being_disrupted(obj: Mapping[str, Any]) -> bool:
    """The Node carries ``karpenter.sh/disrupted`` (a termination workflow cordoned it) or is being
    deleted."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return any(
        t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == DISRUPTED_TAINT["effect"]
        for t in (obj.get("spec") or {}).get("taints") or []
    )


def update_empty_since(
    store: EmptinessStore,
    nodes: Sequence[NodeState],
    now: float,
    *,
    initialized_at: Mapping[str, float] | None = None,
    logger: logging.Logger | Any = None,
) -> dict[str, float]:
    """Keep the "empty since" markers in step with ``nodes`` and return node name → empty since.

    An initialized node of ours holding no pod that would need a new home keeps the first time it was
    seen so (never earlier than its initialization); one that holds such a pod again, or is gone, loses
    its marker. Nodes being disrupted keep theirs untouched.
    """
    say = logger or log
    initialized_at = initialized_at or {}
    markers = store.list()
    present = {n.name for n in nodes}
    since: dict[str, float] = {}
    for state in nodes:
        if not state.nodepool or state.terminating:
            continue
        marker = markers.get(state.name)
        if not state.initialized or state.node.in_flight or not is_empty(state.node):
            if marker is not None:
                store.clear(state.name)
                say.debug("node holds pods again", extra={"node": state.name})
            continue
        if marker is not None and marker.instance_id == state.instance_id:
            since[state.name] = max(marker.since, initialized_at.get(state.name, 0.0))
        elif store.mark(state.name, now, state.instance_id):
            since[state.name] = now
            say.info("node is empty", extra={"node": state.name, "instanceId": state.instance_id})
        else:  # another pass marked it between our read and write: its time stands
            found = store.get(state.name)
            since[state.name] = found.since if found is not None else now
    for name in markers.keys() - present:
        store.clear(name)
    return since


def _launch_fields(record: NodeClaimRecord | None) -> dict[str, Any]:
    """What the node's claim recorded at launch: its drift hashes (and their version) and its own
    expireAfter and terminationGracePeriod (none for a node without a claim, or a claim recorded before)."""
    if record is None:
        return {}
    return {
        "nodepool_hash": record.nodepool_hash,
        "nodeclass_hash": record.nodeclass_hash,
        "hash_version": record.hash_version or UNVERSIONED,
        "terms": recorded_terms(record),
    }


def unreadable_terms(records: Iterable[NodeClaimRecord]) -> list[str]:
    """A problem line for each active claim whose copied expireAfter or terminationGracePeriod does not
    parse (its NodePool's current ones apply instead)."""
    return [
        f"claim {r.id}: expireAfter {r.expire_after!r} / terminationGracePeriod "
        f"{r.termination_grace_period!r} unreadable; its NodePool's apply"
        for r in records
        if r.active and r.expire_after and recorded_terms(r) is None
    ]


class InputReader:
    """Builds the planner's input for one cluster.

    ``catalogs`` returns the instance types the NodePools' node classes can boot (the claim lifecycle's
    :meth:`~fleetwright.claims.lifecycle.ClaimLifecycle.catalogs`); ``amis`` the AMI ids a node class
    selects now (None: no AMI drift is reported); ``subnets``/``security_groups`` likewise the subnet and
    security-group ids (None: no such drift); ``class_reservations`` the capacity reservations each node
    class selects, as of the last ``catalogs`` call (None: no reservation drift). ``clock`` gives epoch
    seconds. ``cache``: the
    watch-fed :class:`ClusterCache` to read nodes, pods, DaemonSets and PDBs from (synced at each read);
    without it each read lists them.
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: InstanceReader,
        state: StateStore,
        config: ProvisionerConfig,
        *,
        catalogs: Catalogs,
        amis: Callable[[EC2NodeClass], set[str]] | None = None,
        reservations: Callable[[Sequence[str]], dict[str, float]] | None = None,
        subnets: Callable[[EC2NodeClass], set[str]] | None = None,
        security_groups: Callable[[EC2NodeClass], set[str]] | None = None,
        class_reservations: Callable[[], Mapping[str, set[str]]] | None = None,
        settings: DisruptionSettings | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | Any = None,
        cache: ClusterCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.cloud = cloud
        self.state = state
        self.config = config
        self.catalogs = catalogs
        self.amis = amis
        self.reservations = reservations
        self.subnets = subnets
        self.security_groups = security_groups
        self.class_reservations = class_reservations
        self.settings = settings or DisruptionSettings()
        self.clock = clock
        self.log = logger or log
        self._podsets: dict[str, PodSetMarker] | None = None  # as this invocation's first read left them

    def read(self, *, track_emptiness: bool = True) -> Gathered:
        """Read everything and update the "empty since" markers (unless ``track_emptiness`` is False, as in
        an invocation's later rounds) and the pod-set markers (always: a pod that left a node during this
        invocation restarts its clock; later rounds start from the markers the first one left)."""
        now = self.clock()
        snapshot, node_objects, pdb_objects = self._cluster()
        problems = [p.render() for p in snapshot.errors]
        objects: dict[str, Mapping[str, Any]] = {
            str((o.get("metadata") or {}).get("name") or ""): o for o in node_objects
        }
        records = self.state.nodeclaims.list()
        catalog, bootable = self.catalogs()
        by_type = {t.name: t for t in catalog}
        states, initialized_at = self._node_states(snapshot, objects, records, by_type, now)
        problems.extend(unreadable_terms(records))
        self._mark_empty(states, initialized_at, now, track_emptiness)
        self._podsets = update_pod_events(
            self.state.podsets,
            states,
            now,
            initialized_at=initialized_at,
            logger=self.log,
            known=None if track_emptiness else self._podsets,
        )
        registered = {instance_id_of(n.provider_id) for n in snapshot.nodes}
        inp = DisruptionInput(
            nodes=states,
            nodepools=list(self.config.nodepools),
            nodeclasses=list(self.config.nodeclasses),
            instance_types=catalog,
            now=now,
            daemonsets=list(snapshot.daemonsets),
            pending=list(snapshot.pending_pods),
            pdbs=read_pdbs(self.kube, pdb_objects),
            in_flight=[
                in_flight_node(r, by_type)
                for r in records
                if r.in_flight and not (r.instance_id and r.instance_id in registered)
            ],
            volumes=self._volumes(states),
            amis=self._per_class(self.amis, "AMIs", problems),
            subnets=self._per_class(self.subnets, "subnets", problems),
            security_groups=self._per_class(self.security_groups, "security groups", problems),
            nodepool_hashes=nodepool_hashes(self.config.nodepools),
            nodeclass_hashes=nodeclass_hashes(self.config.nodeclasses),
            settings=self.settings,
            expiring_reservations=self._expiring(states, problems),
            bootable=bootable,
            reservations=self._selected_reservations(),
        )
        return Gathered(inp, objects, {r.id: r for r in records}, problems)

    def _selected_reservations(self) -> dict[str, set[str]]:
        """Per node class, the capacity reservations it selects now, when known: a class without
        ``capacityReservationSelectorTerms`` selects none; one with terms that resolved to none this pass
        is left out (EC2 may not have answered), so no node of it drifts for its reservation."""
        if self.class_reservations is None:
            return {}
        selected = self.class_reservations()
        known: dict[str, set[str]] = {}
        for node_class in self.config.nodeclasses:
            ids = set(selected.get(node_class.name, ()))
            if ids or not node_class.spec.capacity_reservation_selector_terms:
                known[node_class.name] = ids
        return known

    def _cluster(self) -> tuple[ClusterSnapshot, list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The snapshot, the Node objects and the PDB objects (None: read_pdbs lists them)."""
        if self.cache is None:
            return read_snapshot(self.kube), self.kube.list_nodes(), None
        # One sync: nodes, pods and PDBs as of this pass or later, all from the same cache state (the sync
        # of the step before in this pass when nothing has been written since).
        self.cache.sync(reuse=True)
        snapshot = self.cache.snapshot(sync=False)
        return snapshot, self.cache.node_objects(), self.cache.pdb_objects()

    def _node_states(
        self,
        snapshot: ClusterSnapshot,
        objects: Mapping[str, Mapping[str, Any]],
        records: Sequence[NodeClaimRecord],
        by_type: Mapping[str, InstanceType],
        now: float,
    ) -> tuple[list[NodeState], dict[str, float]]:
        """Each Node's state (its instance described, its claim found by instance id or by the instance's
        claim tag), and when each node's claim was initialized."""
        claims = {r.id: r for r in records}
        by_instance = {r.instance_id: r for r in records if r.instance_id}
        instance_ids = [i for i in (instance_id_of(n.provider_id) for n in snapshot.nodes) if i]
        instances = self.cloud.describe(instance_ids) if instance_ids else {}
        states: list[NodeState] = []
        initialized_at: dict[str, float] = {}
        for node in snapshot.nodes:
            instance_id = instance_id_of(node.provider_id)
            instance = instances.get(instance_id)
            record = by_instance.get(instance_id)
            tagged_claim = str(getattr(instance, "nodeclaim", "") or "")
            if record is None and tagged_claim:
                record = claims.get(tagged_claim)
            obj = objects.get(node.name, {})
            states.append(self._node_state(node, obj, instance, record, by_type, now, snapshot.daemonsets))
            if record is not None and record.initialized_at:
                initialized_at[node.name] = float(record.initialized_at)
        return states, initialized_at

    def _mark_empty(
        self, states: Sequence[NodeState], initialized_at: Mapping[str, float], now: float, track: bool
    ) -> None:
        """Set each state's ``empty_since``: from the markers kept in step with ``states`` when ``track``,
        else from the markers as they are."""
        if track:
            empty = update_empty_since(
                self.state.emptiness, states, now, initialized_at=initialized_at, logger=self.log
            )
        else:
            empty = {name: m.since for name, m in self.state.emptiness.list().items()}
        for node_state in states:
            node_state.empty_since = empty.get(node_state.name)

    def _expiring(self, states: Sequence[NodeState], problems: list[str]) -> dict[str, float]:
        """Capacity Blocks our nodes run in that end soon (none asked when no node runs in one)."""
        ids = sorted(
            {
                s.node.labels[wk.CAPACITY_RESERVATION_ID]
                for s in states
                if s.nodepool
                and s.node.labels.get(wk.CAPACITY_RESERVATION_TYPE) == "capacity-block"
                and s.node.labels.get(wk.CAPACITY_RESERVATION_ID)
            }
        )
        if not ids or self.reservations is None:
            return {}
        try:
            return self.reservations(ids)
        except Exception as error:  # no expiry this pass; the next pass asks again
            problems.append(f"cannot read capacity reservations {', '.join(ids)}: {error}")
            return {}

    def _node_state(
        self,
        node: Node,
        obj: Mapping[str, Any],
        instance: Instance | None,
        record: NodeClaimRecord | None,
        by_type: Mapping[str, InstanceType],
        now: float,
        daemonsets: Sequence[Pod] = (),
    ) -> NodeState:
        meta = obj.get("metadata") or {}
        # A node still starting keeps its pods and takes others despite its not-ready and startup taints.
        node = scheduling_node(node, record, daemonsets)
        labels = node.labels
        ours = instance is not None
        if not ours and wk.NODEPOOL in labels:
            # Launched by someone else: it may receive pods, but is nobody's candidate here.
            node = replace(node, labels={k: v for k, v in labels.items() if k != wk.NODEPOOL})
            labels = node.labels
        instance_type = str(getattr(instance, "instance_type", "") or labels.get(wk.INSTANCE_TYPE, ""))
        zone = str(getattr(instance, "zone", "") or labels.get(wk.ZONE, ""))
        capacity_type = str(
            getattr(instance, "capacity_type", "") or labels.get(wk.CAPACITY_TYPE, wk.ON_DEMAND)
        )
        price = offering_price(by_type, instance_type, zone, capacity_type)
        if price is None and record is not None:
            price = record.price if record.price is not None else record.expected_price
        created = (
            _parse_time(getattr(instance, "launch_time", ""))
            or _parse_time(meta.get("creationTimestamp"))
            or (record.launched_at if record is not None else None)
            or now
        )
        terminating = being_disrupted(obj) or (
            ours
            and (
                str(getattr(instance, "state", "running")) not in LIVE_INSTANCE_STATES
                or (record is not None and record.status == ClaimStatus.TERMINATED)
            )
        )
        return NodeState(
            node=node,
            instance_type=instance_type,
            capacity_type=capacity_type,
            zone=zone,
            price=float(price or 0.0),
            created_at=float(created),
            initialized=node_initialized(obj, record),
            terminating=bool(terminating),
            annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
            claim_id=record.id if record is not None else str(getattr(instance, "nodeclaim", "") or ""),
            instance_id=str(getattr(instance, "id", "") or instance_id_of(node.provider_id)),
            image_id=str(getattr(instance, "image_id", "") or ""),
            **_launch_fields(record),
            subnet_id=str(getattr(instance, "subnet_id", "") or ""),
            security_group_ids=frozenset(getattr(instance, "security_group_ids", ()) or ()),
            conditions=node_conditions(obj),
        )

    def _volumes(self, states: Sequence[NodeState]) -> dict[str, Any]:
        if not any(p.volume_claims for s in states if s.nodepool for p in s.node.pods):
            return {}
        return dict(
            volume_requirements(self.kube.list_pvcs(), self.kube.list_pvs(), self.kube.list_storage_classes())
        )

    def _per_class(
        self, resolve: Callable[[EC2NodeClass], set[str]] | None, what: str, problems: list[str]
    ) -> dict[str, set[str]]:
        """``resolve`` for each EC2NodeClass a NodePool uses; a class that fails is left out (no such drift
        for it this pass) and named in ``problems``."""
        if resolve is None:
            return {}
        used = {np.node_class_name() for np in self.config.nodepools}
        found: dict[str, set[str]] = {}
        for node_class in self.config.nodeclasses:
            if node_class.name not in used:
                continue
            try:
                found[node_class.name] = resolve(node_class)
            except Exception as error:
                problems.append(f"EC2NodeClass {node_class.name}: cannot resolve {what}: {error}")
        return found
