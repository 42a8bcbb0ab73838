"""Fixture local to the command line tests: ``fleetwright`` run in-process."""

from __future__ import annotations

import pytest

from fleetwright.cli import main
from tests.support.cli import Run


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Call ``fleetwright ARGS...`` in-process: (exit code, stdout, stderr)."""

    def call(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return call
