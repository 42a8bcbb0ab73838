"""``fleetwright trace ...`` as a user runs it: files written, figures shown, bad input refused with a
located message and exit code 2."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import fleetwright.cli
from fleetwright.cli import COMMANDS_GROUP
from fleetwright.local.simulate.tracecli import add_cli, main
from fleetwright.local.simulate.tracefile import read_trace
from tests.simulate.test_convert_azure import _split


def test_generate_writes_the_day(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "day.csv"

    code = main(["generate", "--pods", "300", "--seed", "4", "--gpu-jobs", "2", "-o", str(out)])

    assert code == 0
    trace = read_trace(out)
    assert len(trace.pods) == 300
    assert len({pod.owner for pod in trace.pods if pod.gpu}) == 2
    assert f"wrote 300 pods over {trace.duration / 3600:.2f} h to {out}" in capsys.readouterr().err


def test_generate_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--pods", "100", "-o", "-"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "name,start,end,cpu,memory,gpu,owner,namespace,labels"
    assert len(lines) == 101


def test_generate_refuses_a_bad_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "day.csv"

    assert main(["generate", "--pods", "5", "-o", str(out)]) == 2
    assert "error: --pods 5: generate at least 100 pods" in capsys.readouterr().err
    assert not out.exists()


def test_convert_azure_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _split(tmp_path / "resources")
    out = tmp_path / "azure.csv"

    code = main(["convert-azure", str(tmp_path / "resources"), "--split", "fix", "--day", "0"])
    assert code == 2  # -o is required
    code = main(
        [
            "convert-azure",
            str(tmp_path / "resources"),
            "--split",
            "fix",
            "--day",
            "0",
            "--sample",
            "1",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    assert len(read_trace(out).pods) == 5
    capsys.readouterr()

    assert main(["info", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "pods            5 (4 owners)" in shown
    assert "running         0 at the start, 2 at the end" in shown


def test_convert_azure_refuses_a_missing_day(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _split(tmp_path / "resources")

    code = main(["convert-azure", str(tmp_path / "resources"), "--split", "fix", "--day", "9", "-o", "x.csv"])

    assert code == 2
    assert "error: --day 9: this split has 2 whole day(s), 0 to 1" in capsys.readouterr().err


def test_info_locates_a_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("name,start,end,cpu,memory\na,0,,1,1Gi\nb,9,3,1,1Gi\n")

    assert main(["info", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == f"{bad}:3: column 3 (end): end 3 is before start 9"


def test_the_commands_join_the_fleetwright_command_line() -> None:
    parser = argparse.ArgumentParser(prog="fleetwright")
    add_cli(parser.add_subparsers(dest="command"))

    args = parser.parse_args(["trace", "generate", "--pods", "500", "-o", "x.csv"])

    assert (args.command, args.trace_command, args.pods, args.seed) == ("trace", "generate", 500, 1)


def test_runs_as_a_module(tmp_path: Path) -> None:
    out = tmp_path / "day.csv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwright.local.simulate.tracecli",
            "generate",
            "--pods",
            "100",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert len(read_trace(out).pods) == 100


def test_the_package_declares_the_commands_entry_point() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"]["fleetwright.commands"]

    assert declared["simulate-trace"] == "fleetwright.local.simulate.tracecli:add_cli"


def test_the_fleetwright_command_line_loads_them_from_the_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = EntryPoint("simulate-trace", "fleetwright.local.simulate.tracecli:add_cli", COMMANDS_GROUP)
    monkeypatch.setattr(
        fleetwright.cli, "entry_points", lambda group: [declared] if group == COMMANDS_GROUP else []
    )
    out = tmp_path / "day.csv"

    assert fleetwright.cli.main(["trace", "generate", "--pods", "100", "-o", str(out)]) == 0
    assert len(read_trace(out).pods) == 100
