"""Reading Karpenter documents: NodePools and EC2NodeClasses (v1, or older versions converted to v1).

``parse_karpenter_document`` turns one decoded YAML document into models, or raises a
:class:`DocumentError` listing every problem with its field path (``spec.template.spec.requirements[0]
.operator``); unknown fields get a did-you-mean hint. Older API versions become v1 with a
:class:`DocumentWarning` that shows the v1 equivalent.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from fleetwright.model.ec2nodeclass import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    EC2NodeClass,
    KarpenterModel,
    KubeletConfiguration,
)
from fleetwright.model.errors import DocumentError, DocumentRef, DocumentWarning
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.legacy import LEGACY_KINDS, Conversion, convert_legacy
from fleetwright.model.nodepool import NODEPOOL_API_VERSION, NODEPOOL_KIND, LegacyKubelet, NodePool

__all__ = [
    "KARPENTER_KINDS",
    "EC2NodeClass",
    "LegacyKubelet",
    "NodePool",
    "ParsedKarpenter",
    "check_references",
    "is_karpenter_document",
    "kubelet_for",
    "parse_karpenter_document",
    "render_path",
    "validation_problems",
]

KARPENTER_KINDS: frozenset[tuple[str, str]] = frozenset(
    {(NODEPOOL_API_VERSION, NODEPOOL_KIND), (EC2NODECLASS_API_VERSION, EC2NODECLASS_KIND)} | LEGACY_KINDS
)
"""(apiVersion, kind) pairs Fleetwright reads, including the legacy ones it converts."""

_KARPENTER_GROUPS = ("karpenter.sh", "karpenter.k8s.aws")
_KARPENTER_KIND_NAMES = frozenset(kind for _, kind in KARPENTER_KINDS)

Problem = tuple[str, str]
ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass
class ParsedKarpenter:
    """What one document yielded (a document holds one object, so one of the lists has one entry)."""

    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    warnings: list[DocumentWarning] = field(default_factory=list)


def is_karpenter_document(doc: Mapping[str, Any]) -> bool:
    """True for documents of a Karpenter API group or of a Karpenter kind (even with a wrong apiVersion),
    so that mistakes there are reported rather than skipped."""
    api_version = doc.get("apiVersion")
    group = api_version.partition("/")[0] if isinstance(api_version, str) else ""
    return group in _KARPENTER_GROUPS or doc.get("kind") in _KARPENTER_KIND_NAMES


def parse_karpenter_document(doc: Mapping[str, Any], ref: DocumentRef) -> ParsedKarpenter:
    """Validate one Karpenter document (converting legacy versions to v1); raises DocumentError."""
    if not isinstance(doc, Mapping):
        raise DocumentError(ref, [("", f"expected a mapping, got {type(doc).__name__}")])
    ref = _named_ref(doc, ref)
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in KARPENTER_KINDS:
        raise DocumentError(ref, [_version_problem(*key)])
    if key in LEGACY_KINDS:
        return _parse_legacy(doc, ref)
    if key == (NODEPOOL_API_VERSION, NODEPOOL_KIND):
        nodepool = _validate(NodePool, doc, ref)
        return ParsedKarpenter(nodepools=[nodepool])
    return ParsedKarpenter(nodeclasses=[_validate(EC2NodeClass, doc, ref)])


def check_references(nodepools: Sequence[NodePool], nodeclasses: Sequence[EC2NodeClass]) -> list[str]:
    """Cross-document problems: a nodeClassRef to a missing EC2NodeClass, or a name defined twice."""
    problems: list[str] = []
    for kind, names in (
        ("NodePool", [n.name for n in nodepools]),
        ("EC2NodeClass", [n.name for n in nodeclasses]),
    ):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                problems.append(f"{kind} {name}: defined more than once")
            seen.add(name)
    known = {nodeclass.name for nodeclass in nodeclasses}
    for nodepool in nodepools:
        target = nodepool.node_class_name()
        if target not in known:
            problems.append(f"NodePool {nodepool.name}: nodeClassRef EC2NodeClass {target} not found")
    return problems


def kubelet_for(nodepool: NodePool, nodeclass: EC2NodeClass | None) -> KubeletOverrides:
    """The kubelet settings of ``nodepool``'s nodes: kubelet settings a legacy NodePool/Provisioner carried
    win (as Karpenter's own v1 conversion did), otherwise the node class's ``kubelet``."""
    legacy = nodepool.legacy_kubelet()
    if legacy is not None:
        raid0 = nodeclass is not None and nodeclass.kubelet_overrides().instance_store_raid0
        return dataclasses.replace(legacy.kubelet.overrides(), instance_store_raid0=raid0)
    return nodeclass.kubelet_overrides() if nodeclass is not None else KubeletOverrides()


# --- dispatch ----------------------------------------------------------------------------------------


def _named_ref(doc: Mapping[str, Any], ref: DocumentRef) -> DocumentRef:
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    kind = doc.get("kind")
    return dataclasses.replace(
        ref,
        kind=kind if isinstance(kind, str) and kind else ref.kind,
        name=name if isinstance(name, str) and name else ref.name,
    )


def _version_problem(api_version: Any, kind: Any) -> Problem:
    if not kind:
        return ("kind", "required field is missing")
    served = sorted(version for version, name in KARPENTER_KINDS if name == kind)
    if served:
        if not api_version:
            return ("apiVersion", f"required field is missing; {kind} is {served[-1]}")
        return ("apiVersion", f"{kind} is not served by {api_version}; use {' or '.join(served)}")
    return (
        "kind",
        f"{kind!r} is not a Karpenter kind Fleetwright reads; expected NodePool or EC2NodeClass "
        "(or the legacy Provisioner / AWSNodeTemplate)",
    )


def _parse_legacy(doc: Mapping[str, Any], ref: DocumentRef) -> ParsedKarpenter:
    conversion = convert_legacy(doc)
    problems = list(conversion.problems)
    model: type[NodePool] | type[EC2NodeClass] = (
        NodePool if conversion.v1_kind == NODEPOOL_KIND else EC2NodeClass
    )
    converted: NodePool | EC2NodeClass | None = None
    try:
        converted = model.model_validate(conversion.document)
    except ValidationError as exc:
        problems += _legacy_problems(exc, model, conversion, problems)
    kubelet: KubeletConfiguration | None = None
    if conversion.kubelet is not None:
        try:
            kubelet = KubeletConfiguration.model_validate(conversion.kubelet)
        except ValidationError as exc:
            problems += validation_problems(exc, KubeletConfiguration, prefix=conversion.kubelet_path)
    if problems or converted is None:
        raise DocumentError(ref, problems)
    warning = DocumentWarning(ref, conversion.render())
    if isinstance(converted, NodePool):
        if kubelet is not None:
            source = f"{conversion.api_version} {conversion.kind} {conversion.kubelet_path}"
            converted = converted.with_legacy_kubelet(LegacyKubelet(kubelet=kubelet, source=source))
        return ParsedKarpenter(nodepools=[converted], warnings=[warning])
    return ParsedKarpenter(nodeclasses=[converted], warnings=[warning])


def _legacy_problems(
    exc: ValidationError, model: type[BaseModel], conversion: Conversion, known: list[Problem]
) -> list[Problem]:
    """v1 validation problems, placed at the field of the original document; skips ones the
    conversion already reported for the same field."""
    reported = [path for path, _ in known]
    mapped = []
    for path, message in validation_problems(exc, model):
        legacy = conversion.legacy_path(path)
        if any(legacy == done or legacy.startswith((done + ".", done + "[")) for done in reported):
            continue
        mapped.append((legacy, message))
    return mapped


def _validate(model: type[ModelT], doc: Mapping[str, Any], ref: DocumentRef) -> ModelT:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise DocumentError(ref, validation_problems(exc, model)) from None


# --- pydantic errors → (field path, message) ---------------------------------------------------------

# Parts of a pydantic ``loc`` that name validator internals rather than document fields.
_INTERNAL_LOC = re.compile(r"^(\[key\]|function-\w+\[.*\]|literal\[.*\])$")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_SHOW_INPUT = (str, int, float, bool, type(None))


def render_path(loc: Sequence[int | str], prefix: str = "", model: type[BaseModel] | None = None) -> str:
    """``('spec', 'requirements', 0, 'operator')`` → ``spec.requirements[0].operator``; keys that are not
    plain names are quoted (``labels["example.com/team"]``). With ``model``, Python attribute names in
    ``loc`` are shown as their YAML names."""
    path = prefix
    for index, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        if _INTERNAL_LOC.match(part):
            continue
        owner = _model_at(model, loc[:index]) if model is not None else None
        if owner is not None and part in owner.model_fields:
            part = owner.model_fields[part].alias or part
        if _PLAIN_NAME.match(part):
            path += f".{part}" if path else part
        else:
            path += f'["{part}"]'
    return path


def validation_problems(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> list[Problem]:
    """Every error of a pydantic ValidationError as ``(field path, message)``."""
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        problems.append((render_path(loc, prefix, model), _message(error, model, loc)))
    return problems


def _message(error: Any, model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return _unknown_field(model, loc)
    if kind == "missing":
        return "required field is missing"
    message = str(error["msg"])
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if kind == "model_type":
        message = "expected a mapping"
    elif kind == "string_type" and isinstance(value, int | float | bool):
        return f"expected a string, got {value!r} (quote it in YAML)"
    if isinstance(value, _SHOW_INPUT):
        message += f" (got {value!r})"
    else:
        message += f" (got a {type(value).__name__})"
    return message


def _unknown_field(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    name = str(loc[-1])
    owner = _model_at(root, loc[:-1])
    if owner is None:
        return f"unknown field {name!r}"
    moved = owner.moved_fields.get(name) if issubclass(owner, KarpenterModel) else None
    if moved:
        return f"unknown field {name!r}: {moved}"
    known = [info.alias or attr for attr, info in owner.model_fields.items()]
    close = difflib.get_close_matches(name, known, n=1) or difflib.get_close_matches(
        name.lower(), [k.lower() for k in known], n=1
    )
    if close:
        match = next(k for k in known if k.lower() == close[0].lower())
        return f"unknown field {name!r}; did you mean {match!r}?"
    return f"unknown field {name!r}; expected one of {', '.join(known)}"


def _model_at(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class found by following ``loc`` from ``root`` (through lists, dicts and Optionals)."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if isinstance(part, int):
                return None
            found = next(
                (
                    info.annotation
                    for attr, info in current.model_fields.items()
                    if part in (attr, info.alias)
                ),
                None,
            )
            if found is None:
                if _INTERNAL_LOC.match(part):
                    continue
                return None
            current = found
        elif get_origin(current) in (list, tuple) and isinstance(part, int):
            current = get_args(current)[0]
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | None`` down to the type inside."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation
