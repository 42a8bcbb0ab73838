"""``fleetwright validate``: check NodePool and EC2NodeClass documents, with every problem located.

Shared by the CLI, ``cdk synth`` and the Lambda functions' cold start, so all three print the same
messages.

A NodePool without ``spec.limits`` gets a *note* among the report lines, not a warning: Karpenter accepts
it and many of its own examples omit limits, so it is valid and fully acted on; the note says what bounds
it instead (the cluster-wide launch-rate cap). Warnings stay for what Fleetwright does not do as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fleetwright.model.errors import DocumentError, DocumentRef


def _flatten(ref: DocumentRef, doc: Mapping[str, Any]) -> Iterator[tuple[DocumentRef, Mapping[str, Any]]]:
    """A document, or each item of a ``List`` document."""
    from fleetwright.manifests import describe

    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            if isinstance(item, Mapping):
                yield describe(item, ref), item
    else:
        yield ref, doc


def unlimited_note(name: str, limits: Any, replicas: Any) -> str | None:
    """Why the NodePool ``name`` (its ``spec.limits`` and ``spec.replicas``) launches without a bound of its
    own; None when it has limits or is static (``replicas`` bounds it)."""
    if limits or replicas is not None:
        return None
    return (
        f"NodePool {name} has no spec.limits: only the cluster-wide launch-rate cap bounds how many "
        "nodes it launches (set limits.cpu or limits.nodes to bound it)"
    )


def validate(paths: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Check the NodePools and EC2NodeClasses in ``paths``: ``(report lines, warnings, errors)``.

    Every document is checked, so one run shows every problem; other kinds are noted and skipped. Report
    lines include notes (``<document>: note: ...``), which change nothing: a NodePool without limits.
    """
    from fleetwright.manifests import manifest_files, read_documents
    from fleetwright.model.karpenter import check_references, is_karpenter_document, parse_karpenter_document

    report: list[str] = []
    warnings: list[str] = []
    errors: list[str] = []
    nodepools: list[Any] = []
    nodeclasses: list[Any] = []
    files = []
    for raw in paths:
        try:
            files += manifest_files([raw])
        except DocumentError as err:
            errors.append(str(err))
    for path in files:
        try:
            for file_ref, file_doc in read_documents(path):
                for ref, doc in _flatten(file_ref, file_doc):
                    if doc.get("kind") not in ("NodePool", "EC2NodeClass") and not is_karpenter_document(doc):
                        report.append(f"{ref.describe()}: skipped (not a NodePool or EC2NodeClass)")
                        continue
                    try:
                        parsed = parse_karpenter_document(doc, ref)
                    except DocumentError as err:
                        errors.append(str(err))
                        continue
                    nodepools += parsed.nodepools
                    nodeclasses += parsed.nodeclasses
                    warnings += [warning.render() for warning in parsed.warnings]
                    report.append(f"{ref.describe()}: OK")
                    notes = (unlimited_note(p.name, p.spec.limits, p.spec.replicas) for p in parsed.nodepools)
                    report += [f"{ref.describe()}: note: {note}" for note in notes if note]
        except DocumentError as err:
            errors.append(str(err))
    errors += [f"error: {problem}" for problem in check_references(nodepools, nodeclasses)]
    return report, warnings, errors
