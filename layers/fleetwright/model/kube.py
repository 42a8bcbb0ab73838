"""Kubernetes API objects (plain dicts, from YAML or API-server JSON) converted into the scheduler's model.

Pure functions, no I/O: the manifest loader and the Kubernetes adapter both call them. Unknown fields are
ignored (these are real API objects with many fields the scheduler does not use); fields the scheduler
does use are checked, and every problem raises :class:`DocumentError` naming its field path.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.labels import HOSTNAME
from fleetwright.model.node import Node
from fleetwright.model.pod import (
    HostPort,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    PreferredTerm,
    TopologySpreadConstraint,
)
from fleetwright.model.quantity import PODS, QuantityError, parse_resource
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.resources import ResourceList, add, maximum
from fleetwright.model.taints import EFFECTS, NO_EXECUTE, NO_SCHEDULE, Taint, Toleration

KubeObject = Mapping[str, Any]

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
TOLERATION_OPERATORS = ("Equal", "Exists")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
TEMPLATE_PREFIX = "spec.template."
STATEFULSET_POD_NAME = "statefulset.kubernetes.io/pod-name"

# Tolerations the DaemonSet controller adds to every pod it creates, so DaemonSet pods keep running on
# nodes with these condition taints.
DAEMONSET_TOLERATIONS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", NO_EXECUTE),
    ("node.kubernetes.io/unreachable", NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/unschedulable", NO_SCHEDULE),
)


def object_ref(obj: KubeObject, file: str = "<object>") -> DocumentRef:
    """A reference naming an object by kind and ``namespace/name`` (for objects not read from a file)."""
    meta = obj.get("metadata")
    name = ""
    if isinstance(meta, Mapping):
        name = str(meta.get("name") or "")
        if meta.get("namespace"):
            name = f"{meta['namespace']}/{name}"
    return DocumentRef(file=file, kind=str(obj.get("kind") or ""), name=name)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"


class _Reader:
    """Reads fields of one object, collecting every problem with its path instead of stopping at one."""

    def __init__(self, ref: DocumentRef) -> None:
        self.ref = ref
        self.problems: list[tuple[str, str]] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise DocumentError(self.ref, self.problems)

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if type(value) is dict:  # JSON objects: skip the slower abstract-class check
            return value
        if value is None:
            return {}
        if isinstance(value, Mapping):
            return value
        self.fail(path, f"expected a mapping, got {_type_name(value)}")
        return {}

    def sequence(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self.fail(path, f"expected a list, got {_type_name(value)}")
        return []

    def string(self, value: Any, path: str, default: str = "") -> str:
        if value is None:
            return default
        if isinstance(value, str):
            return value
        # YAML turns unquoted 80 into an int; the API server would have read the same digits as text.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        self.fail(path, f"expected a string, got {_type_name(value)} (quote it in YAML)")
        return default

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        return {str(k): self.string(v, _join(path, str(k))) for k, v in self.mapping(value, path).items()}

    def string_list(self, value: Any, path: str) -> list[str]:
        return [self.string(v, f"{path}[{i}]") for i, v in enumerate(self.sequence(value, path))]

    def integer(self, value: Any, path: str, default: int, minimum: int | None = None) -> int:
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(path, f"expected an integer, got {_type_name(value)}")
            return default
        if minimum is not None and value < minimum:
            self.fail(path, f"must be at least {minimum}, got {value}")
            return default
        return value

    def optional_integer(self, value: Any, path: str, minimum: int | None = None) -> int | None:
        return None if value is None else self.integer(value, path, 0, minimum)

    def choice(self, value: Any, path: str, choices: Sequence[str], default: str) -> str:
        text = self.string(value, path, default)
        if text not in choices:
            self.fail(path, f"unknown value {text!r}; expected one of {', '.join(choices)}")
            return default
        return text

    def resources(self, value: Any, path: str) -> ResourceList:
        result: ResourceList = {}
        for name, raw in self.mapping(value, path).items():
            field_path = _join(path, str(name))
            try:
                amount = parse_resource(str(name), raw)
            except QuantityError as err:
                self.fail(field_path, str(err))
                continue
            if amount < 0:
                self.fail(field_path, f"must not be negative, got {raw!r}")
                continue
            result[str(name)] = amount
        return result


def _metadata(r: _Reader, obj: KubeObject) -> tuple[Mapping[str, Any], str, str]:
    """The metadata mapping, the name (required) and the namespace (``default`` when absent)."""
    meta = r.mapping(obj.get("metadata"), "metadata")
    name = r.string(meta.get("name"), "metadata.name")
    if not name:
        r.fail("metadata.name", "missing name")
    namespace = r.string(meta.get("namespace"), "metadata.namespace") or "default"
    return meta, name, namespace


# --- Pods ------------------------------------------------------------------------------------------------


def _container_requests(r: _Reader, container: Mapping[str, Any], path: str) -> ResourceList:
    resources = r.mapping(container.get("resources"), _join(path, "resources"))
    requests = r.resources(resources.get("requests"), _join(path, "resources.requests"))
    limits = r.resources(resources.get("limits"), _join(path, "resources.limits"))
    # The API server defaults a missing request to the limit of the same resource.
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _containers(r: _Reader, spec: Mapping[str, Any], key: str) -> list[tuple[str, Mapping[str, Any]]]:
    items = []
    for i, raw in enumerate(r.sequence(spec.get(key), f"spec.{key}")):
        path = f"spec.{key}[{i}]"
        items.append((path, r.mapping(raw, path)))
    return items


def _pod_requests(r: _Reader, spec: Mapping[str, Any]) -> ResourceList:
    """Kubernetes' effective pod request (the rule since 1.29, with restartable sidecar init containers)."""
    containers = _containers(r, spec, "containers")
    if not spec.get("containers"):
        r.fail("spec.containers", "a pod needs at least one container")
    running = add(*(_container_requests(r, c, path) for path, c in containers))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for path, container in _containers(r, spec, "initContainers"):
        requests = _container_requests(r, container, path)
        policy = r.string(container.get("restartPolicy"), _join(path, "restartPolicy"))
        if policy == "Always":
            # A sidecar keeps running beside later init containers and beside the app containers.
            sidecars = add(sidecars, requests)
            running = add(running, requests)
            during_init = sidecars
        else:
            # An ordinary init container runs alone, beside the sidecars started before it.
            during_init = add(requests, sidecars)
        init_peak = maximum([init_peak, during_init])
    overhead = r.resources(spec.get("overhead"), "spec.overhead")
    total = add(maximum([running, init_peak]), overhead)
    total[PODS] = 1
    return total


