"""Karpenter v1.14 documents: ``fleetwright validate`` accepts what Karpenter accepts and refuses the rest.

``corpus/valid`` holds documents Karpenter admits, every field of which Fleetwright acts on (so they
validate without a warning); ``corpus/invalid`` one refused document per file with
``# expect: <message fragment>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleetwright.validation import validate

CORPUS = Path(__file__).parent / "corpus"
VALID = sorted((CORPUS / "valid").glob("*.yaml"))
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
BASE_NODECLASS = CORPUS / "valid" / "00-nodeclass-default.yaml"


def _header(path: Path, tag: str) -> list[str]:
    prefix = f"# {tag}: "
    return [line[len(prefix) :].strip() for line in path.read_text().splitlines() if line.startswith(prefix)]


def test_every_valid_document_is_accepted() -> None:
    report, _, errors = validate([str(path) for path in VALID])
    assert errors == []
    documents = sum(len(list(yaml.safe_load_all(path.read_text()))) for path in VALID)
    assert len([line for line in report if line.endswith(": OK")]) == documents


@pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
def test_valid_documents_validate_without_warnings(path: Path) -> None:
    _, warnings, errors = validate(sorted({str(BASE_NODECLASS), str(path)}))
    assert errors == []
    assert warnings == []


@pytest.mark.parametrize("path", INVALID, ids=lambda path: path.stem)
def test_every_invalid_document_is_refused_with_its_message(path: Path) -> None:
    (expected,) = _header(path, "expect")
    _, _, errors = validate([str(BASE_NODECLASS), str(path)])
    assert len(errors) == 1, errors
    assert str(path) in errors[0]
    assert expected in errors[0], errors[0]


def test_the_corpus_is_not_empty() -> None:
    assert len(VALID) >= 20
    assert len(INVALID) >= 25
