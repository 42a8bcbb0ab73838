"""Fast YAML loading for big manifests (``kubectl get pods -o yaml`` of a whole cluster).

PyYAML's ``CSafeLoader`` parses in C but builds a node tree and then the objects in Python, which spends
most of its time on bookkeeping: 20,000 pods (50 MB) took over 30 s. :func:`load_all` builds the objects
straight from libyaml's parse events and resolves each distinct plain scalar once, giving the same
objects as ``yaml.load_all(text, Loader=yaml.CSafeLoader)``. A stream using what that shortcut does not
handle (anchors and aliases, merge keys, explicit non-standard tags, collections as keys) is loaded by
``CSafeLoader`` instead, from the first document that uses it; malformed YAML raises the parser's own
``yaml.MarkedYAMLError`` (with its line and column) either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.nodes import ScalarNode

STR = "tag:yaml.org,2002:str"
MAP = "tag:yaml.org,2002:map"
SEQ = "tag:yaml.org,2002:seq"
# Scalar tags built through SafeConstructor's own functions (same values, same errors).
SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)
# Plain scalars resolved so far per stream are kept up to this many distinct values.
CACHE_LIMIT = 200_000

try:
    from yaml._yaml import CParser as _CParser

    _PARSER: Any = _CParser
except ImportError:  # PyYAML built without libyaml
    _PARSER = None

_SLOW_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_RESOLVERS: dict[Any, list[tuple[str, Any]]] = yaml.resolver.Resolver.yaml_implicit_resolvers
_MISSING = object()


class _UnusualYamlError(Exception):
    """The stream uses YAML that only the full loader builds."""


def _scalar(tag: str, value: str) -> Any:
    if tag == STR:
        return value
    if tag not in SCALAR_TAGS:
        raise _UnusualYamlError
    return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, value))


def _plain(value: str) -> Any:
    """A plain (unquoted) scalar's value, resolved as PyYAML's resolver does."""
    for tag, regexp in _RESOLVERS.get(value[:1] if value else "", ()):
        if regexp.match(value):
            return _scalar(tag, value)
    return value


def load_all(text: str) -> Iterator[Any]:
    """Every document of ``text``, as ``yaml.load_all(text, Loader=yaml.CSafeLoader)`` gives them."""
    if _PARSER is None:
        yield from yaml.load_all(text, Loader=_SLOW_LOADER)
        return
    done = 0
    try:
        for document in _events_to_documents(_PARSER(text)):
            yield document
            done += 1
    except _UnusualYamlError:
        documents = yaml.load_all(text, Loader=_SLOW_LOADER)
        for _ in range(done):
            next(documents)
        yield from documents


_EVENTS = (
    yaml.events.ScalarEvent,
    yaml.events.MappingStartEvent,
    yaml.events.MappingEndEvent,
    yaml.events.SequenceStartEvent,
    yaml.events.SequenceEndEvent,
    yaml.events.DocumentEndEvent,
    yaml.events.StreamEndEvent,
)


def _remember_plain(plain: dict[str, Any], value: str) -> Any:
    """A plain scalar's value, kept for its next occurrences while the cache has room."""
    item = _plain(value)
    if len(plain) < CACHE_LIMIT:
        plain[value] = item
    return item


def _check_collection_start(event: Any, mapping: bool, containers: list[Any], keys: list[Any]) -> None:
    """Anchors, explicit tags and collections used as keys go to the slow loader."""
    if event.anchor is not None or (event.tag not in (None, "!") and event.tag != (MAP if mapping else SEQ)):
        raise _UnusualYamlError
    if containers and keys[-1] is _MISSING and type(containers[-1]) is dict:
        raise _UnusualYamlError  # a collection used as a key


def _events_to_documents(parser: Any) -> Iterator[Any]:
    # Locals, not globals: the loop below runs once per event.
    scalar_event, mapping_start, mapping_end, sequence_start, sequence_end, document_end, stream_end = _EVENTS
    plain: dict[str, Any] = {}
    # The collections being built, innermost last; for a mapping, its key waiting for a value (or _MISSING).
    containers: list[Any] = []
    keys: list[Any] = []
    root: Any = None
    get_event = parser.get_event
    while True:
        event = get_event()
        kind = type(event)
        if kind is scalar_event:
            if event.anchor is not None:
                raise _UnusualYamlError
            tag = event.tag
            value = event.value
            if tag is None or tag == "!":
                if event.implicit[0]:
                    item = plain.get(value, _MISSING)
                    if item is _MISSING:
                        item = _remember_plain(plain, value)
                else:
                    item = value
            else:
                item = _scalar(tag, value)
        elif kind is mapping_start or kind is sequence_start:
            _check_collection_start(event, kind is mapping_start, containers, keys)
            containers.append({} if kind is mapping_start else [])
            keys.append(_MISSING)
            continue
        elif kind is mapping_end or kind is sequence_end:
            keys.pop()
            item = containers.pop()
        elif kind is document_end:
            yield root
            root = None
            continue
        elif kind is stream_end:
            return
        elif kind is yaml.events.AliasEvent:
            raise _UnusualYamlError
        else:  # stream and document starts
            continue
        if not containers:
            root = item
            continue
        parent = containers[-1]
        if type(parent) is list:
            parent.append(item)
            continue
        key = keys[-1]
        if key is _MISSING:
            if type(item) is dict or type(item) is list:
                raise _UnusualYamlError  # a collection used as a key
            keys[-1] = item
        else:
            parent[key] = item
            keys[-1] = _MISSING
