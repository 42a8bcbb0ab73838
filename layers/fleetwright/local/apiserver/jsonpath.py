"""The JSONPath subset CRD printer columns use: ``.a.b``, escaped dots (``.labels.karpenter\\.sh/nodepool``),
``[0]``, ``[*]``, ``['key']`` and filters ``[?(@.type=="Ready")]`` (``==``/``!=``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

Step = Callable[[list[Any]], list[Any]]

_FILTER = re.compile(r"\?\(@((?:\.[^=!]+?)+)\s*(==|!=)\s*(.+)\)")


class JsonPathError(ValueError):
    """A path outside the supported subset."""


def _field(name: str) -> Step:
    return lambda nodes: [n[name] for n in nodes if isinstance(n, dict) and name in n]


def _index(i: int) -> Step:
    def step(nodes: list[Any]) -> list[Any]:
        return [n[i] for n in nodes if isinstance(n, list) and -len(n) <= i < len(n)]

    return step


def _wildcard(nodes: list[Any]) -> list[Any]:
    out: list[Any] = []
    for n in nodes:
        out.extend(n if isinstance(n, list) else n.values() if isinstance(n, dict) else [])
    return out


def _filter(field_path: str, op: str, literal: str) -> Step:
    steps = compile_path(field_path)
    try:
        expected = json.loads(literal.replace("'", '"'))
    except ValueError as exc:
        raise JsonPathError(f"unsupported filter value {literal!r}") from exc

    def step(nodes: list[Any]) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            for element in n if isinstance(n, list) else [n]:
                found = _run(steps, [element])
                hit = bool(found) and found[0] == expected
                if hit == (op == "=="):
                    out.append(element)
        return out

    return step


def _bracket(content: str) -> Step:
    content = content.strip()
    if content == "*":
        return _wildcard
    if re.fullmatch(r"-?\d+", content):
        return _index(int(content))
    if len(content) >= 2 and content[0] == content[-1] and content[0] in "'\"":
        return _field(content[1:-1])
    match = _FILTER.fullmatch(content)
    if match:
        return _filter(match.group(1), match.group(2), match.group(3).strip())
    raise JsonPathError(f"unsupported expression [{content}]")


def compile_path(path: str) -> list[Step]:
    """Parse ``path`` (optionally wrapped in ``{}`` and led by ``$``) into steps."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    steps: list[Step] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == ".":
            i += 1
            name = []
            while i < len(text) and text[i] not in ".[":
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                name.append(text[i])
                i += 1
            if name:
                steps.append(_field("".join(name)))
        elif char == "[":
            depth, j, quote = 0, i, ""
            while j < len(text):
                c = text[j]
                if quote:
                    quote = "" if c == quote else quote
                elif c in "'\"":
                    quote = c
                elif c == "[":
                    depth += 1
                elif c == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(text):
                raise JsonPathError(f"unclosed [ in {path!r}")
            steps.append(_bracket(text[i + 1 : j]))
            i = j + 1
        else:
            raise JsonPathError(f"unexpected {char!r} in {path!r}")
    return steps


def _run(steps: list[Step], nodes: list[Any]) -> list[Any]:
    for step in steps:
        nodes = step(nodes)
    return nodes


def evaluate(path: str, obj: Any) -> list[Any]:
    """Every value ``path`` selects in ``obj`` (empty when none)."""
    return _run(compile_path(path), [obj])
