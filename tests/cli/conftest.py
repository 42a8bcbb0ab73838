from collections.abc import Callable
from pathlib import Path

import pytest

from fleetwright.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Call ``fleetwright ARGS...`` in-process: (exit code, stdout, stderr)."""

    def call(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return call
