"""Functions stay short enough to read at once: a long one needs a written reason here.

Walks the shipped layer, the Lambda handlers and the benchmarks with `ast`, so it costs no imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("layers/fleetwright", "functions", "bench")
LIMIT = 60
# "path::qualname" -> why the function may stay longer than LIMIT lines.
ALLOWED: dict[str, str] = {
    "bench/plan_input.py::manifests": "YAML templates of the benchmark's documents, one literal each",
    "bench/plan_load.py::pod_object": "one literal Pod object as the API server returns it, field by field",
}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualname, line count) of every function and method, nested ones as `outer.<locals>.inner`."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + child.name
            assert child.end_lineno is not None
            yield name, child.end_lineno - child.lineno + 1
            yield from _functions(child, name + ".<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, prefix + child.name + ".")
        else:
            yield from _functions(child, prefix)


def _lengths() -> dict[str, int]:
    lengths: dict[str, int] = {}
    for root in SCANNED:
        for path in sorted((ROOT / root).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for name, lines in _functions(ast.parse(path.read_text(), str(path))):
                lengths[f"{relative}::{name}"] = lines
    return lengths


def test_no_function_is_longer_than_the_limit_without_a_reason() -> None:
    long = {key: lines for key, lines in _lengths().items() if lines > LIMIT}
    unexplained = sorted(f"{key} ({lines} lines)" for key, lines in long.items() if key not in ALLOWED)
    assert not unexplained, f"over {LIMIT} lines; split them or give a reason in ALLOWED: {unexplained}"


def test_the_allow_list_names_only_functions_that_are_still_long() -> None:
    lengths = _lengths()
    gone = sorted(key for key in ALLOWED if key not in lengths)
    short = sorted(key for key in ALLOWED if key in lengths and lengths[key] <= LIMIT)
    assert not gone, f"ALLOWED names functions that no longer exist: {gone}"
    assert not short, f"ALLOWED names functions now within {LIMIT} lines; drop them: {short}"


def test_every_reason_says_something() -> None:
    assert all(len(reason.split()) >= 2 for reason in ALLOWED.values())