def _values(r: _Reader, expr: Mapping[str, Any], path: str, operator: str) -> list[str]:
    values = r.string_list(expr.get("values"), _join(path, "values"))
    if operator in ("In", "NotIn") and not values:
        r.fail(_join(path, "values"), f"operator {operator} needs at least one value")
    elif operator in ("Exists", "DoesNotExist") and values:
        r.fail(_join(path, "values"), f"operator {operator} takes no values")
    return values


def _requirement(
    r: _Reader, raw: Any, path: str, operators: Sequence[str], key: str | None = None
) -> Requirement | None:
    expr = r.mapping(raw, path)
    if key is None:
        key = r.string(expr.get("key"), _join(path, "key"))
        if not key:
            r.fail(_join(path, "key"), "missing key")
            return None
    operator = r.string(expr.get("operator"), _join(path, "operator"))
    if operator not in operators:
        r.fail(
            _join(path, "operator"), f"unknown operator {operator!r}; expected one of {', '.join(operators)}"
        )
        return None
    values = _values(r, expr, path, operator)
    try:
        return Requirement.create(key, operator, values)
    except ValueError as err:
        r.fail(_join(path, "values"), str(err))
        return None


def _expressions(r: _Reader, raw: Any, path: str, operators: Sequence[str]) -> list[Requirement]:
    found = (_requirement(r, e, f"{path}[{i}]", operators) for i, e in enumerate(r.sequence(raw, path)))
    return [req for req in found if req is not None]


