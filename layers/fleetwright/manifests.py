"""Loading Kubernetes and Karpenter manifests from YAML files and directories.

``load_manifests`` reads every document, converts what the scheduler uses (NodePools, EC2NodeClasses,
pods and the workloads that make them, nodes, DaemonSets) and keeps storage and disruption objects as
plain dicts. Problems in all documents are collected and raised together as one :class:`DocumentError`.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwright.model.errors import DocumentError, DocumentRef, DocumentWarning
from fleetwright.model.karpenter import (
    EC2NodeClass,
    NodePool,
    is_karpenter_document,
    parse_karpenter_document,
)
from fleetwright.model.kube import (
    WORKLOAD_KINDS,
    daemonset_pod,
    node_from_object,
    pod_from_object,
    workload_pods,
)
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.yamlload import load_all

YAML_SUFFIXES = (".yaml", ".yml")
# Files read from a directory, as ``kubectl apply -f DIR`` reads them.
MANIFEST_SUFFIXES = (*YAML_SUFFIXES, ".json")
KARPENTER_KINDS = ("NodePool", "EC2NodeClass", "Provisioner", "AWSNodeTemplate")
RAW_KINDS = {
    "PodDisruptionBudget": "pdbs",
    "PersistentVolume": "pvs",
    "PersistentVolumeClaim": "pvcs",
    "StorageClass": "storageclasses",
}
KUBE_KINDS = ("Pod", "Node", "DaemonSet", *WORKLOAD_KINDS, *RAW_KINDS, "List")
# Kinds found next to workloads in real manifests that do not change where pods can run.
IGNORED_KINDS = frozenset(
    {
        "Service",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Ingress",
        "NetworkPolicy",
        "HorizontalPodAutoscaler",
        "PriorityClass",
        "LimitRange",
        "ResourceQuota",
        "CustomResourceDefinition",
        "CronJob",
        "Event",
        "Endpoints",
        "EndpointSlice",
        "NodeClaim",
    }
)
KNOWN_KINDS = (*KARPENTER_KINDS, *KUBE_KINDS)
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(slots=True)
class Manifests:
    """Everything read from the manifests.

    ``pods`` are the pending pods (from Pod documents without ``spec.nodeName`` and from workloads);
    pods with ``spec.nodeName`` are in their node's ``pods``. ``daemonsets`` holds one pod per DaemonSet.
    """

    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    daemonsets: list[Pod] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    storageclasses: list[dict[str, Any]] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[DocumentWarning] = field(default_factory=list)


class ManifestsError(DocumentError):
    """Several documents that cannot be accepted; ``errors`` holds each one's :class:`DocumentError`."""

    def __init__(self, errors: list[DocumentError]) -> None:
        """``errors`` must not be empty; the first one gives ``ref`` and ``problems``."""
        self.errors = errors
        super().__init__(errors[0].ref, errors[0].problems)

    def render(self) -> str:
        """Every problem of every document, one per line."""
        return "\n".join(error.render() for error in getattr(self, "errors", ()))


def _claim_key(pvc: Mapping[str, Any]) -> tuple[str, str]:
    meta = pvc.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name")))


def statefulset_claims(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The PersistentVolumeClaims a StatefulSet's controller would create (``<template>-<name>-<i>``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = str(meta.get("name"))
    namespace = str(meta.get("namespace") or "default")
    replicas = spec.get("replicas", 1)
    claims = []
    for template in spec.get("volumeClaimTemplates") or []:
        template_name = str((template.get("metadata") or {}).get("name"))
        for i in range(replicas if isinstance(replicas, int) else 1):
            claims.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": f"{template_name}-{name}-{i}", "namespace": namespace},
                    "spec": dict(template.get("spec") or {}),
                }
            )
    return claims


