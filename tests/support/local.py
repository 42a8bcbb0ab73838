"""The real kubectl against the emulator: where the binary is, the emulator's token in ``tests/local``, and
:class:`Kubectl`, what the ``kubectl`` fixture (``tests/local/conftest.py``) returns."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
TOKEN = "fleetwright-test-token"


@dataclass
class Kubectl:
    """Runs the real kubectl against the emulator through a kubeconfig in a temp dir."""

    binary: Path
    kubeconfig: Path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``kubectl --kubeconfig K ARGS``; with ``check``, a non-zero exit fails the test with its output."""
        result = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def __call__(self, *args: str) -> str:
        return self.run(*args).stdout
