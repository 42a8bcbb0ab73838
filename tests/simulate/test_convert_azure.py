"""The Azure VM trace converter on a tiny split in the reprocessed format: sizes, lifetimes, tenants,
the chosen day's window with its warm-up, sampling, and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.local.simulate.convert_azure import AzureInput, AzureOptions, convert_azure
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import TraceError

FLAVORS = "1,0.75 a\n2,4 h\n16,112 d\n"
# bin 0: [0, 300), bin 1: [300, 600), bin 2: [600, 1200), bin 3: [1200, 1500), bin 4: [100000, 100300)
INTERVALS = "0 0\n300 1\n600 2\n900 2\n1200 3\n100000 4\n"
SIZES = "300 a,|,h,h,|,d,|\n600 a,|\n86700 h,|\n172800 a,|\n"
LIVES = "300 U0,|,C3,U4,|,U2,|\n600 U1,|\n86700 C1,|\n172800 U0,|\n"


def _split(tmp_path: Path, sizes: str = SIZES, lives: str = LIVES, flavors: str = FLAVORS) -> AzureInput:
    (tmp_path / "maps").mkdir(parents=True, exist_ok=True)
    (tmp_path / "traces").mkdir(exist_ok=True)
    (tmp_path / "maps" / "flav_map.txt").write_text(flavors)
    (tmp_path / "maps" / "v1.interval_map.txt").write_text(INTERVALS)
    (tmp_path / "traces" / "v1.fix.txt").write_text(sizes)
    (tmp_path / "traces" / "v1.fix.c180000.txt").write_text(lives)
    return AzureInput.locate(tmp_path, "fix")


def _by_name(trace: Trace) -> dict[str, TracePod]:
    return {pod.name: pod for pod in trace.pods}


def test_the_first_day_maps_sizes_lifetimes_and_tenants(tmp_path: Path) -> None:
    pods = _by_name(convert_azure(_split(tmp_path), AzureOptions(day=0, sample=1.0)))

    assert sorted(pods) == ["vm-0000001", "vm-0000002", "vm-0000003", "vm-0000004", "vm-0000005"]
    small, big = pods["vm-0000001"], pods["vm-0000004"]
    assert (small.cpu, small.memory, big.cpu, big.memory) == ("1", "768Mi", "16", "112Gi")
    assert (pods["vm-0000002"].cpu, pods["vm-0000002"].memory) == ("2", "4Gi")
    assert 0 <= small.start < 300 and small.end is not None and 60 <= small.end - small.start < 300
    assert big.end is not None and 600 <= big.end - big.start <= 1200
    assert 300 <= pods["vm-0000005"].start < 600
    assert pods["vm-0000002"].end is None  # still running when the split was cut
    assert pods["vm-0000003"].end is None  # lives past the day
    assert pods["vm-0000002"].owner == pods["vm-0000003"].owner
    assert len({pod.owner for pod in pods.values()}) == 4
    assert pods["vm-0000002"].start == pods["vm-0000003"].start


def test_a_later_day_starts_with_the_vms_still_running(tmp_path: Path) -> None:
    first = _by_name(convert_azure(_split(tmp_path), AzureOptions(day=0, sample=1.0)))
    second = convert_azure(_split(tmp_path), AzureOptions(day=1, sample=1.0))
    pods = _by_name(second)

    assert sorted(pods) == ["vm-0000002", "vm-0000003", "vm-0000006", "vm-0000007"]
    assert pods["vm-0000002"].start == 0 and pods["vm-0000002"].end is None
    long_lived = pods["vm-0000003"]
    assert long_lived.start == 0 and long_lived.end is not None
    assert long_lived.end + 86400 - first["vm-0000003"].start in range(100000, 100301)
    assert 0 <= pods["vm-0000006"].start < 300 and pods["vm-0000006"].end is None
    assert 86100 <= pods["vm-0000007"].start < 86400
    assert second.duration <= 86400


def test_the_same_seed_gives_the_same_day_and_a_smaller_sample_a_subset(tmp_path: Path) -> None:
    sizes = "300 " + "a,|,h,h,|,d,|," * 10 + "\n"
    lives = "300 " + "U0,|,C3,U4,|,U2,|," * 10 + "\n"
    source = _split(tmp_path, sizes + "90000 a,|\n", lives + "90000 U0,|\n")
    full = convert_azure(source, AzureOptions(day=0, sample=1.0, seed=3))
    half = convert_azure(source, AzureOptions(day=0, sample=0.5, seed=3))
    tenth = convert_azure(source, AzureOptions(day=0, sample=0.1, seed=3))

    assert convert_azure(source, AzureOptions(day=0, sample=0.5, seed=3)) == half
    assert all(pod in half.pods for pod in tenth.pods)
    assert all(pod in full.pods for pod in half.pods)
    assert 0 < len(tenth.pods) < len(half.pods) < len(full.pods) == 40
    assert convert_azure(source, AzureOptions(day=0, sample=1.0, seed=4)) != full


def test_a_day_past_the_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--day 2: this split has 2 whole day\(s\), 0 to 1"):
        convert_azure(_split(tmp_path), AzureOptions(day=2))
    with pytest.raises(ValueError, match="--sample 0"):
        convert_azure(_split(tmp_path), AzureOptions(sample=0.0))


def test_files_that_disagree_are_located(tmp_path: Path) -> None:
    mismatched = _split(tmp_path / "a", lives=LIVES.replace("C3,U4", "C3"))
    unknown = _split(tmp_path / "b", sizes=SIZES.replace("d,|", "z,|"))
    bad_map = _split(tmp_path / "c", flavors="1,0.75 a\nlarge h\n")

    with pytest.raises(TraceError, match=r"v1\.fix\.c180000\.txt:1: line 1 does not match line 1 of"):
        convert_azure(mismatched, AzureOptions(day=0))
    with pytest.raises(TraceError, match=r"v1\.fix\.c180000\.txt:1: unknown VM size or lifetime bin 'z'"):
        convert_azure(unknown, AzureOptions(day=0, sample=1.0))
    with pytest.raises(TraceError, match=r"flav_map\.txt:2: expected 'cores,memory_gb letter'"):
        convert_azure(bad_map, AzureOptions(day=0))


def test_a_directory_without_the_split_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"v1\.test\.txt: no such file: is .* the dataset's resources/"):
        AzureInput.locate(tmp_path, "test")
    _split(tmp_path)
    (tmp_path / "traces" / "v1.fix.c180000.txt").unlink()
    with pytest.raises(TraceError, match="no lifetime file for this split"):
        AzureInput.locate(tmp_path, "fix")


def test_a_lifetime_file_shorter_than_its_partner_is_named(tmp_path: Path) -> None:
    source = _split(tmp_path, lives="\n".join(LIVES.splitlines()[:1]) + "\n")

    with pytest.raises(TraceError, match=r"v1\.fix\.c180000\.txt: ends before v1\.fix\.txt does"):
        convert_azure(source, AzureOptions(day=0, sample=1.0))
