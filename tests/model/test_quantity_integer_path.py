"""The integer-only quantity path used for API objects gives exactly what the Fraction parser gives."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.model.quantity import CPU, MEMORY, QuantityError, parse_quantity, parse_resource

pytestmark = pytest.mark.slow  # see tests/conftest.py: left out of `make quick`

SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def exact(name: str, text: str) -> int:
    """The reference: the Fraction parser, rounded up in the resource's unit."""
    value = parse_quantity(text)
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


@st.composite
def quantities(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "", "+", "-"]))
    whole = draw(st.one_of(st.just(""), st.integers(0, 10**12).map(str)))
    fraction = draw(st.one_of(st.none(), st.text("0123456789", max_size=9)))
    if not whole and not fraction:
        whole = "0"
    number = whole if fraction is None else f"{whole}.{fraction}"
    if number.startswith("."):
        number = number if len(number) > 1 else "0"
    tail = draw(
        st.one_of(
            st.sampled_from(SUFFIXES),
            st.builds(
                lambda e, x: f"{e}{x}", st.sampled_from(["e", "E", "e+", "e-", "E-"]), st.integers(0, 24)
            ),
        )
    )
    return f"{sign}{number}{tail}"


@settings(max_examples=3000, deadline=None)
@given(name=st.sampled_from([CPU, MEMORY, "pods", "nvidia.com/gpu"]), text=quantities())
def test_integer_path_matches_the_fraction_parser(name: str, text: str) -> None:
    assert parse_resource(name, text) == exact(name, text)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (CPU, "100m", 100),
        (CPU, "2", 2000),
        (CPU, "1.5", 1500),
        (CPU, "0.0001", 1),  # rounded up to a milli-core, as Kubernetes does
        (MEMORY, "1.5Gi", 1610612736),
        (MEMORY, "1e3", 1000),
        (MEMORY, "128974848", 128974848),
        (MEMORY, "129e6", 129000000),
        (MEMORY, "123Mi", 128974848),
        (MEMORY, "0.5", 1),
        ("pods", "110", 110),
    ],
)
def test_common_quantities(name: str, text: str, expected: int) -> None:
    assert parse_resource(name, text) == expected


def test_numbers_still_take_the_exact_path() -> None:
    assert parse_resource(CPU, 1.5) == 1500
    assert parse_resource(MEMORY, 7) == 7


@pytest.mark.parametrize("text", ["lots", "1.2.3", "Gi", "1Gb", ""])
def test_bad_quantities_are_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_resource(MEMORY, text)
