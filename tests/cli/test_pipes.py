"""``fleetwright plan | head`` and ``fleetwright validate | head``: a reader that stops early."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import EXAMPLES

INFLATE = EXAMPLES / "inflate"


def _many_pods(tmp_path: Path) -> Path:
    """The inflate example with enough replicas that the plan outgrows a pipe's buffer."""
    folder = tmp_path / "inflate"
    folder.mkdir()
    for source in INFLATE.glob("*.yaml"):
        text = source.read_text()
        if source.name == "deployment.yaml":
            text = text.replace("replicas: 5", "replicas: 3000")
        (folder / source.name).write_text(text)
    return folder


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_closed_pipe_ends_quietly(tmp_path: Path, command: str) -> None:
    files = _many_pods(tmp_path)
    args = [sys.executable, "-m", "fleetwright.cli", command, "-f", str(files)]
    if command == "plan":
        args += ["-o", "json"]
    else:  # validate prints a line per document: repeat the documents until it outgrows the pipe
        args = args[:-2] + [a for _ in range(3000) for a in ("-f", str(files / "nodepool.yaml"))]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.read(10)
    child.stdout.close()  # like head: read a little, then go away
    err = child.stderr.read().decode()
    code = child.wait(timeout=120)
    assert first
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
