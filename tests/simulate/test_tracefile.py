"""The trace CSV format: what a user writes reads back as pods, and every malformed file fails with one
line naming the file, the line and the column."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import TraceError, make_trace, read_trace, write_trace

HEADER = "name,start,end,cpu,memory,gpu,owner,namespace,labels\n"


def _file(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> str:
    path = _file(tmp_path, text)
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    return str(caught.value).replace(str(path), "trace.csv")


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    pods = [
        TracePod("web-1", 0.0, 3600.0, "250m", "512Mi", 0, "web", "shop", {"app": "web", "tier": "front"}),
        TracePod("web-2", 12.5, None, "250m", "512Mi", 0, "web", "shop", {"app": "web", "tier": "front"}),
        TracePod("train-0", 30.0, 7200.25, "8", "61Gi", 4, "train", "ml", {"example.com/team": "ml"}),
        TracePod("lonely", 1.0 / 3.0, None, "1.5", "1G"),
    ]
    trace = make_trace(pods)
    path = tmp_path / "out.csv"
    write_trace(trace, path)

    again = read_trace(path)

    assert again == trace
    assert [pod.name for pod in again.pods] == ["web-1", "lonely", "web-2", "train-0"]
    assert again.duration == 7200.25


def test_minimal_columns_in_any_order_take_the_defaults(tmp_path: Path) -> None:
    path = _file(tmp_path, "memory,cpu,name,end,start\n1Gi,500m,b,,20\n2Gi,1,a,10,5\n\n")

    trace = read_trace(path)

    assert trace == Trace(
        pods=(TracePod("a", 5.0, 10.0, "1", "2Gi"), TracePod("b", 20.0, None, "500m", "1Gi")), duration=20.0
    )
    assert trace.pods[0].namespace == "default" and trace.pods[0].labels == {} and trace.pods[0].gpu == 0


def test_an_empty_trace_lasts_nothing(tmp_path: Path) -> None:
    assert read_trace(_file(tmp_path, HEADER)) == Trace(pods=(), duration=0.0)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("a,-5,,1,1Gi,,,,", "trace.csv:2: column 2 (start): negative time -5"),
        ("a,,,1,1Gi,,,,", "trace.csv:2: column 2 (start): a time is required"),
        ("a,soon,,1,1Gi,,,,", "trace.csv:2: column 2 (start): invalid time 'soon'"),
        ("a,nan,,1,1Gi,,,,", "trace.csv:2: column 2 (start): invalid time 'nan'"),
        ("a,10,5,1,1Gi,,,,", "trace.csv:2: column 3 (end): end 5 is before start 10"),
        ("a,10,-1,1,1Gi,,,,", "trace.csv:2: column 3 (end): negative time -1"),
        ("a,0,,lots,1Gi,,,,", "trace.csv:2: column 4 (cpu): invalid quantity 'lots'"),
        ("a,0,,-1,1Gi,,,,", "trace.csv:2: column 4 (cpu): negative cpu request '-1'"),
        ("a,0,,,1Gi,,,,", "trace.csv:2: column 4 (cpu): a cpu request is required"),
        ("a,0,,1,1GB,,,,", "trace.csv:2: column 5 (memory): invalid quantity '1GB'"),
        ("a,0,,1,1Gi,two,,,", "trace.csv:2: column 6 (gpu): invalid GPU count 'two'"),
        ("a,0,,1,1Gi,-1,,,", "trace.csv:2: column 6 (gpu): invalid GPU count '-1'"),
        ("a,0,,1,1Gi,,Web_App,,", "trace.csv:2: column 7 (owner): invalid owner 'Web_App'"),
        ("a,0,,1,1Gi,,,Shop,", "trace.csv:2: column 8 (namespace): invalid namespace 'Shop'"),
        ("a,0,,1,1Gi,,,,app", "trace.csv:2: column 9 (labels): invalid label 'app': expected key=value"),
        ("a,0,,1,1Gi,,,,-x=1", "trace.csv:2: column 9 (labels): invalid label '-x=1': invalid key '-x'"),
        ("a,0,,1,1Gi,,,,app=a b", "trace.csv:2: column 9 (labels): invalid label 'app=a b': invalid value"),
        ("a,0,,1,1Gi,,,,app=1;app=2", "trace.csv:2: column 9 (labels): label 'app' appears twice"),
        ("Pod_A,0,,1,1Gi,,,,", "trace.csv:2: column 1 (name): invalid pod name 'Pod_A'"),
        ("a,0,,1,1Gi", "trace.csv:2: 5 fields where the header has 9"),
    ],
)
def test_a_bad_field_is_located(tmp_path: Path, row: str, expected: str) -> None:
    assert _error(tmp_path, HEADER + row + "\n").startswith(expected)


def test_a_duplicate_name_is_located_at_its_second_line(tmp_path: Path) -> None:
    message = _error(tmp_path, HEADER + "a,0,,1,1Gi,,,,\nb,0,,1,1Gi,,,,\na,5,,1,1Gi,,,,\n")

    assert message == "trace.csv:4: column 1 (name): duplicate pod name 'a'"


def test_pods_of_one_owner_share_namespace_and_labels(tmp_path: Path) -> None:
    labels = _error(tmp_path, HEADER + "a,0,,1,1Gi,,web,,app=web\nb,0,,1,1Gi,,web,,app=api\n")
    namespace = _error(tmp_path, HEADER + "a,0,,1,1Gi,,web,shop,\nb,0,,1,1Gi,,web,ops,\n")

    assert labels == (
        "trace.csv:3: column 9 (labels): pods of owner 'web' share one set of labels: line 2 has others"
    )
    assert namespace.startswith(
        "trace.csv:3: column 8 (namespace): owner 'web' has its pods in namespace 'shop'"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "trace.csv:1: empty file: expected a header line name,start,end,cpu,memory"),
        ("name,start,end,cpu\n", "trace.csv:1: the header lacks the column(s) memory"),
        ("name,start,end,cpu,memory,size\n", "trace.csv:1: column 6: unknown column 'size' in the header"),
        ("name,start,end,cpu,memory,cpu\n", "trace.csv:1: column 6: column 'cpu' appears twice"),
        ("a,0,,1,1Gi\n", "trace.csv:1: column 1: unknown column 'a' in the header"),
    ],
)
def test_a_bad_header_is_located(tmp_path: Path, text: str, expected: str) -> None:
    assert _error(tmp_path, text).startswith(expected)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.csv"
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"name,start,end,cpu,memory\n\xff\xfe,0,,1,1Gi\n")

    with pytest.raises(TraceError, match=r"missing\.csv: cannot read the trace: No such file"):
        read_trace(missing)
    with pytest.raises(TraceError, match=r"binary\.csv: not UTF-8 text"):
        read_trace(binary)


def test_a_line_number_counts_blank_lines(tmp_path: Path) -> None:
    message = _error(tmp_path, HEADER + "a,0,,1,1Gi,,,,\n\n\nb,0,,x,1Gi,,,,\n")

    assert message.startswith("trace.csv:5: column 4 (cpu)")


def test_a_line_the_csv_parser_rejects_is_located(tmp_path: Path) -> None:
    message = _error(tmp_path, HEADER + "a,0,,1,1Gi,,,,\n" + "b" * 200_000 + ",0,,1,1Gi,,,,\n")

    assert message.startswith("trace.csv:3: not CSV: field larger than field limit")
