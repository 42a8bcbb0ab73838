"""Loading the YAML fixtures of the Karpenter model tests the way a user's files are loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fleetwright.model.errors import DocumentRef
from fleetwright.model.karpenter import ParsedKarpenter, parse_karpenter_document

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_docs(name: str) -> list[dict[str, Any]]:
    """Every document of ``tests/model/fixtures/<name>``."""
    with (FIXTURES / name).open() as handle:
        return list(yaml.safe_load_all(handle))


def parse_fixture(name: str, index: int) -> ParsedKarpenter:
    """Parse document ``index`` of a fixture file, with a reference naming the file."""
    return parse_karpenter_document(fixture_docs(name)[index], DocumentRef(f"fixtures/{name}", index))


def parse_text(text: str, index: int = 0) -> ParsedKarpenter:
    """Parse one inline YAML document as if it were document ``index`` of ``inline.yaml``."""
    return parse_karpenter_document(yaml.safe_load(text), DocumentRef("inline.yaml", index))