def _node_selector_term(r: _Reader, raw: Any, path: str) -> Requirements | None:
    """One ``nodeSelectorTerm`` (its expressions ANDed); None for an empty term, which matches no node."""
    term = r.mapping(raw, path)
    reqs = _expressions(
        r, term.get("matchExpressions"), _join(path, "matchExpressions"), NODE_SELECTOR_OPERATORS
    )
    fields_path = _join(path, "matchFields")
    for i, raw_field in enumerate(r.sequence(term.get("matchFields"), fields_path)):
        field_path = f"{fields_path}[{i}]"
        field_key = r.string(r.mapping(raw_field, field_path).get("key"), _join(field_path, "key"))
        if field_key != "metadata.name":
            r.fail(_join(field_path, "key"), f"unsupported field {field_key!r}; only metadata.name is")
            continue
        # A node's name is its hostname label on EKS, the only field Kubernetes lets pods select on.
        req = _requirement(r, raw_field, field_path, ("In", "NotIn"), key=HOSTNAME)
        if req is not None:
            reqs.append(req)
    if not term.get("matchExpressions") and not term.get("matchFields"):
        return None
    return Requirements.of(reqs)


# An empty nodeSelectorTerm matches no node: a requirement no label value satisfies.
_MATCHES_NOTHING = Requirements.of([Requirement(HOSTNAME, False)])


