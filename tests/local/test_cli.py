"""``fleetwright local apiserver`` as a user runs it: a foreground process kubectl can talk to."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.local import KUBECTL


def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwright.cli",
            "local",
            "apiserver",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("Kubernetes API emulator listening on http://127.0.0.1:")
        assert process.stdout.readline().strip() == f"kubeconfig written to {kubeconfig}"

        namespaces = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        assert "namespace/default" in namespaces

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
