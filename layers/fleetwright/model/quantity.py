"""Kubernetes quantities and durations, parsed exactly (no floats).

CPU is kept in milli-cores; every other resource in its base unit (bytes, counts), rounded up
the way Kubernetes' ``Quantity.Value()`` does.

Hand-written on purpose: the official client's ``kubernetes.utils.parse_quantity`` returns a ``Decimal``
(the milli-core and ``Value()`` rounding would still be ours) and importing ``kubernetes.utils`` costs
0.6 s on a quiet machine (2.3-4.5 s on a loaded one), which the scheduler, the planner and ``fleetwright
validate`` would pay without otherwise touching the client. No kept library reads Go durations
(``1h30m``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity or duration."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse ``100m``, ``1.5``, ``1Gi``, ``1G``, ``1e3`` ... into an exact fraction of base units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a number or string, not {type(value).__name__}")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(
            f"invalid quantity {value!r}: expected a number with an optional suffix "
            "(m, k, M, G, T, Ki, Mi, Gi, Ti, e3, ...)"
        )
    number = Fraction(match["num"])
    if match["binary"]:
        number *= _BINARY[match["binary"]]
    elif match["exp"]:
        number *= Fraction(10) ** int(match["exp"][1:])
    else:
        number *= _DECIMAL[match["decimal"] or ""]
    return -number if match["sign"] == "-" else number


def to_milli(value: str | int | float) -> int:
    """A quantity in milli-units, rounded up (``1.5`` → 1500, ``100m`` → 100)."""
    return math.ceil(parse_quantity(value) * 1000)


def to_units(value: str | int | float) -> int:
    """A quantity in base units, rounded up (``1Gi`` → 1073741824, ``0.5`` → 1)."""
    return math.ceil(parse_quantity(value))


# Base-unit multipliers as integer ratios (numerator, denominator) for the integer-only path.
_SCALES: dict[str, tuple[int, int]] = {
    **{suffix: (factor, 1) for suffix, factor in _BINARY.items()},
    **{suffix: (f.numerator, f.denominator) for suffix, f in _DECIMAL.items()},
}


def _integer_resource(text: str, milli: bool) -> int:
    """``parse_resource`` in integer arithmetic: the same rounded-up value as the Fraction path (the
    number is ``digits / 10**decimals``, scaled by an integer ratio), without building Fractions."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(
            f"invalid quantity {text!r}: expected a number with an optional suffix "
            "(m, k, M, G, T, Ki, Mi, Gi, Ti, e3, ...)"
        )
    whole, _, fraction = match["num"].partition(".")
    numerator = int((whole or "0") + fraction)
    denominator = 10 ** len(fraction)
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if exponent >= 0:
            numerator *= 10**exponent
        else:
            denominator *= 10**-exponent
    else:
        scale, divisor = _SCALES[match["binary"] or match["decimal"] or ""]
        numerator *= scale
        denominator *= divisor
    if milli:
        numerator *= 1000
    if match["sign"] == "-":
        numerator = -numerator
    rounded: int = -(-numerator // denominator)
    return rounded


@lru_cache(maxsize=4096)
def _cached_resource(name: str, text: str) -> int:
    return _integer_resource(text, name == CPU)


def parse_resource(name: str, value: str | int | float) -> int:
    """A resource quantity in Fleetwright's integer unit: milli-cores for cpu, base units otherwise.

    Strings take an integer-only path, memoized: a cluster repeats a few hundred distinct requests
    (``100m``, ``512Mi``) across tens of thousands of pods, and each pod is converted on every change.
    """
    if isinstance(value, str):
        return _cached_resource(name, value)
    return to_milli(value) if name == CPU else to_units(value)


def format_resource(name: str, amount: int) -> str:
    """Render an integer resource amount for people (``1930m``, ``6.9Gi``, ``29``)."""
    if name == CPU:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.endswith("memory"):
        return format_bytes(amount)
    return str(amount)


def format_bytes(amount: int) -> str:
    """Bytes in the largest binary unit that keeps one decimal (``7.2Gi``, ``512Mi``)."""
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(amount) >= factor:
            scaled = amount / factor
            text = f"{scaled:.1f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return str(amount)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}

NEVER = "Never"


def parse_duration(value: str) -> int | None:
    """Parse a Go duration (``30s``, ``1h30m``, ``720h``) into whole seconds; ``Never`` gives None."""
    if value == NEVER:
        return None
    text = value.strip()
    if text == "0":
        return 0
    pos = 0
    total = Fraction(0)
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if not match:
            raise QuantityError(f"invalid duration {value!r}: expected e.g. 30s, 10m, 1h30m, 720h or Never")
        total += Fraction(match[1]) * _DURATION_UNITS[match[2]]
        pos = match.end()
    if not text:
        raise QuantityError("invalid duration '': expected e.g. 30s, 10m, 1h30m, 720h or Never")
    return math.ceil(total)


def format_duration(seconds: int | None) -> str:
    """Render seconds as a Go duration (``720h``, ``1h30m``, ``45s``); None as ``Never``."""
    if seconds is None:
        return NEVER
    if seconds == 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if secs:
        parts.append(f"{secs}s")
    return "".join(parts)


def go_duration_string(value: str) -> str:
    """A duration as Go's ``time.Duration.String`` writes it (``1m`` → ``1m0s``, ``90s`` → ``1m30s``,
    ``1.5s``, ``250ms``): what Karpenter puts in settings that take a duration it has parsed."""
    text = value.strip()
    if not text:
        raise QuantityError("invalid duration '': expected e.g. 30s, 10m, 1h30m")
    nanos = Fraction(0)
    pos = 0
    while text != "0" and pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if not match:
            raise QuantityError(f"invalid duration {value!r}: expected e.g. 30s, 10m, 1h30m")
        nanos += Fraction(match[1]) * _DURATION_UNITS[match[2]] * 10**9
        pos = match.end()
    total = int(nanos)  # Go keeps whole nanoseconds
    if total == 0:
        return "0s"
    if total < 10**9:
        for unit, size in (("ns", 1), ("µs", 10**3), ("ms", 10**6)):
            if total < size * 1000:
                return _decimal(total, size) + unit
    hours, rest = divmod(total, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    head = f"{hours}h{minutes}m" if hours else (f"{minutes}m" if minutes else "")
    return head + _decimal(rest, 10**9) + "s"


def _decimal(amount: int, size: int) -> str:
    whole, fraction = divmod(amount, size)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(size)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
