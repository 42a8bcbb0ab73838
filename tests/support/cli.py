"""The command line as the tests call it: the examples directory and the type of the ``run`` fixture
(``tests/cli/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Run = Callable[..., tuple[int, str, str]]
