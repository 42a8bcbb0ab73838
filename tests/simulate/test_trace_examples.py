"""The traces shipped in examples/traces/ read, have the size their README states, and the generated one
is what its documented command makes today."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetwright.local.simulate.generate import DayOptions, generate_day
from fleetwright.local.simulate.tracefile import read_trace
from fleetwright.local.simulate.tracestats import summarize

TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def _documented_row(name: str) -> list[str]:
    for line in (TRACES / "README.md").read_text().splitlines():
        if line.startswith(f"| `{name}` |"):
            return [cell.strip() for cell in line.strip("|").split("|")]
    raise AssertionError(f"{name} has no row in examples/traces/README.md")


@pytest.mark.parametrize("name", ["azure-vm-day.csv", "diurnal-day.csv"])
def test_a_shipped_trace_has_its_documented_size(name: str) -> None:
    path = TRACES / name
    summary = summarize(read_trace(path))
    _, _, pods, owners, running, peak_pods, peak_cpu, size = _documented_row(name)

    assert pods == f"{summary.pods:,} pods"
    assert owners == f"{summary.owners:,}"
    assert running == f"{summary.running_at_start:,} / {summary.running_at_end:,}"
    assert peak_pods == f"{summary.peak_pods:,}"
    assert peak_cpu == f"{summary.peak_cpu / 1000:,g} cores"
    assert size == f"{round(path.stat().st_size / 1000)} kB"
    assert path.stat().st_size < 300_000
    assert 23 * 3600 < summary.duration <= 24 * 3600


def test_the_generated_example_is_what_its_command_makes() -> None:
    readme = (TRACES / "README.md").read_text()
    command = re.search(
        r"fleetwright trace generate --pods (\d+) --seed (\d+) -o \S*diurnal-day\.csv", readme
    )
    assert command is not None

    generated = generate_day(DayOptions(pods=int(command[1]), seed=int(command[2])))

    assert read_trace(TRACES / "diurnal-day.csv") == generated
