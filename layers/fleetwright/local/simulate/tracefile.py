"""Reading and writing workload traces as CSV (docs/simulate.md, "Traces").

One pod a line under a header naming the columns: ``name,start,end,cpu,memory`` are required, ``gpu``,
``owner``, ``namespace`` and ``labels`` optional, in any order. The reader streams the file row by row and
checks every field with the project's own parsers (quantities, label keys and values), so a bad file
fails with one line naming the file, the line and the column, never a traceback.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.model.ec2nodeclass import check_label_key, check_label_value
from fleetwright.model.quantity import CPU, MEMORY, QuantityError, parse_resource

REQUIRED_COLUMNS = ("name", "start", "end", "cpu", "memory")
OPTIONAL_COLUMNS = ("gpu", "owner", "namespace", "labels")
COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

# Pod and owner names are DNS subdomains (what Kubernetes accepts for a pod's metadata.name); a namespace
# is a DNS label.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class TraceError(ValueError):
    """A trace file that cannot be read: ``str()`` names the file, and the line and column when known."""

    def __init__(self, path: str, message: str, line: int = 0, column: str = "") -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        where = path
        if line:
            where += f":{line}"
        if column:
            where += f": column {column}"
        super().__init__(f"{where}: {message}")


class _FieldError(ValueError):
    """A bad field; the reader adds the file, line and column."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each known column sits in a row of one file."""

    index: dict[str, int]
    width: int

    def column_name(self, position: int) -> str:
        for name, at in self.index.items():
            if at == position:
                return f"{position + 1} ({name})"
        return str(position + 1)


def make_trace(pods: Iterable[TracePod]) -> Trace:
    """A :class:`Trace` of ``pods`` in start order (stable), lasting until its last start or end."""
    ordered = sorted(pods, key=lambda pod: pod.start)
    duration = 0.0
    for pod in ordered:
        duration = max(duration, pod.start, pod.end if pod.end is not None else pod.start)
    return Trace(pods=tuple(ordered), duration=duration)


# --- reading ---------------------------------------------------------------------------------------------


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; raises :class:`TraceError` for an unreadable or malformed file."""
    return make_trace(iter_trace(path))


def iter_trace(path: str | Path) -> Iterator[TracePod]:
    """The pods of a trace file in file order, read one row at a time (duplicate names, owners whose pods
    disagree on namespace or labels are still found: the reader keeps each name and owner it has seen)."""
    shown = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            yield from _read_rows(shown, stream)
    except OSError as err:
        raise TraceError(shown, f"cannot read the trace: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise TraceError(shown, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except csv.Error as err:
        raise TraceError(shown, f"not CSV: {err}") from None


def _read_rows(shown: str, stream: IO[str]) -> Iterator[TracePod]:
    reader = csv.reader(stream)
    header = next(reader, None)
    if header is None:
        raise TraceError(shown, f"empty file: expected a header line {','.join(REQUIRED_COLUMNS)}", 1)
    layout = _layout(shown, header)
    names: set[str] = set()
    owners: dict[str, tuple[str, tuple[tuple[str, str], ...], int]] = {}
    for line, row in _rows(shown, reader):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != layout.width:
            raise TraceError(shown, f"{len(row)} fields where the header has {layout.width}", line)
        pod = _pod(shown, line, row, layout)
        if pod.name in names:
            raise TraceError(shown, f"duplicate pod name {pod.name!r}", line, layout.column_name(0))
        names.add(pod.name)
        _check_owner(shown, line, pod, owners, layout)
        yield pod


def _rows(shown: str, reader: Any) -> Iterator[tuple[int, list[str]]]:
    """The reader's rows with their line numbers; a line the CSV parser rejects (a NUL byte, a field
    over its size limit) is located too."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise TraceError(shown, f"not CSV: {err}", reader.line_num) from None
        yield reader.line_num, row


def _layout(shown: str, header: list[str]) -> _Layout:
    index: dict[str, int] = {}
    for position, raw in enumerate(header):
        column = raw.strip()
        if column not in COLUMNS:
            raise TraceError(
                shown,
                f"unknown column {column!r} in the header (columns: {', '.join(COLUMNS)})",
                1,
                str(position + 1),
            )
        if column in index:
            raise TraceError(shown, f"column {column!r} appears twice in the header", 1, str(position + 1))
        index[column] = position
    missing = [column for column in REQUIRED_COLUMNS if column not in index]
    if missing:
        raise TraceError(shown, f"the header lacks the column(s) {', '.join(missing)}", 1)
    return _Layout(index=index, width=len(header))


def _pod(shown: str, line: int, row: list[str], layout: _Layout) -> TracePod:
    index = layout.index
    column = "name"
    try:
        name = _name(row[index["name"]])
        column = "start"
        start = _time(row[index["start"]], optional=False)
        assert start is not None
        column = "end"
        end = _time(row[index["end"]], optional=True)
        if end is not None and end < start:
            raise _FieldError(f"end {format_time(end)} is before start {format_time(start)}")
        column = "cpu"
        cpu = _quantity(CPU, row[index["cpu"]])
        column = "memory"
        memory = _quantity(MEMORY, row[index["memory"]])
        column = "gpu"
        gpu = _count(row[index["gpu"]]) if "gpu" in index else 0
        column = "owner"
        owner = _owner(row[index["owner"]]) if "owner" in index else ""
        column = "namespace"
        namespace = _namespace(row[index["namespace"]]) if "namespace" in index else "default"
        column = "labels"
        labels = dict(_labels(row[index["labels"]])) if "labels" in index else {}
    except _FieldError as err:
        raise TraceError(shown, str(err), line, f"{index[column] + 1} ({column})") from None
    return TracePod(name, start, end, cpu, memory, gpu, owner, namespace, labels)


