"""Where the NodePools and EC2NodeClasses come from: the cluster or the deployment's documents.

With Karpenter's CRDs installed (Karpenter's ``karpenter-crd`` chart or ``docs/crds``), users
``kubectl apply`` their ``karpenter.sh/v1`` NodePools and ``karpenter.k8s.aws/v1`` EC2NodeClasses. The
cluster wins as soon as it holds at least one NodePool: then NodePools and EC2NodeClasses come only from
it, re-read at every pass, so an apply takes effect on the next one. Otherwise (no CRDs, or no NodePool
object) the documents of the SSM parameter or bundled file are used, as before. A deployment may
configure no documents at all (NodePools managed with kubectl, Helm or Argo CD): until the cluster holds
a NodePool nothing launches, and each pass says so (an error line once, the ``NoNodePools`` metric).

Each object is checked as ``fleetwright validate`` checks a file. An invalid one is skipped, the others
keep working, and it is reported: a log line when its problem changes, a Warning Event (deduplicated
like Karpenter's: at most one every two minutes), the ``InvalidKarpenterObjects`` metric at every pass,
and its ``ValidationSucceeded`` condition
(``fleetwright.provisioning.nodepool_status``). A NodePool whose EC2NodeClass is missing or invalid is
skipped too (``NodeClassReady=False``). When the cluster cannot be read, the last NodePools read stay
in use.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube.client import JsonObject
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.errors import KubeApiError, KubeError
from fleetwright.kube.events import WARNING, Event, EventRecorder, ObjectRef
from fleetwright.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, Resource
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.nodepool import NodePool
from fleetwright.observability.metrics import MetricsSink, NullMetrics

if TYPE_CHECKING:
    from fleetwright.provisioning.nodepool_status import NodePoolStatus

SOURCE_CLUSTER: Final = "cluster"
SOURCE_CONFIGURATION: Final = "configuration"

# Warning Event on an object Fleetwright cannot use, and the condition reason that goes with it.
VALIDATION_FAILED: Final = "ValidationFailed"
# Metrics: objects skipped as invalid (dimension Kind) at each pass; reads of the cluster that failed.
INVALID_KARPENTER_OBJECTS: Final = "InvalidKarpenterObjects"
NODEPOOL_READ_ERRORS: Final = "NodePoolReadErrors"
# Metric (1 at each pass) when neither the cluster nor the deployment has a NodePool: nothing can launch.
NO_NODEPOOLS: Final = "NoNodePools"

log = logging.getLogger("fleetwright.nodepools")


@dataclass(slots=True)
class KarpenterObjects:
    """What one read found. ``nodepools``/``nodeclasses`` are the usable ones; the raw API objects
    (cluster source only) and the reasons others were skipped feed their status."""

    source: str
    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    nodepool_objects: list[JsonObject] = field(default_factory=list)
    nodeclass_objects: list[JsonObject] = field(default_factory=list)
    invalid: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) → problem
    unready_class: dict[str, str] = field(default_factory=dict)  # NodePool → why its class is unusable


def problem_text(error: DocumentError) -> str:
    """The problems of a document as one line: ``spec.x: message; spec.y: message``."""
    return "; ".join(f"{path}: {message}" if path else message for path, message in error.problems)


class NodePoolSource:
    """Keeps ``config.nodepools``/``config.nodeclasses`` current from the cluster (see the module).

    The documents ``config`` holds when the source is made are the fallback for clusters without
    NodePool objects. ``refresh`` replaces the lists (never mutates them), so every holder of ``config``
    — the provisioner, the disruption reader — sees the same NodePools. With ``status``, each refresh
    also writes the objects' status (the provisioner's source does; the disruption function's does not,
    so status is written once per provisioner pass).
    """

    def __init__(
        self,
        kube: KubeCluster,
        config: ProvisionerConfig,
        *,
        events: EventRecorder | None = None,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        status: NodePoolStatus | None = None,
    ) -> None:
        self.kube = kube
        self.status = status
        self.config = config
        self.fallback = (list(config.nodepools), list(config.nodeclasses))
        self.events = events or EventRecorder(kube.client, metrics=metrics, logger=logger)
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.source = SOURCE_CONFIGURATION
        self.last: KarpenterObjects | None = None
        self._reported: dict[tuple[str, str], str] = {}
        self._none = False  # "no NodePool" reported and not resolved since

    def refresh(self) -> KarpenterObjects | None:
        """Read the NodePools and EC2NodeClasses and put the usable ones in ``config``; what was read, or
        None when the cluster could not be read (``config`` keeps what it had). Never raises: a pass goes
        on with the NodePools it has."""
        try:
            return self._refresh()
        except Exception as error:
            self.metrics.add(NODEPOOL_READ_ERRORS, 1)
            self.log.exception(
                "reading NodePools failed; keeping the last ones read", extra={"error": str(error)}
            )
            return None

    def _refresh(self) -> KarpenterObjects | None:
        try:
            pools = self._list(NODE_POOLS)
            classes = self._list(EC2_NODE_CLASSES) if pools else None
        except KubeError as error:
            self.metrics.add(NODEPOOL_READ_ERRORS, 1)
            self.log.error(
                "cannot read NodePools from the cluster; keeping the last ones read",
                extra={"error": str(error), "source": self.source},
            )
            return None
        if pools:
            self._none = False
        read = self._from_configuration() if not pools else self._from_cluster(pools, classes or [])
        if read.source != self.source:
            self.log.info(
                "NodePools now come from the %s",
                read.source,
                extra={"source": read.source, "nodePools": [np.name for np in read.nodepools]},
            )
            self.source = read.source
        self.config.nodepools = list(read.nodepools)
        self.config.nodeclasses = list(read.nodeclasses)
        self.last = read
        if self.status is not None:
            self.status.publish(read)
        return read

    def _list(self, resource: Resource) -> list[JsonObject]:
        """Every object of ``resource``; none when its CRD is not installed (404)."""
        try:
            return list(self.kube.client.list(resource).items)
        except KubeApiError as error:
            if error.not_found:
                return []
            raise

    def _from_configuration(self) -> KarpenterObjects:
        nodepools, nodeclasses = self.fallback
        self._report({}, {})
        if not nodepools:
            self._no_nodepools()
        else:
            self._none = False
        return KarpenterObjects(SOURCE_CONFIGURATION, list(nodepools), list(nodeclasses))

    def _no_nodepools(self) -> None:
        """Neither the cluster nor the deployment holds a NodePool (a kubectl-only deployment before
        its first apply): the metric at every pass, the error line once until a NodePool appears."""
        self.metrics.add(NO_NODEPOOLS, 1)
        if not self._none:
            self.log.error(
                "no NodePool: the cluster holds none and the deployment configures none; nothing will be "
                "launched until one is applied (kubectl apply -f nodepool.yaml)",
                extra={"source": SOURCE_CLUSTER},
            )
        self._none = True

    def _from_cluster(self, pools: list[JsonObject], classes: list[JsonObject]) -> KarpenterObjects:
        from fleetwright.model.karpenter import parse_karpenter_document

        read = KarpenterObjects(SOURCE_CLUSTER, nodepool_objects=pools, nodeclass_objects=classes)
        parsed_pools: list[NodePool] = []
        objects: dict[tuple[str, str], JsonObject] = {}
        for index, obj in enumerate([*classes, *pools]):
            kind = str(obj.get("kind") or "")
            name = str((obj.get("metadata") or {}).get("name") or "")
            objects[(kind, name)] = obj
            try:
                parsed = parse_karpenter_document(obj, DocumentRef("cluster", index, kind, name))
            except DocumentError as error:
                read.invalid[(kind, name)] = problem_text(error)
                continue
            read.nodeclasses += parsed.nodeclasses
            parsed_pools += parsed.nodepools
        usable_classes = {nc.name for nc in read.nodeclasses}
        for nodepool in parsed_pools:
            target = nodepool.node_class_name()
            if target in usable_classes:
                read.nodepools.append(nodepool)
            elif ("EC2NodeClass", target) in read.invalid:
                read.unready_class[nodepool.name] = f"EC2NodeClass {target} is invalid"
            else:
                read.unready_class[nodepool.name] = f"EC2NodeClass {target} not found"
        self._report(read.invalid, objects)
        for kind in ("NodePool", "EC2NodeClass"):
            count = sum(1 for k, _ in read.invalid if k == kind)
            self.metrics.add(INVALID_KARPENTER_OBJECTS, count, dimensions={"Kind": kind})
        return read

    def _report(
        self, invalid: Mapping[tuple[str, str], str], objects: Mapping[tuple[str, str], JsonObject]
    ) -> None:
        """A log line for each object whose problem is new or changed, and (from the source that writes
        status, the provisioner's) a Warning Event for each, which the recorder deduplicates."""
        for key, problem in invalid.items():
            if self.status is not None:
                obj = objects[key]
                api_version = str(obj.get("apiVersion") or "")
                self.events.publish(
                    Event(
                        ObjectRef.of(obj, kind=key[0], api_version=api_version),
                        VALIDATION_FAILED,
                        problem,
                        type=WARNING,
                        dedupe_values=(key[0], key[1], problem),
                    )
                )
            if self._reported.get(key) != problem:
                self.log.warning(
                    "%s %s is invalid and ignored: %s",
                    key[0],
                    key[1],
                    problem,
                    extra={"kind": key[0], "object": key[1], "problem": problem},
                )
        self._reported = dict(invalid)