def _node_affinity(
    r: _Reader, affinity: Mapping[str, Any]
) -> tuple[tuple[Requirements, ...], tuple[PreferredTerm, ...]]:
    base = "spec.affinity.nodeAffinity"
    node_affinity = r.mapping(affinity.get("nodeAffinity"), base)
    required: list[Requirements] = []
    required_path = _join(base, "requiredDuringSchedulingIgnoredDuringExecution")
    raw_required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        terms_path = _join(required_path, "nodeSelectorTerms")
        raw_terms = r.sequence(r.mapping(raw_required, required_path).get("nodeSelectorTerms"), terms_path)
        if not raw_terms:
            r.fail(terms_path, "needs at least one node selector term")
        for i, raw_term in enumerate(raw_terms):
            term = _node_selector_term(r, raw_term, f"{terms_path}[{i}]")
            if term is not None:
                required.append(term)
        if raw_terms and not required:
            required.append(_MATCHES_NOTHING)
    preferred: list[PreferredTerm] = []
    preferred_path = _join(base, "preferredDuringSchedulingIgnoredDuringExecution")
    for i, raw in enumerate(
        r.sequence(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        path = f"{preferred_path}[{i}]"
        item = r.mapping(raw, path)
        weight = r.integer(item.get("weight"), _join(path, "weight"), 1, minimum=1)
        term = _node_selector_term(r, item.get("preference"), _join(path, "preference"))
        if term is not None:
            preferred.append(PreferredTerm(weight, term))
    return tuple(required), tuple(preferred)


def _label_selector(r: _Reader, raw: Any, path: str) -> LabelSelector | None:
    """A label selector; None when absent (which selects nothing, unlike ``{}`` which selects all)."""
    if raw is None:
        return None
    selector = r.mapping(raw, path)
    labels = r.string_map(selector.get("matchLabels"), _join(path, "matchLabels"))
    exprs = _expressions(
        r, selector.get("matchExpressions"), _join(path, "matchExpressions"), LABEL_SELECTOR_OPERATORS
    )
    return LabelSelector(tuple(sorted(labels.items())), Requirements.of(exprs))


def _pod_affinity_term(
    r: _Reader, raw: Any, path: str, namespace: str, weight: int | None = None
) -> PodAffinityTerm:
    term = r.mapping(raw, path)
    topology_key = r.string(term.get("topologyKey"), _join(path, "topologyKey"))
    if not topology_key:
        r.fail(_join(path, "topologyKey"), "missing topologyKey")
    namespaces = tuple(r.string_list(term.get("namespaces"), _join(path, "namespaces")))
    namespace_selector = _label_selector(r, term.get("namespaceSelector"), _join(path, "namespaceSelector"))
    if not namespaces and namespace_selector is None:
        # Kubernetes: no namespaces and no namespaceSelector means the pod's own namespace.
        namespaces = (namespace,)
    return PodAffinityTerm(
        topology_key=topology_key,
        label_selector=_label_selector(r, term.get("labelSelector"), _join(path, "labelSelector")),
        namespaces=namespaces,
        namespace_selector=namespace_selector,
        weight=weight,
    )


def _pod_affinity(
    r: _Reader, affinity: Mapping[str, Any], key: str, namespace: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
    base = f"spec.affinity.{key}"
    section = r.mapping(affinity.get(key), base)
    required_path = _join(base, "requiredDuringSchedulingIgnoredDuringExecution")
    required = tuple(
        _pod_affinity_term(r, raw, f"{required_path}[{i}]", namespace)
        for i, raw in enumerate(
            r.sequence(section.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path)
        )
    )
    preferred_path = _join(base, "preferredDuringSchedulingIgnoredDuringExecution")
    preferred = []
    for i, raw in enumerate(
        r.sequence(section.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        path = f"{preferred_path}[{i}]"
        item = r.mapping(raw, path)
        weight = r.integer(item.get("weight"), _join(path, "weight"), 1, minimum=1)
        preferred.append(
            _pod_affinity_term(
                r, item.get("podAffinityTerm"), _join(path, "podAffinityTerm"), namespace, weight
            )
        )
    return required, tuple(preferred)


def _tolerations(r: _Reader, raw: Any) -> tuple[Toleration, ...]:
    result = []
    for i, item_raw in enumerate(r.sequence(raw, "spec.tolerations")):
        path = f"spec.tolerations[{i}]"
        item = r.mapping(item_raw, path)
        key = r.string(item.get("key"), _join(path, "key"))
        operator = r.choice(item.get("operator"), _join(path, "operator"), TOLERATION_OPERATORS, "Equal")
        value = r.string(item.get("value"), _join(path, "value"))
        effect = r.string(item.get("effect"), _join(path, "effect"))
        if effect and effect not in EFFECTS:
            r.fail(_join(path, "effect"), f"unknown effect {effect!r}; expected one of {', '.join(EFFECTS)}")
        if operator == "Exists" and value:
            r.fail(_join(path, "value"), "must be empty when operator is Exists")
        if not key and operator != "Exists":
            r.fail(_join(path, "operator"), "must be Exists when key is empty")
        seconds = r.optional_integer(item.get("tolerationSeconds"), _join(path, "tolerationSeconds"))
        result.append(Toleration(key, operator, value, effect, seconds))
    return tuple(result)


def _taints(r: _Reader, raw: Any, path: str) -> tuple[Taint, ...]:
    result = []
    for i, item_raw in enumerate(r.sequence(raw, path)):
        item_path = f"{path}[{i}]"
        item = r.mapping(item_raw, item_path)
        key = r.string(item.get("key"), _join(item_path, "key"))
        if not key:
            r.fail(_join(item_path, "key"), "missing key")
        effect = r.choice(item.get("effect"), _join(item_path, "effect"), EFFECTS, NO_SCHEDULE)
        result.append(Taint(key, effect, r.string(item.get("value"), _join(item_path, "value"))))
    return tuple(result)


def _host_ports(r: _Reader, spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    host_network = spec.get("hostNetwork") is True
    ports: list[HostPort] = []
    for key in ("initContainers", "containers"):
        for path, container in _containers(r, spec, key):
            for i, raw in enumerate(r.sequence(container.get("ports"), _join(path, "ports"))):
                port_path = f"{path}.ports[{i}]"
                port = r.mapping(raw, port_path)
                host_port = r.integer(port.get("hostPort"), _join(port_path, "hostPort"), 0, minimum=0)
                if host_network and not host_port:
                    # With hostNetwork every container port is bound on the node.
                    host_port = r.integer(port.get("containerPort"), _join(port_path, "containerPort"), 0)
                if not host_port:
                    continue
                protocol = r.string(port.get("protocol"), _join(port_path, "protocol"), "TCP")
                host_ip = r.string(port.get("hostIP"), _join(port_path, "hostIP")) or "0.0.0.0"
                ports.append(HostPort(host_port, protocol, host_ip))
    return tuple(ports)


def _topology_spread(r: _Reader, raw: Any) -> tuple[TopologySpreadConstraint, ...]:
    result = []
    for i, item_raw in enumerate(r.sequence(raw, "spec.topologySpreadConstraints")):
        path = f"spec.topologySpreadConstraints[{i}]"
        item = r.mapping(item_raw, path)
        topology_key = r.string(item.get("topologyKey"), _join(path, "topologyKey"))
        if not topology_key:
            r.fail(_join(path, "topologyKey"), "missing topologyKey")
        if item.get("whenUnsatisfiable") is None:
            r.fail(
                _join(path, "whenUnsatisfiable"), f"missing; expected one of {', '.join(WHEN_UNSATISFIABLE)}"
            )
        result.append(
            TopologySpreadConstraint(
                topology_key=topology_key,
                max_skew=r.integer(item.get("maxSkew"), _join(path, "maxSkew"), 1, minimum=1),
                when_unsatisfiable=r.choice(
                    item.get("whenUnsatisfiable"),
                    _join(path, "whenUnsatisfiable"),
                    WHEN_UNSATISFIABLE,
                    "DoNotSchedule",
                ),
                label_selector=_label_selector(r, item.get("labelSelector"), _join(path, "labelSelector")),
                min_domains=r.optional_integer(item.get("minDomains"), _join(path, "minDomains"), minimum=1),
                match_label_keys=tuple(
                    r.string_list(item.get("matchLabelKeys"), _join(path, "matchLabelKeys"))
                ),
                node_affinity_policy=r.choice(
                    item.get("nodeAffinityPolicy"),
                    _join(path, "nodeAffinityPolicy"),
                    INCLUSION_POLICIES,
                    "Honor",
                ),
                node_taints_policy=r.choice(
                    item.get("nodeTaintsPolicy"),
                    _join(path, "nodeTaintsPolicy"),
                    INCLUSION_POLICIES,
                    "Ignore",
                ),
            )
        )
    return tuple(result)


def _volume_claims(r: _Reader, spec: Mapping[str, Any], pod_name: str) -> tuple[str, ...]:
    claims = []
    for i, raw in enumerate(r.sequence(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{i}]"
        volume = r.mapping(raw, path)
        if volume.get("persistentVolumeClaim") is not None:
            source = r.mapping(volume["persistentVolumeClaim"], _join(path, "persistentVolumeClaim"))
            claim = r.string(source.get("claimName"), _join(path, "persistentVolumeClaim.claimName"))
            if not claim:
                r.fail(_join(path, "persistentVolumeClaim.claimName"), "missing claimName")
            claims.append(claim)
        elif volume.get("ephemeral") is not None:
            # A generic ephemeral volume is backed by a PVC named <pod>-<volume>.
            claims.append(f"{pod_name}-{r.string(volume.get('name'), _join(path, 'name'))}")
    return tuple(claims)


def _owner(r: _Reader, meta: Mapping[str, Any]) -> tuple[str, str] | None:
    for i, raw in enumerate(r.sequence(meta.get("ownerReferences"), "metadata.ownerReferences")):
        path = f"metadata.ownerReferences[{i}]"
        ref = r.mapping(raw, path)
        if ref.get("controller") is True:
            return r.string(ref.get("kind"), _join(path, "kind")), r.string(
                ref.get("name"), _join(path, "name")
            )
    return None


def pod_from_object(obj: KubeObject, ref: DocumentRef | None = None) -> Pod:
    """Convert a ``v1/Pod`` object into the scheduler's :class:`Pod` (raises :class:`DocumentError`)."""
    r = _Reader(ref or object_ref(obj))
    meta, name, namespace = _metadata(r, obj)
    spec = r.mapping(obj.get("spec"), "spec")
    status = r.mapping(obj.get("status"), "status")
    affinity = r.mapping(spec.get("affinity"), "spec.affinity")
    required, preferred = _node_affinity(r, affinity)
    pod_affinity, preferred_pod_affinity = _pod_affinity(r, affinity, "podAffinity", namespace)
    anti_affinity, preferred_anti_affinity = _pod_affinity(r, affinity, "podAntiAffinity", namespace)
    pod = Pod(
        namespace=namespace,
        name=name,
        requests=_pod_requests(r, spec),
        labels=r.string_map(meta.get("labels"), "metadata.labels"),
        annotations=r.string_map(meta.get("annotations"), "metadata.annotations"),
        uid=r.string(meta.get("uid"), "metadata.uid"),
        node_selector=Requirements.from_labels(r.string_map(spec.get("nodeSelector"), "spec.nodeSelector")),
        required_affinity=required,
        preferred_affinity=preferred,
        tolerations=_tolerations(r, spec.get("tolerations")),
        host_ports=_host_ports(r, spec),
        topology_spread=_topology_spread(r, spec.get("topologySpreadConstraints")),
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti_affinity,
        preferred_pod_affinity=preferred_pod_affinity,
        preferred_pod_anti_affinity=preferred_anti_affinity,
        volume_claims=_volume_claims(r, spec, name),
        node_name=r.string(spec.get("nodeName"), "spec.nodeName") or None,
        owner=_owner(r, meta),
        priority=r.integer(spec.get("priority"), "spec.priority", 0),
        phase=r.string(status.get("phase"), "status.phase", "Pending") or "Pending",
        started_at=start_time(status.get("startTime")),
    )
    r.raise_if_any()
    return pod


def start_time(value: Any) -> float | None:
    """``status.startTime`` as epoch seconds (None when absent or unreadable: the pod counts as not
    started, which keeps a do-not-disrupt duration in force)."""
    if isinstance(value, datetime):
        return value.timestamp()
    return timestamp(value) if isinstance(value, str) else None


def timestamp(value: Any) -> float | None:
    """An RFC 3339 time (or a datetime, as YAML reads an unquoted timestamp) as epoch seconds, a time
    without a zone taken as UTC; None when absent or unreadable."""
    if not value:
        return None
    try:
        moment = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else moment.replace(tzinfo=UTC).timestamp()


# --- Nodes -----------------------------------------------------------------------------------------------


def node_from_object(obj: KubeObject, pods: Sequence[Pod] = (), ref: DocumentRef | None = None) -> Node:
    """Convert a ``v1/Node`` object (and the pods bound to it) into the scheduler's :class:`Node`.

    ``allocatable`` falls back to ``capacity`` when absent. A node without a ``Ready`` condition (e.g. a
    hand-written manifest) counts as ready; one whose ``Ready`` condition is not ``True`` does not.
    """
    r = _Reader(ref or object_ref(obj))
    meta, name, _ = _metadata(r, obj)
    spec = r.mapping(obj.get("spec"), "spec")
    status = r.mapping(obj.get("status"), "status")
    capacity = r.resources(status.get("capacity"), "status.capacity")
    allocatable = r.resources(status.get("allocatable"), "status.allocatable") or dict(capacity)
    if status.get("allocatable") is None and status.get("capacity") is None:
        r.fail("status.allocatable", "a node needs status.allocatable (or status.capacity)")
    ready = True
    for i, raw in enumerate(r.sequence(status.get("conditions"), "status.conditions")):
        condition = r.mapping(raw, f"status.conditions[{i}]")
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    node = Node(
        name=name,
        labels=r.string_map(meta.get("labels"), "metadata.labels"),
        allocatable=allocatable,
        taints=_taints(r, spec.get("taints"), "spec.taints"),
        capacity=capacity,
        # A Node being deleted takes no new pods, cordoned yet or not (its termination drains it).
        unschedulable=spec.get("unschedulable") is True or bool(meta.get("deletionTimestamp")),
        pods=list(pods),
        provider_id=r.string(spec.get("providerID"), "spec.providerID"),
        ready=ready,
    )
    r.raise_if_any()
    return node


# --- Workloads -------------------------------------------------------------------------------------------


def _with_prefix(err: DocumentError, prefix: str, ref: DocumentRef) -> DocumentError:
    """The same problems, located inside an enclosing object (e.g. a Deployment's pod template)."""
    return DocumentError(
        ref, [(prefix + path if path else prefix.rstrip("."), msg) for path, msg in err.problems]
    )


def _template(r: _Reader, obj: KubeObject) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The pod template's metadata and spec."""
    spec = r.mapping(obj.get("spec"), "spec")
    template = r.mapping(spec.get("template"), "spec.template")
    if not template:
        r.fail("spec.template", "missing pod template")
    template_meta = r.mapping(template.get("metadata"), "spec.template.metadata")
    # Only the shape is checked here; the values are checked when the pods are converted.
    r.mapping(template_meta.get("labels"), "spec.template.metadata.labels")
    r.mapping(template_meta.get("annotations"), "spec.template.metadata.annotations")
    template_spec = r.mapping(template.get("spec"), "spec.template.spec")
    return template_meta, template_spec


def _replica_count(r: _Reader, obj: KubeObject) -> int:
    spec = r.mapping(obj.get("spec"), "spec")
    if obj.get("kind") != "Job":
        return r.integer(spec.get("replicas"), "spec.replicas", 1, minimum=0)
    parallelism = r.integer(spec.get("parallelism"), "spec.parallelism", 1, minimum=0)
    completions = r.optional_integer(spec.get("completions"), "spec.completions", minimum=0)
    # A Job never runs more pods at once than it still needs completions.
    return parallelism if completions is None else min(parallelism, completions)


def _owner_reference(obj: KubeObject, name: str) -> dict[str, Any]:
    meta = obj.get("metadata")
    owner: dict[str, Any] = {
        "apiVersion": str(obj.get("apiVersion") or ""),
        "kind": str(obj.get("kind") or ""),
        "name": name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if isinstance(meta, Mapping) and meta.get("uid"):
        owner["uid"] = str(meta["uid"])
    return owner


@dataclass(frozen=True, slots=True)
class _Workload:
    """A workload's fields that shape its pods (already checked)."""

    name: str
    namespace: str
    count: int
    template_meta: Mapping[str, Any]
    template_spec: Mapping[str, Any]
    claim_templates: tuple[str, ...]
    owner: dict[str, Any]


def _read_workload(obj: KubeObject, ref: DocumentRef) -> _Workload:
    r = _Reader(ref)
    kind = obj.get("kind")
    if kind not in WORKLOAD_KINDS:
        r.fail("kind", f"expected one of {', '.join(WORKLOAD_KINDS)}, got {kind!r}")
    _, name, namespace = _metadata(r, obj)
    template_meta, template_spec = _template(r, obj)
    count = _replica_count(r, obj)
    claim_templates = []
    if kind == "StatefulSet":
        vct_path = "spec.volumeClaimTemplates"
        spec = r.mapping(obj.get("spec"), "spec")
        for i, raw in enumerate(r.sequence(spec.get("volumeClaimTemplates"), vct_path)):
            vct_meta = r.mapping(
                r.mapping(raw, f"{vct_path}[{i}]").get("metadata"), f"{vct_path}[{i}].metadata"
            )
            claim_templates.append(r.string(vct_meta.get("name"), f"{vct_path}[{i}].metadata.name"))
    r.raise_if_any()
    return _Workload(
        name,
        namespace,
        count,
        template_meta,
        template_spec,
        tuple(claim_templates),
        _owner_reference(obj, name),
    )


def _kept_volumes(w: _Workload) -> list[Any]:
    """The template's volumes, less those a StatefulSet's claim templates replace."""
    volumes = w.template_spec.get("volumes")
    if not isinstance(volumes, list):
        return []
    return [v for v in volumes if not (isinstance(v, Mapping) and v.get("name") in w.claim_templates)]


def _pod_object(w: _Workload, index: int) -> dict[str, Any]:
    pod_name = f"{w.name}-{index}"
    labels = dict(w.template_meta.get("labels") or {})
    spec = copy.deepcopy(dict(w.template_spec))
    if w.claim_templates:
        labels[STATEFULSET_POD_NAME] = pod_name
        spec["volumes"] = copy.deepcopy(_kept_volumes(w)) + [
            {"name": vct, "persistentVolumeClaim": {"claimName": f"{vct}-{pod_name}"}}
            for vct in w.claim_templates
        ]
    meta: dict[str, Any] = {
        "name": pod_name,
        "namespace": w.namespace,
        "labels": labels,
        "ownerReferences": [dict(w.owner)],
    }
    if w.template_meta.get("annotations"):
        meta["annotations"] = dict(w.template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def expand_workload(obj: KubeObject, ref: DocumentRef | None = None) -> list[dict[str, Any]]:
    """The pod objects a Deployment, ReplicaSet, StatefulSet (``replicas``) or Job (``parallelism``) runs.

    Pods are named ``<name>-<i>`` (i from 0) in the workload's namespace, carry the template's labels and
    an owner reference to the workload. A StatefulSet's ``volumeClaimTemplates`` become per-pod claims
    ``<template>-<name>-<i>``, as the StatefulSet controller names them.
    """
    workload = _read_workload(obj, ref or object_ref(obj))
    return [_pod_object(workload, i) for i in range(workload.count)]


def _volume_claims_of(w: _Workload, pod_name: str) -> tuple[str, ...]:
    """What :func:`_volume_claims` finds in the pod object :func:`_pod_object` builds (volumes checked)."""
    claims = []
    for volume in _kept_volumes(w):
        if volume.get("persistentVolumeClaim") is not None:
            claims.append(str(volume["persistentVolumeClaim"]["claimName"]))
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod_name}-{volume.get('name')}")
    return (*claims, *(f"{vct}-{pod_name}" for vct in w.claim_templates))


def workload_pods(obj: KubeObject, ref: DocumentRef | None = None) -> list[Pod]:
    """The scheduler pods of a workload: the pods of :func:`expand_workload`, converted.

    Problems in the pod template are reported at their path in the workload (``spec.template.spec...``).
    """
    ref = ref or object_ref(obj)
    workload = _read_workload(obj, ref)
    if workload.count == 0:
        return []
    try:
        first = pod_from_object(_pod_object(workload, 0), ref)
    except DocumentError as err:
        raise _with_prefix(err, TEMPLATE_PREFIX, ref) from None
    pods = [first]
    # Replicas differ only in name (and what derives from it): copy the first rather than convert each.
    for i in range(1, workload.count):
        pod_name = f"{workload.name}-{i}"
        labels = dict(first.labels)
        if workload.claim_templates:
            labels[STATEFULSET_POD_NAME] = pod_name
        pods.append(
            dataclasses.replace(
                first,
                name=pod_name,
                labels=labels,
                annotations=dict(first.annotations),
                requests=dict(first.requests),
                volume_claims=_volume_claims_of(workload, pod_name),
            )
        )
    return pods


def daemonset_pod(obj: KubeObject, ref: DocumentRef | None = None) -> Pod:
    """A DaemonSet's pod template as a pod named after the DaemonSet and owned by it.

    The tolerations the DaemonSet controller adds to its pods (node condition taints) are added too.
    """
    ref = ref or object_ref(obj)
    r = _Reader(ref)
    if obj.get("kind") not in (None, "DaemonSet"):
        r.fail("kind", f"expected DaemonSet, got {obj.get('kind')!r}")
    _, name, namespace = _metadata(r, obj)
    template_meta, template_spec = _template(r, obj)
    r.raise_if_any()
    spec = copy.deepcopy(dict(template_spec))
    # A malformed tolerations field is left alone for pod_from_object to report.
    if isinstance(spec.get("tolerations"), list | None):
        tolerations = list(spec.get("tolerations") or [])
        present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, Mapping)}
        tolerations += [
            {"key": key, "operator": "Exists", "effect": effect}
            for key, effect in DAEMONSET_TOLERATIONS
            if (key, effect) not in present
        ]
        spec["tolerations"] = tolerations
    pod_obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [_owner_reference({**obj, "kind": "DaemonSet"}, name)],
        },
        "spec": spec,
    }
    try:
        return pod_from_object(pod_obj, ref)
    except DocumentError as err:
        raise _with_prefix(err, TEMPLATE_PREFIX, ref) from None
