"""``fleetwright simulate`` from the command line: inputs read as ``fleetwright plan`` reads them, the
table and the JSON report, errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetwright.cli import main
from tests.support.simulate import NODECLASS, nodepool

M5_LARGE = 0.096


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    pools = tmp_path / "pools.yaml"
    pools.write_text(nodepool(budget="100%") + "\n---\n" + NODECLASS)
    trace = tmp_path / "trace.csv"
    trace.write_text("name,start,end,cpu,memory\np0,5,605,1,1Gi\np1,5,605,1,1Gi\np2,5,605,1,1Gi\n")
    return pools, trace


def test_json_report_has_each_policy_and_the_lower_bound(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    assert main(["simulate", "-f", str(pools), "--trace", str(trace), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["policy"] for p in report["policies"]] == ["default", "FewerNodes", "lower bound"]
    default = report["policies"][0]
    # The trace ends at 605 s: three m5.large billed from 16 s (running) to 605 s.
    assert default["dollars"]["instances"] == pytest.approx(3 * M5_LARGE * (605 - 16) / 3600, abs=1e-6)
    # Each m5.large boots AL2023's default 20 GiB gp3 root volume, $0.08 per GiB-month (730 h).
    assert default["dollars"]["volumes"] == pytest.approx(3 * 20 * 0.08 / 730 * (605 - 16) / 3600, abs=1e-6)
    assert default["dollars"]["addresses"] == 0  # private subnets, no associatePublicIPAddress
    assert default["dollars"]["credits"] == "not modelled yet"
    assert default["launchesByType"] == {"m5.large": 3}
    assert default["podPendingSeconds"]["max"] == 46.0
    bound = report["policies"][2]
    # The bound runs the pods as the trace writes them, 5 s to 605 s, each alone on an m5.large (a
    # 1-CPU pod and its 1.93-CPU room); the replay pays less only for the 11 s its nodes started late.
    assert bound["dollars"]["instances"] == pytest.approx(3 * M5_LARGE * (605 - 5) / 3600, abs=1e-6)
    late = 3 * M5_LARGE * (16 - 5) / 3600
    assert bound["dollars"]["instances"] - late <= default["dollars"]["instances"]


def test_table_lists_the_policies_side_by_side(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    assert (
        main(["simulate", "-f", str(pools), "--trace", str(trace), "--no-bound", "--policies", "default"])
        == 0
    )
    out = capsys.readouterr().out
    assert "instance $" in out
    assert "pending p99 (s)" in out
    assert "volume $" in out
    assert "not modelled yet" in out  # CPU credits


def test_an_unknown_policy_is_a_usage_error(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    assert main(["simulate", "-f", str(pools), "--trace", str(trace), "--policies", "Cheapest"]) == 2
    assert "unknown policy Cheapest" in capsys.readouterr().err


def test_a_malformed_trace_is_a_usage_error_naming_its_line(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools, _ = files
    path = tmp_path / "bad.csv"
    path.write_text("name,start,end,cpu,memory\np0,5,10,1,1Gi\np1,50,10,1,1Gi\n")
    assert main(["simulate", "-f", str(pools), "--trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and ":3" in err, err


def test_a_missing_nodeclass_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(nodepool())
    trace = tmp_path / "trace.csv"
    trace.write_text("name,start,end,cpu,memory\np0,5,605,1,1Gi\n")
    assert main(["simulate", "-f", str(pools), "--trace", str(trace)]) == 2
    assert "EC2NodeClass" in capsys.readouterr().err


def test_policies_replayed_in_parallel_give_the_same_report(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    base = ["simulate", "-f", str(pools), "--trace", str(trace), "-o", "json", "--no-bound"]
    assert main(base) == 0
    one_by_one = json.loads(capsys.readouterr().out)
    assert main([*base, "--jobs", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == one_by_one


def test_the_json_report_divides_launches_by_the_nodes_the_bound_needed(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    args = ["simulate", "-f", str(pools), "--trace", str(trace), "-o", "json", "--policies", "default"]
    assert main(args) == 0
    default, bound = json.loads(capsys.readouterr().out)["policies"]
    # Three 1-CPU pods, one per m5.large: the bound needs 3 nodes, the replay launches 3.
    assert bound["nodesNeeded"] == 3
    assert default["launches"] == 3
    assert default["launchesPerNodeNeeded"] == 1.0


def test_plot_writes_a_png_of_both_panels(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    target = tmp_path / "day.png"
    assert main(["simulate", "-f", str(pools), "--trace", str(trace), "--plot", str(target)]) == 0
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 650)
    assert len(data) > 20_000  # two panels of lines, labels and a legend, not an empty canvas
    assert "instance $" in capsys.readouterr().out  # the table is printed as well


@pytest.mark.parametrize("where", ["missing/day.png", "."])
def test_plot_to_a_path_that_cannot_be_written_is_a_usage_error_before_the_replay(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    pools, trace = files
    target = tmp_path / where
    assert main(["simulate", "-f", str(pools), "--trace", str(trace), "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert "cannot write the plot" in captured.err
    assert captured.out == ""  # nothing replayed


def test_until_replays_the_first_seconds_of_the_trace(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools, trace = files
    base = ["simulate", "-f", str(pools), "--trace", str(trace), "-o", "json", "--policies", "default"]
    assert main([*base, "--until", "300"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["durationSeconds"] == 300
    # The three m5.large run from 16 s to the cut.
    assert report["policies"][0]["dollars"]["instances"] == pytest.approx(3 * M5_LARGE * (300 - 16) / 3600)
    assert main([*base, "--until", "0"]) == 2
    assert "positive number of seconds" in capsys.readouterr().err
