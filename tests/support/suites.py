"""Which directory under ``tests/`` a test lives in: suite-wide fixtures and markers are chosen by it."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def suite(node: pytest.Item) -> str | None:
    """The directory under tests/ holding ``node`` (None for tests/'s own modules)."""
    try:
        relative = Path(node.path).resolve().relative_to(TESTS)
    except ValueError:
        return None
    return relative.parts[0] if len(relative.parts) > 1 else None
