"""``fleetwright validate``: check NodePool and EC2NodeClass documents, with every problem located.

Shared by the CLI, ``cdk synth`` and the Lambda functions' cold start, so all three print the same
messages.
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


def validate(paths: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Check the NodePools and EC2NodeClasses in ``paths``: ``(report lines, warnings, errors)``.

    Every document is checked, so one run shows every problem; other kinds are noted and skipped.
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
        except DocumentError as err:
            errors.append(str(err))
    errors += [f"error: {problem}" for problem in check_references(nodepools, nodeclasses)]
    return report, warnings, errors
