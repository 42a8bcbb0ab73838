from fractions import Fraction

import pytest

from fleetwright.model.quantity import (
    QuantityError,
    format_duration,
    go_duration_string,
    parse_duration,
    parse_quantity,
    parse_resource,
    to_milli,
    to_units,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("1Gi", Fraction(2**30)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("500Mi", Fraction(500 * 2**20)),
        ("0.5Gi", Fraction(2**29)),
        ("-2k", Fraction(-2000)),
        (".5", Fraction(1, 2)),
        (3, Fraction(3)),
    ],
)
def test_parses_kubernetes_quantities_exactly(text: str | int, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_cpu_is_milli_and_memory_is_bytes_rounded_up() -> None:
    assert parse_resource("cpu", "1.5") == 1500
    assert parse_resource("cpu", "100m") == 100
    assert parse_resource("cpu", "0.0001") == 1
    assert parse_resource("memory", "1Gi") == 1073741824
    assert parse_resource("memory", "1.5") == 2
    assert to_milli("2") == 2000
    assert to_units("1e3") == 1000


@pytest.mark.parametrize("bad", ["", "1.2.3", "10 Gi", "Gi", "1gi", "1KiB", "abc", "1e"])
def test_rejects_malformed_quantities(bad: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("1h30m", 5400), ("720h", 2592000), ("10m", 600), ("0s", 0), ("1.5h", 5400)],
)
def test_parses_go_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


def test_never_means_no_duration() -> None:
    assert parse_duration("Never") is None
    assert format_duration(None) == "Never"


@pytest.mark.parametrize("bad", ["", "30", "1d", "h", "never", "1h 30m"])
def test_rejects_malformed_durations(bad: str) -> None:
    with pytest.raises(QuantityError, match="invalid duration"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("given", "printed"),
    [
        ("1m", "1m0s"),
        ("90s", "1m30s"),
        ("1h", "1h0m0s"),
        ("61m", "1h1m0s"),
        ("0", "0s"),
        ("1500ms", "1.5s"),
        ("250ms", "250ms"),
        ("100us", "100µs"),
        ("1.000001s", "1.000001s"),
    ],
)
def test_durations_print_as_gos_duration_string(given: str, printed: str) -> None:
    assert go_duration_string(given) == printed