def _check_owner(
    shown: str,
    line: int,
    pod: TracePod,
    owners: dict[str, tuple[str, tuple[tuple[str, str], ...], int]],
    layout: _Layout,
) -> None:
    """Pods of one owner are one workload: the same namespace and the same labels."""
    if not pod.owner:
        return
    labels = tuple(sorted(pod.labels.items()))
    seen = owners.setdefault(pod.owner, (pod.namespace, labels, line))
    if seen[0] != pod.namespace:
        column = layout.column_name(layout.index["namespace"])
        message = f"owner {pod.owner!r} has its pods in namespace {seen[0]!r} (line {seen[2]}), not here"
        raise TraceError(shown, message, line, column)
    if seen[1] != labels:
        column = layout.column_name(layout.index["labels"])
        message = f"pods of owner {pod.owner!r} share one set of labels: line {seen[2]} has others"
        raise TraceError(shown, message, line, column)


def _name(text: str) -> str:
    value = text.strip()
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise _FieldError(
            f"invalid pod name {value!r}: use at most 253 lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


def _time(text: str, optional: bool) -> float | None:
    value = text.strip()
    if not value:
        if optional:
            return None
        raise _FieldError("a time is required (seconds from the trace's start)")
    try:
        seconds = float(value)
    except ValueError:
        raise _FieldError(f"invalid time {value!r}: expected seconds from the trace's start") from None
    if not math.isfinite(seconds):
        raise _FieldError(f"invalid time {value!r}: expected a finite number of seconds")
    if seconds < 0:
        raise _FieldError(f"negative time {value}: times are seconds from the trace's start")
    return seconds


def _quantity(resource: str, text: str) -> str:
    value = text.strip()
    if not value:
        raise _FieldError(f"a {resource} request is required (a Kubernetes quantity)")
    try:
        amount = parse_resource(resource, value)
    except QuantityError as err:
        raise _FieldError(str(err)) from None
    if amount < 0:
        raise _FieldError(f"negative {resource} request {value!r}")
    return value


def _count(text: str) -> int:
    value = text.strip()
    if not value:
        return 0
    if not value.isdigit():
        raise _FieldError(f"invalid GPU count {value!r}: expected a whole number of nvidia.com/gpu")
    return int(value)


def _owner(text: str) -> str:
    value = text.strip()
    if value and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
        raise _FieldError(
            f"invalid owner {value!r}: use at most 253 lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


def _namespace(text: str) -> str:
    value = text.strip()
    if not value:
        return "default"
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise _FieldError(
            f"invalid namespace {value!r}: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


_LABELS_SEEN: dict[str, tuple[tuple[str, str], ...]] = {}


def _labels(text: str) -> tuple[tuple[str, str], ...]:
    """``k=v;k=v`` as pairs; a trace repeats a few label sets over many pods, so each is checked once."""
    known = _LABELS_SEEN.get(text)
    if known is not None:
        return known
    pairs: list[tuple[str, str]] = []
    keys: set[str] = set()
    for item in text.split(";"):
        entry = item.strip()
        if not entry:
            continue
        key, equals, value = entry.partition("=")
        if not equals:
            raise _FieldError(f"invalid label {entry!r}: expected key=value (labels are k=v;k=v)")
        problem = check_label_key(key) or check_label_value(value)
        if problem:
            raise _FieldError(f"invalid label {entry!r}: {problem}")
        if key in keys:
            raise _FieldError(f"label {key!r} appears twice")
        keys.add(key)
        pairs.append((key, value))
    result = tuple(pairs)
    if len(_LABELS_SEEN) < 4096:
        _LABELS_SEEN[text] = result
    return result


# --- writing ---------------------------------------------------------------------------------------------


def write_trace(trace: Trace | Iterable[TracePod], path: str | Path) -> None:
    """Write a trace (or pods) to ``path`` as CSV with every column; :func:`read_trace` reads it back
    equal."""
    pods = trace.pods if isinstance(trace, Trace) else trace
    with open(path, "w", newline="", encoding="utf-8") as stream:
        write_pods(pods, stream)


def write_pods(pods: Iterable[TracePod], stream: IO[str]) -> None:
    """Write the header and one row per pod to an open text stream."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(COLUMNS)
    for pod in pods:
        writer.writerow(
            (
                pod.name,
                format_time(pod.start),
                "" if pod.end is None else format_time(pod.end),
                pod.cpu,
                pod.memory,
                str(pod.gpu) if pod.gpu else "",
                pod.owner,
                pod.namespace,
                ";".join(f"{key}={value}" for key, value in pod.labels.items()),
            )
        )


def format_time(seconds: float) -> str:
    """Whole seconds without a decimal point; other times in the shortest text that reads back equal."""
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))
