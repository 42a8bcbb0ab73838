"""NodePool (``karpenter.sh/v1``): which nodes Fleetwright may launch, and when it may take them away."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetwright.model import labels as wk
from fleetwright.model.cron import parse_schedule
from fleetwright.model.ec2nodeclass import (
    Duration,
    DurationOrNever,
    KarpenterDocument,
    KarpenterModel,
    KubeletConfiguration,
    NonEmptyStr,
    ObjectMeta,
    Quantity,
    check_label_key,
    check_label_value,
)
from fleetwright.model.quantity import parse_duration
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.model.resources import ResourceList, parse_resources
from fleetwright.model.taints import Taint

NODEPOOL_API_VERSION: Final = "karpenter.sh/v1"
NODEPOOL_KIND: Final = "NodePool"
NODECLASS_GROUP = "karpenter.k8s.aws"
NODECLASS_KIND = "EC2NodeClass"
DEFAULT_EXPIRE_AFTER = "720h"
DEFAULT_BUDGET_NODES = "10%"

# --- restricted label domains ------------------------------------------------------------------------

# Keys inside karpenter.k8s.aws that describe an instance type (and so may be constrained).
_AWS_ALLOWED = frozenset(
    {label for label in wk.WELL_KNOWN_LABELS if label.startswith(wk.AWS_PREFIX)}
    | {
        wk.AWS_PREFIX + "ec2nodeclass",
    }
    | wk.LAUNCH_DECIDED_LABELS
)


def restricted_label(key: str) -> str | None:
    """Why a NodePool may not use ``key`` in labels or requirements, or None when it may."""
    if key == wk.HOSTNAME:
        return f"label {key!r} is restricted: every node gets its own hostname"
    if key == wk.NODEPOOL:
        return f"label {key!r} is restricted: Fleetwright sets it to the NodePool's name"
    # Since v1.9 Karpenter leaves the kubernetes.io and k8s.io domains (node-role.kubernetes.io/...)
    # to the user; only its own domains stay restricted.
    domain = key.partition("/")[0] if "/" in key else ""
    if domain.endswith("karpenter.sh") and key != wk.CAPACITY_TYPE:
        return f"label {key!r} is restricted: in domain karpenter.sh only {wk.CAPACITY_TYPE} may be used"
    if domain.endswith("karpenter.k8s.aws") and key not in _AWS_ALLOWED:
        return (
            f"label {key!r} is restricted: in domain karpenter.k8s.aws only the well-known "
            "instance labels may be used"
        )
    return None


def _requirement_key(key: str) -> str:
    problem = check_label_key(key) or restricted_label(key)
    if problem:
        raise ValueError(problem)
    return key


def _label_value(value: str) -> str:
    problem = check_label_value(value)
    if problem:
        raise ValueError(problem)
    return value


def _at_most_100(labels: dict[str, str]) -> dict[str, str]:
    if len(labels) > 100:
        raise ValueError(f"at most 100 labels, got {len(labels)}")
    return labels


def _taint_key(key: str) -> str:
    problem = check_label_key(key)
    if problem:
        raise ValueError(problem)
    return key


def _taint_value(value: str) -> str:
    """Karpenter checks a taint value like a key (``example.com/x`` is fine); empty is allowed."""
    problem = check_label_key(value) if value else None
    if problem:
        raise ValueError(problem.replace("invalid key", "invalid value", 1))
    return value


LabelValue = Annotated[str, AfterValidator(_label_value)]
NodeLabelKey = Annotated[str, AfterValidator(_requirement_key)]

# --- template ----------------------------------------------------------------------------------------

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
_BOUND_OPERATORS = ("Gt", "Lt", "Gte", "Lte")


class NodeSelectorRequirement(KarpenterModel):
    """One ``requirements`` entry: ``key operator values`` plus Karpenter's ``minValues``."""

    key: NodeLabelKey
    operator: Operator
    values: list[LabelValue] = Field(default_factory=list, validate_default=True)
    min_values: int | None = Field(default=None, ge=1, le=50)

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str], info: ValidationInfo) -> list[str]:
        # Karpenter's CEL asks for values only with In; NotIn [] and Exists/DoesNotExist with values
        # are admitted (the values are then ignored).
        operator = info.data.get("operator")
        if operator == "In" and not values:
            raise ValueError(f"operator {operator} needs at least one value")
        if operator in _BOUND_OPERATORS and (
            len(values) != 1 or not values[0].isdigit() or not values[0].isascii()
        ):
            raise ValueError(
                f"operator {operator} needs exactly one non-negative integer value, got {values}"
            )
        return values

    @field_validator("min_values")
    @classmethod
    def _enough_values(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        values = info.data.get("values")
        operator = info.data.get("operator")
        if min_values is not None and operator == "In" and values is not None and len(values) < min_values:
            raise ValueError(f"minValues {min_values} needs at least {min_values} values, got {len(values)}")
        return min_values

    @model_validator(mode="after")
    def _known_capacity_types(self) -> NodeSelectorRequirement:
        # Karpenter keeps a NodePool from going ready when In names no capacity type it knows.
        if self.key == wk.CAPACITY_TYPE and self.operator == "In":
            known = [value for value in self.values if value in wk.CAPACITY_TYPES]
            if not known:
                raise ValueError(
                    f"no valid values in {self.values} for {wk.CAPACITY_TYPE}: "
                    f"expected {', '.join(wk.CAPACITY_TYPES)}"
                )
            if self.min_values is not None and len(known) < self.min_values:
                raise ValueError(
                    f"minValues {self.min_values} needs at least {self.min_values} valid capacity types, "
                    f"got {len(known)}"
                )
        return self


class NodeTaint(KarpenterModel):
    """A taint every node of the pool carries (or carries at startup)."""

    key: Annotated[str, AfterValidator(_taint_key)]
    value: Annotated[str, AfterValidator(_taint_value)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    time_added: str | None = None

    def taint(self) -> Taint:
        """The scheduler's view of this taint."""
        return Taint(key=self.key, effect=self.effect, value=self.value or "")


class NodeClassReference(KarpenterModel):
    """``nodeClassRef``: the EC2NodeClass the pool's nodes are launched with."""

    group: NonEmptyStr
    kind: NonEmptyStr
    name: NonEmptyStr

    @field_validator("group")
    @classmethod
    def _aws_group(cls, group: str) -> str:
        if group != NODECLASS_GROUP:
            raise ValueError(
                f"Fleetwright launches nodes only through {NODECLASS_GROUP} node classes, not {group!r}"
            )
        return group

    @field_validator("kind")
    @classmethod
    def _ec2_kind(cls, kind: str) -> str:
        if kind != NODECLASS_KIND:
            raise ValueError(f"Fleetwright launches nodes only through {NODECLASS_KIND}, not {kind!r}")
        return kind


class NodeClaimTemplateMetadata(KarpenterModel):
    """Labels and annotations every node of the pool carries."""

    labels: Annotated[dict[NodeLabelKey, LabelValue], AfterValidator(_at_most_100)] = Field(
        default_factory=dict
    )
    annotations: dict[str, str] = Field(default_factory=dict)


class NodeClaimTemplateSpec(KarpenterModel):
    """``spec.template.spec``: what every node of the pool looks like."""

    moved_fields = {
        "kubelet": "kubelet moved to the EC2NodeClass (spec.kubelet) in karpenter.sh/v1",
        "resources": "resources was removed in karpenter.sh/v1",
    }

    requirements: list[NodeSelectorRequirement] = Field(max_length=100)
    taints: list[NodeTaint] = Field(default_factory=list)
    startup_taints: list[NodeTaint] = Field(default_factory=list)
    node_class_ref: NodeClassReference
    expire_after: DurationOrNever = DEFAULT_EXPIRE_AFTER
    termination_grace_period: Duration | None = None

    @model_validator(mode="after")
    def _no_duplicate_taints(self) -> NodeClaimTemplateSpec:
        seen: set[tuple[str, str]] = set()
        for taint in [*self.taints, *self.startup_taints]:
            if (taint.key, taint.effect) in seen:
                raise ValueError(f"duplicate taint {taint.key}:{taint.effect} in taints/startupTaints")
            seen.add((taint.key, taint.effect))
        return self


class NodeClaimTemplate(KarpenterModel):
    """``spec.template``."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    spec: NodeClaimTemplateSpec


# --- disruption --------------------------------------------------------------------------------------

_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_BUDGET_DURATION = re.compile(r"^(([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?$")


def _budget_nodes(value: str) -> str:
    if not _BUDGET_NODES.match(value):
        raise ValueError(f"invalid nodes {value!r}: expected a count (5) or a percentage from 0% to 100%")
    return value


def _budget_duration(value: str) -> str:
    if not _BUDGET_DURATION.match(value):
        raise ValueError(f"invalid duration {value!r}: budgets take whole hours and minutes (10m, 1h, 1h30m)")
    return value


def _cron(value: str) -> str:
    parse_schedule(value)  # a CronError is a ValueError: pydantic reports it at the field
    return value


class Budget(KarpenterModel):
    """How many nodes may be disrupted at once, optionally only during a cron window."""

    # Required and a string, as in Karpenter's schema: `nodes: 5` (a YAML integer) is refused there too.
    nodes: Annotated[str, AfterValidator(_budget_nodes)]
    schedule: Annotated[str, AfterValidator(_cron)] | None = None
    duration: Annotated[str, AfterValidator(_budget_duration)] | None = None
    reasons: list[Literal["Empty", "Drifted", "Underutilized"]] | None = None

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration must be set together")
        return self


class Disruption(KarpenterModel):
    """``spec.disruption``: when Fleetwright may consolidate nodes, and how many at a time."""

    moved_fields = {"expireAfter": "expireAfter moved to spec.template.spec.expireAfter in karpenter.sh/v1"}

    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = (
        "WhenEmptyOrUnderutilized"
    )
    # Required once a disruption block is written (Karpenter's schema); the default block has 0s.
    consolidate_after: DurationOrNever
    budgets: list[Budget] = Field(default_factory=lambda: [Budget(nodes=DEFAULT_BUDGET_NODES)], max_length=50)

    def consolidate_after_seconds(self) -> int | None:
        """Seconds a node must stay empty/underutilized before consolidation; None for ``Never``."""
        return parse_duration(self.consolidate_after)


class NodePoolSpec(KarpenterModel):
    """``NodePool.spec``."""

    moved_fields = {
        "ttlSecondsAfterEmpty": "use spec.disruption (consolidationPolicy: WhenEmpty, consolidateAfter)",
        "ttlSecondsUntilExpired": "use spec.template.spec.expireAfter",
        "providerRef": "use spec.template.spec.nodeClassRef",
        "requirements": "requirements belong in spec.template.spec",
        "labels": "labels belong in spec.template.metadata",
        "taints": "taints belong in spec.template.spec",
    }

    template: NodeClaimTemplate
    disruption: Disruption = Field(default_factory=lambda: Disruption(consolidate_after="0s"))
    limits: dict[str, Quantity] | None = None
    weight: int | None = Field(default=None, ge=1, le=100)
    # Static capacity: keep exactly this many nodes instead of provisioning for pending pods.
    replicas: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _static_pool(self) -> NodePoolSpec:
        if self.replicas is None:
            return self
        if self.weight is not None:
            raise ValueError("weight is not supported on static NodePools (replicas set)")
        if self.limits and set(self.limits) != {"nodes"}:
            raise ValueError("only limits.nodes is supported on static NodePools (replicas set)")
        return self


@dataclass(frozen=True, slots=True)
class LegacyKubelet:
    """Kubelet settings an older NodePool/Provisioner carried itself; v1 keeps them on the node class.

    ``source`` says where they came from (``karpenter.sh/v1beta1 NodePool spec.template.spec.kubelet``).
    They apply to this NodePool's nodes and take precedence over the node class's own ``kubelet``.
    """

    kubelet: KubeletConfiguration
    source: str


PACKING_ANNOTATION = "fleetwright.io/packing"
FEWER_NODES = "FewerNodes"
LOWEST_COST = "LowestCost"
PACKING_STRATEGIES = (FEWER_NODES, LOWEST_COST)


def _packing_annotation(metadata: ObjectMeta) -> ObjectMeta:
    value = metadata.annotations.get(PACKING_ANNOTATION)
    if value is not None and value not in PACKING_STRATEGIES:
        raise ValueError(
            f"annotation {PACKING_ANNOTATION} must be one of {', '.join(PACKING_STRATEGIES)}, got {value!r}"
        )
    return metadata


class NodePool(KarpenterDocument):
    """A ``karpenter.sh/v1`` NodePool."""

    api_version: Literal["karpenter.sh/v1"] = NODEPOOL_API_VERSION
    kind: Literal["NodePool"] = NODEPOOL_KIND
    metadata: Annotated[ObjectMeta, AfterValidator(_packing_annotation)]
    spec: NodePoolSpec

    _legacy_kubelet: LegacyKubelet | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    def requirements(self) -> Requirements:
        """``spec.template.spec.requirements`` as a requirement set (with ``minValues``)."""
        return Requirements.of(
            Requirement.create(item.key, item.operator, item.values, min_values=item.min_values)
            for item in self.spec.template.spec.requirements
        )

    def labels(self) -> dict[str, str]:
        """``spec.template.metadata.labels``."""
        return dict(self.spec.template.metadata.labels)

    def annotations(self) -> dict[str, str]:
        """``spec.template.metadata.annotations`` (copied onto its NodeClaims and Nodes)."""
        return dict(self.spec.template.metadata.annotations)

    def taints(self) -> tuple[Taint, ...]:
        """``spec.template.spec.taints``."""
        return tuple(item.taint() for item in self.spec.template.spec.taints)

    def startup_taints(self) -> tuple[Taint, ...]:
        """``spec.template.spec.startupTaints``."""
        return tuple(item.taint() for item in self.spec.template.spec.startup_taints)

    def limits(self) -> ResourceList | None:
        """``spec.limits`` in integer units (cpu in milli-cores); None when the pool has no limits."""
        return parse_resources(self.spec.limits) if self.spec.limits else None

    def packing(self) -> str:
        """How claims trade node count against cost (annotation ``fleetwright.io/packing``)."""
        return self.metadata.annotations.get(PACKING_ANNOTATION, LOWEST_COST)

    def weight_value(self) -> int:
        """``spec.weight``, 0 when unset."""
        return self.spec.weight or 0

    def node_class_name(self) -> str:
        """The name of the EC2NodeClass in ``nodeClassRef``."""
        return self.spec.template.spec.node_class_ref.name

    def expire_after_seconds(self) -> int | None:
        """Node lifetime in seconds; None for ``Never``."""
        return parse_duration(self.spec.template.spec.expire_after)

    def termination_grace_period_seconds(self) -> int | None:
        """How long draining may take before pods are deleted anyway; None when unbounded."""
        period = self.spec.template.spec.termination_grace_period
        return parse_duration(period) if period else None

    def legacy_kubelet(self) -> LegacyKubelet | None:
        """Kubelet settings carried over from an older API version (see :class:`LegacyKubelet`)."""
        return self._legacy_kubelet

    def with_legacy_kubelet(self, legacy: LegacyKubelet | None) -> NodePool:
        """A copy of this NodePool carrying ``legacy`` kubelet settings."""
        copy = self.model_copy()
        copy._legacy_kubelet = legacy
        return copy
