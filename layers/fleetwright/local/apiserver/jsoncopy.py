"""A deep copy of JSON data, several times faster than ``copy.deepcopy``.

The emulator's store copies every object it hands in and out, and the replay's state table every item:
``copy.deepcopy``'s generic machinery (a memo, a dispatch per value) was a tenth of a replay. JSON data
is dicts, lists, strings, numbers, booleans and None; anything else found inside (a tuple, a Decimal, a
dict subclass) is copied by ``copy.deepcopy`` as before. One difference: a sub-object referenced twice
is copied twice (``copy.deepcopy`` keeps such sharing); JSON has none.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

_ATOMS = frozenset({str, int, float, bool, type(None)})

_T = TypeVar("_T")


def json_copy(value: _T) -> _T:
    """A deep copy of ``value``."""
    result: Any = _copy(value)
    return result  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: (v if type(v) in _ATOMS else _copy(v)) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _copy(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)
