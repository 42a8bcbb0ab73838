"""A day of the Azure Public Dataset's VM trace as pods (``fleetwright trace convert-azure``).

Input: the reprocessed copy of AzurePublicDataset V1's ``vmtable`` in the repository
huaweicloud/trace_generation_rnn (``resources/``: ``traces/v1.<split>.txt`` holds the VM sizes that
arrive in each 5-minute bin, grouped by tenant; ``traces/v1.<split>.c<T>.txt`` each VM's lifetime as a
bin of ``maps/v1.interval_map.txt``, ``C`` when the VM still ran at second T; ``maps/flav_map.txt`` the
size letters). Each VM becomes a pod: its cores the cpu request, its memory (GB, read as GiB) the memory
request, the VMs a tenant started in one bin one owner. docs/simulate.md ("Traces") gives the choices:
the window, the sampling and how times inside a bin are placed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import TraceError, make_trace

DAY = 86_400
BIN = 300  # the dataset's time resolution: arrivals and lifetimes in 5-minute steps
MIN_LIFETIME = 60  # a VM deleted within its arrival's 5 minutes lives at least a minute
_CENSORED = re.compile(r"^v1\.(?P<split>[a-z]+)\.c(?P<at>\d+)\.txt$")


@dataclass(frozen=True, slots=True)
class AzureOptions:
    """Which day of the split (0: the first 24 h), the share of tenant arrivals kept, the seed placing
    times inside their bins."""

    day: int = 4
    sample: float = 0.02
    seed: int = 1


@dataclass(frozen=True, slots=True)
class AzureInput:
    """The files of one split of the reprocessed trace."""

    flavors: Path
    lifetimes: Path
    flavor_map: Path
    interval_map: Path
    censored_at: int

    @staticmethod
    def locate(resources: Path, split: str) -> AzureInput:
        """The files of ``split`` (``train``, ``dev``, ``test``) under a ``resources/`` directory."""
        traces = resources / "traces"
        flavors = traces / f"v1.{split}.txt"
        if not flavors.is_file():
            message = f"no such file: is {resources} the dataset's resources/ directory?"
            raise TraceError(str(flavors), message)
        found = sorted(
            (int(match["at"]), path)
            for path in traces.glob(f"v1.{split}.c*.txt")
            if (match := _CENSORED.match(path.name)) and match["split"] == split
        )
        if not found:
            raise TraceError(str(traces / f"v1.{split}.c<T>.txt"), "no lifetime file for this split")
        censored_at, lifetimes = found[0]
        maps = resources / "maps"
        flavor_map, interval_map = maps / "flav_map.txt", maps / "v1.interval_map.txt"
        return AzureInput(flavors, lifetimes, flavor_map, interval_map, censored_at)


def convert_azure(source: AzureInput, options: AzureOptions) -> Trace:
    """One day of the split as a trace (see the module docstring); raises :class:`TraceError`."""
    if not 0.0 < options.sample <= 1.0:
        raise ValueError(f"--sample {options.sample}: expected a fraction above 0, at most 1")
    if options.day < 0:
        raise ValueError(f"--day {options.day}: expected 0 or more")
    flavors = read_flavor_map(source.flavor_map)
    bins = read_interval_map(source.interval_map)
    return make_trace(_pods(source, flavors, bins, options))


def read_flavor_map(path: Path) -> dict[str, tuple[str, str]]:
    """``cores,memory_gb letter`` lines as ``{letter: (cpu, memory)}`` Kubernetes quantities."""
    result: dict[str, tuple[str, str]] = {}
    for number, line in _lines(path):
        try:
            sizes, letter = line.split()
            cores, memory = (float(part) for part in sizes.split(","))
        except ValueError:
            raise TraceError(str(path), f"expected 'cores,memory_gb letter', not {line!r}", number) from None
        cpu = str(int(cores)) if cores.is_integer() else f"{round(cores * 1000)}m"
        mib = round(memory * 1024)
        result[letter] = (cpu, f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi")
    return result


def read_interval_map(path: Path) -> list[tuple[int, int]]:
    """``seconds bin`` lines as each bin's lifetimes ``[low, high)`` in seconds."""
    bounds: dict[int, tuple[int, int]] = {}
    for number, line in _lines(path):
        try:
            seconds, index = (int(part) for part in line.split())
        except ValueError:
            raise TraceError(str(path), f"expected 'seconds bin', not {line!r}", number) from None
        low, high = bounds.get(index, (seconds, seconds + BIN))
        bounds[index] = (min(low, seconds), max(high, seconds + BIN))
    if sorted(bounds) != list(range(len(bounds))):
        raise TraceError(str(path), "the bins are not numbered 0, 1, 2 ...")
    return [bounds[index] for index in range(len(bounds))]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as stream:
            for number, line in enumerate(stream, start=1):
                if line.strip():
                    yield number, line.strip()
    except OSError as err:
        raise TraceError(str(path), f"cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise TraceError(str(path), f"not UTF-8 text ({err.reason})") from None


@dataclass(slots=True)
class _Window:
    start: int
    end: int
    censored_at: int
    rng: random.Random
    sample: float
    vm: int = 0
    batch: int = 0


def _pods(
    source: AzureInput,
    flavors: dict[str, tuple[str, str]],
    bins: list[tuple[int, int]],
    options: AzureOptions,
) -> Iterator[TracePod]:
    lines = zip_longest(_lines(source.flavors), _lines(source.lifetimes))
    window: _Window | None = None
    for size_line, life_line in lines:
        if size_line is None or life_line is None:
            shorter, longer = (
                (source.flavors, source.lifetimes)
                if size_line is None
                else (source.lifetimes, source.flavors)
            )
            raise TraceError(str(shorter), f"ends before {longer.name} does: the files are not partners")
        (number, sizes), (_, lives) = size_line, life_line
        stamp, size_tokens, life_tokens = _aligned(source, number, sizes, lives)
        if window is None:
            split_start = stamp - BIN
            start = split_start + options.day * DAY
            if start + DAY > source.censored_at:
                days = (source.censored_at - split_start) // DAY
                raise ValueError(f"--day {options.day}: this split has {days} whole day(s), 0 to {days - 1}")
            rng = random.Random(f"{options.seed}/azure")
            window = _Window(start, start + DAY, source.censored_at, rng, options.sample)
        if stamp - BIN >= window.end:
            return
        for size, life in zip(size_tokens, life_tokens, strict=True):
            try:
                yield from _batch(window, stamp, size, life, flavors, bins)
            except (KeyError, ValueError, IndexError) as err:
                message = f"unknown VM size or lifetime bin {err}"
                raise TraceError(str(source.lifetimes), message, number) from None


def _aligned(
    source: AzureInput, number: int, sizes: str, lives: str
) -> tuple[int, list[list[str]], list[list[str]]]:
    """One line of each file: the same bin and the same tenants with as many VMs."""
    stamp, _, size_text = sizes.partition(" ")
    life_stamp, _, life_text = lives.partition(" ")
    size_tokens = _batches(size_text)
    life_tokens = _batches(life_text)
    shape = [len(batch) for batch in size_tokens]
    if stamp != life_stamp or not stamp.isdigit() or shape != [len(batch) for batch in life_tokens]:
        raise TraceError(
            str(source.lifetimes), f"line {number} does not match line {number} of {source.flavors}", number
        )
    return int(stamp), size_tokens, life_tokens


def _batches(text: str) -> list[list[str]]:
    """``a,b,|,c,|`` as ``[[a, b], [c]]``: the VMs each tenant started in the bin."""
    result: list[list[str]] = [[]]
    for token in text.split(","):
        if token == "|":
            result.append([])
        elif token:
            result[-1].append(token)
    return [batch for batch in result if batch]


def _batch(
    window: _Window,
    stamp: int,
    sizes: list[str],
    lives: list[str],
    flavors: dict[str, tuple[str, str]],
    bins: list[tuple[int, int]],
) -> Iterator[TracePod]:
    """A tenant's VMs of one bin: kept or dropped together, arriving at one second of the bin. The random
    draws do not depend on the sample, so a smaller sample keeps a subset of a larger one's pods."""
    window.batch += 1
    owner = f"tenant-{window.batch:07d}"
    kept = window.rng.random() < window.sample
    arrival = stamp - BIN + round(window.rng.uniform(0, BIN - 1))
    for size, life in zip(sizes, lives, strict=True):
        window.vm += 1
        end = _end(window, arrival, life, bins)
        if not kept or (end is not None and end <= window.start) or arrival >= window.end:
            continue
        cpu, memory = flavors[size]
        start = max(arrival, window.start) - window.start
        shown_end = None if end is None or end >= window.end else float(end - window.start)
        yield TracePod(f"vm-{window.vm:07d}", float(start), shown_end, cpu, memory, owner=owner)


def _end(window: _Window, arrival: int, life: str, bins: list[tuple[int, int]]) -> int | None:
    """When the VM ends: a second drawn in its lifetime bin (before the censoring time, which it did not
    reach), or None when it still ran then."""
    kind, index = life[0], int(life[1:])
    low, high = bins[index]
    draw = window.rng.random()
    if kind == "C":
        return None
    if kind != "U":
        raise ValueError(life)
    low = max(low, MIN_LIFETIME)
    high = max(low, min(high, window.censored_at - arrival))
    return arrival + low + round(draw * (high - low))