def raise_all(errors: list[DocumentError]) -> None:
    """Raise the one error, or all of them as :class:`ManifestsError`; do nothing when there are none."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ManifestsError(errors)


def manifest_files(paths: Sequence[str]) -> list[Path]:
    """The manifest files named by ``paths``: files as given, directories searched recursively for
    ``*.yaml``, ``*.yml`` and ``*.json``, sorted.

    Hidden files and directories (``.git``) are skipped.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.suffix in MANIFEST_SUFFIXES
                and p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise DocumentError(
                    DocumentRef(str(path)), [("", "directory has no *.yaml, *.yml or *.json files")]
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise DocumentError(DocumentRef(str(path)), [("", "no such file or directory")])
    return files


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    text = f"{context}, {problem}" if context else str(problem)
    if mark is None:
        return f"invalid YAML: {text}"
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {text}"


def _json_document(path: Path, text: str) -> list[Any] | None:
    """The one document of a JSON file (``kubectl get -o json``), parsed with :mod:`json`; None when
    the text is not JSON and may be YAML (a ``.json`` file must be JSON: its error names the line)."""
    if not text.lstrip().startswith(("{", "[")) and path.suffix != ".json":
        return None
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as err:
        if path.suffix != ".json":
            return None  # YAML flow style, or malformed: the YAML parser says where
        problem = f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        raise DocumentError(DocumentRef(str(path), 0), [("", problem)]) from None


def read_documents(path: Path) -> Iterator[tuple[DocumentRef, Mapping[str, Any]]]:
    """Each non-empty document of a YAML or JSON file with its reference (kind and name filled in).

    Raises :class:`DocumentError` for an unreadable file, malformed YAML or JSON (with the line) or a
    document that is not a mapping; documents before the problem have already been yielded.
    """
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DocumentError(DocumentRef(file), [("", f"cannot read: {err}")]) from None
    parsed = _json_document(path, text)
    documents = iter(parsed) if parsed is not None else load_all(text)
    index = 0
    while True:
        # Documents are parsed one at a time, so a YAML error names the document it is in.
        try:
            doc = next(documents)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise DocumentError(DocumentRef(file, index), [("", _yaml_problem(err))]) from None
        if doc is not None:
            if not isinstance(doc, Mapping):
                problem = f"expected a Kubernetes object (a mapping with kind), got {type(doc).__name__}"
                raise DocumentError(DocumentRef(file, index), [("", problem)])
            yield describe(doc, DocumentRef(file, index)), doc
        index += 1


def describe(doc: Mapping[str, Any], ref: DocumentRef) -> DocumentRef:
    """``ref`` with the document's kind and name (``namespace/name`` when namespaced)."""
    meta = doc.get("metadata")
    name = ""
    if isinstance(meta, Mapping) and meta.get("name") is not None:
        name = str(meta["name"])
    return DocumentRef(ref.file, ref.index, str(doc.get("kind") or ""), name)


def _unknown_kind(kind: str) -> str:
    close = difflib.get_close_matches(kind, [*KNOWN_KINDS, *sorted(IGNORED_KINDS)], n=1, cutoff=0.6)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f"unknown kind {kind!r}{hint} (supported: {', '.join(KNOWN_KINDS)})"


def _prefixed(err: DocumentError, prefix: str, ref: DocumentRef) -> DocumentError:
    return DocumentError(ref, [(f"{prefix}.{path}" if path else prefix, msg) for path, msg in err.problems])


@dataclass(slots=True)
class _Builder:
    """Accumulates converted documents; pods are bound to nodes once every document is read."""

    result: Manifests = field(default_factory=Manifests)
    bound: list[tuple[DocumentRef, Pod]] = field(default_factory=list)
    claim_templates: list[dict[str, Any]] = field(default_factory=list)
    errors: list[DocumentError] = field(default_factory=list)
    seen: dict[tuple[str, str, str], DocumentRef] = field(default_factory=dict)

    def add(self, ref: DocumentRef, doc: Mapping[str, Any]) -> None:
        """Convert one document, recording its problems instead of stopping."""
        try:
            self._add(ref, doc)
        except DocumentError as err:
            self.errors.append(err)

    def _add(self, ref: DocumentRef, doc: Mapping[str, Any]) -> None:
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise DocumentError(ref, [("kind", "missing kind")])
        if kind == "List":
            items = doc.get("items")
            if not isinstance(items, list):
                raise DocumentError(ref, [("items", "a List needs a list of items")])
            for i, item in enumerate(items):
                item_ref = describe(item, ref) if isinstance(item, Mapping) else ref
                try:
                    if not isinstance(item, Mapping):
                        raise DocumentError(ref, [("", "expected a Kubernetes object (a mapping)")])
                    self._add(item_ref, item)
                except DocumentError as err:
                    self.errors.append(_prefixed(err, f"items[{i}]", item_ref))
            return
        if kind in ("NodePool", "EC2NodeClass") or is_karpenter_document(doc):
            parsed = parse_karpenter_document(doc, ref)
            for nodepool in parsed.nodepools:
                self._unique("NodePool", "", nodepool.name, ref)
            for nodeclass in parsed.nodeclasses:
                self._unique("EC2NodeClass", "", nodeclass.name, ref)
            self.result.nodepools.extend(parsed.nodepools)
            self.result.nodeclasses.extend(parsed.nodeclasses)
            self.result.warnings.extend(parsed.warnings)
        elif kind == "Pod":
            pod = pod_from_object(doc, ref)
            self._unique("Pod", pod.namespace, pod.name, ref)
            self._add_pod(ref, pod)
        elif kind in WORKLOAD_KINDS:
            for pod in workload_pods(doc, ref):
                self._unique("Pod", pod.namespace, pod.name, ref)
                self.result.pods.append(pod)
            if kind == "StatefulSet":
                self.claim_templates.extend(statefulset_claims(doc))
        elif kind == "DaemonSet":
            pod = daemonset_pod(doc, ref)
            self._unique("DaemonSet", pod.namespace, pod.name, ref)
            self.result.daemonsets.append(pod)
        elif kind == "Node":
            node = node_from_object(doc, (), ref)
            self._unique("Node", "", node.name, ref)
            self.result.nodes.append(node)
        elif kind in RAW_KINDS:
            getattr(self.result, RAW_KINDS[kind]).append(dict(doc))
        elif kind == "Namespace":
            meta = doc.get("metadata") or {}
            self.result.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})
        elif kind in IGNORED_KINDS:
            self.result.warnings.append(DocumentWarning(ref, f"{kind} does not affect scheduling; ignored"))
        else:
            raise DocumentError(ref, [("kind", _unknown_kind(kind))])

    def _unique(self, kind: str, namespace: str, name: str, ref: DocumentRef) -> None:
        key = (kind, namespace, name)
        first = self.seen.setdefault(key, ref)
        if first is not ref:
            shown = f"{namespace}/{name}" if namespace else name
            raise DocumentError(
                ref, [("metadata.name", f"duplicate {kind} {shown} (first in {first.describe()})")]
            )

    def _add_pod(self, ref: DocumentRef, pod: Pod) -> None:
        if pod.phase in FINISHED_PHASES:
            return  # a finished pod holds no resources
        if pod.node_name:
            self.bound.append((ref, pod))
        elif pod.owner is not None and pod.owner[0] == "DaemonSet":
            self.result.warnings.append(
                DocumentWarning(ref, "pending DaemonSet pod ignored; add its DaemonSet to plan for it")
            )
        else:
            self.result.pods.append(pod)

    def finish(self) -> Manifests:
        """Bind running pods to their nodes and return the manifests (or raise every problem found)."""
        raise_all(self.errors)
        # A StatefulSet's controller creates its claims from the templates; the manifests rarely hold them.
        existing = {_claim_key(pvc) for pvc in self.result.pvcs}
        self.result.pvcs.extend(c for c in self.claim_templates if _claim_key(c) not in existing)
        nodes = {node.name: node for node in self.result.nodes}
        for ref, pod in self.bound:
            node = nodes.get(pod.node_name or "")
            if node is None:
                self.result.warnings.append(
                    DocumentWarning(
                        ref, f"spec.nodeName: node {pod.node_name!r} is not in the manifests; pod ignored"
                    )
                )
            else:
                node.pods.append(pod)
        return self.result


def load_manifests(paths: Sequence[str]) -> Manifests:
    """Read YAML files and directories (recursively, ``*.yaml``/``*.yml``, sorted) into :class:`Manifests`.

    Raises :class:`DocumentError` (one or many problems, each naming file, document and field).
    """
    builder = _Builder()
    with _collector_paused():
        for path in manifest_files(paths):
            try:
                for ref, doc in read_documents(path):
                    builder.add(ref, doc)
            except DocumentError as err:
                builder.errors.append(err)
        return builder.finish()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: reading a cluster's pods allocates millions of dicts
    and lists, none of them garbage, and each full collection walks them all (it doubled the time of
    20,000 pods). Reference counting still frees what is dropped; the collector resumes afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
