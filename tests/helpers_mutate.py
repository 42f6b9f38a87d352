"""Random mutations of small input files, as hypothesis strategies (used by test_fuzz_inputs).

Byte-level: a flipped byte, a truncation, a deleted or repeated line, two columns swapped, one
field replaced (an empty text, a label outside the set, a bad score), a non-UTF-8 byte, a BOM,
CRLF line ends. Structural, for JSON, JSON lines and YAML (parsed, changed, dumped again): a value
replaced by another type, a key or list element dropped, two values swapped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import yaml
from hypothesis import strategies as st


class Shape(Protocol):
    """What a mutation needs to know of a format."""

    seed: bytes
    delimiter: bytes   # between columns: b"\t", b",", b" " ...
    structured: str    # "json", "jsonl", "yaml", or "" (bytes only)


Draw = Callable[[st.SearchStrategy], Any]
FIELDS = [b"", b" ", b"2", b"-1", b"nan", b"5.5", b"1e999", b"B-XYZ", b"I-", b'"', b"\\N", b"\xc3\xa9t\xc3\xa9"]
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3", b"\x80", b"\xe9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
VALUES: list[Any] = [None, 0, 7, -1, 2.5, "", " ", "x", True, False, [], [1], {}, {"k": "v"}]


def _pick_line(draw: Draw, data: bytes) -> tuple[list[bytes], int]:
    lines = data.split(b"\n")
    return lines, draw(st.integers(0, len(lines) - 1))


def flip(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]


def truncate(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    return data[: draw(st.integers(0, max(len(data) - 1, 0)))]


def delete_line(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    lines, i = _pick_line(draw, data)
    return b"\n".join(lines[:i] + lines[i + 1 :])


def duplicate_line(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    lines, i = _pick_line(draw, data)
    return b"\n".join(lines[: i + 1] + lines[i:])


def swap_columns(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    lines, i = _pick_line(draw, data)
    fields = lines[i].split(fmt.delimiter)
    if len(fields) > 1:
        j, k = draw(st.lists(st.integers(0, len(fields) - 1), min_size=2, max_size=2, unique=True))
        fields[j], fields[k] = fields[k], fields[j]
        lines[i] = fmt.delimiter.join(fields)
    return b"\n".join(lines)


def replace_field(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    """A label outside the set, an empty text, a bad score ...: one field replaced."""
    lines, i = _pick_line(draw, data)
    fields = lines[i].split(fmt.delimiter)
    fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(FIELDS))
    lines[i] = fmt.delimiter.join(fields)
    return b"\n".join(lines)


def non_utf8(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    i = draw(st.integers(0, len(data)))
    return data[:i] + draw(st.sampled_from(BAD_UTF8)) + data[i:]


def bom(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    lines, i = _pick_line(draw, data)
    lines[i] = b"\xef\xbb\xbf" + lines[i]
    return b"\n".join(lines)


def crlf(draw: Draw, data: bytes, fmt: Shape) -> bytes:
    return data.replace(b"\n", b"\r\n")


def parse(text: bytes, kind: str) -> Any:
    """``text`` parsed as JSON or YAML, or ``ValueError`` when it no longer parses."""
    try:
        decoded = text.decode("utf-8-sig")
        return yaml.safe_load(decoded) if kind == "yaml" else json.loads(decoded)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(str(exc)) from None


def _dump(doc: Any, kind: str, indent: bool) -> bytes:
    if kind == "yaml":
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()
    return json.dumps(doc, indent=1 if indent else None).encode()


def _paths(doc: Any, path: tuple = ()) -> list[tuple]:
    """The path of every value in ``doc`` (the root first)."""
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    return [path] + [p for key, value in children for p in _paths(value, path + (key,))]


def _get(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def retype(draw: Draw, doc: Any, kind: str) -> Any:
    """One value (an answer, a list of answers, a title ...) replaced by another type."""
    path = draw(st.sampled_from(_paths(doc)))
    value = draw(st.sampled_from(VALUES + ([] if kind == "yaml" else ["\ud800 lone surrogate"])))
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def drop(draw: Draw, doc: Any, kind: str) -> Any:
    """One key (a context, an answer_start ...) or list element removed."""
    paths = _paths(doc)[1:]
    if paths:
        path = draw(st.sampled_from(paths))
        del _get(doc, path[:-1])[path[-1]]
    return doc


def swap_values(draw: Draw, doc: Any, kind: str) -> Any:
    """Two values of one object or list swapped (the JSON form of swapped columns)."""
    parents = [p for p in _paths(doc) if isinstance(_get(doc, p), dict | list) and len(_get(doc, p)) > 1]
    if parents:
        node = _get(doc, draw(st.sampled_from(parents)))
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        a, b = draw(st.lists(st.sampled_from(keys), min_size=2, max_size=2, unique=True))
        node[a], node[b] = node[b], node[a]
    return doc


def structural(change: Callable[[Draw, Any, str], Any]) -> Callable[[Draw, bytes, Shape], bytes]:
    """A byte mutator applying ``change`` to the parsed file (to one line of JSONL); a no-op when
    an earlier mutation left it unparseable."""
    def mutate(draw: Draw, data: bytes, fmt: Shape) -> bytes:
        lines, i = _pick_line(draw, data) if fmt.structured == "jsonl" else ([data], 0)
        kind = "yaml" if fmt.structured == "yaml" else "json"
        try:
            doc = parse(lines[i], kind)
        except ValueError:
            return data
        lines[i] = _dump(change(draw, doc, kind), kind, indent=b"\n" in lines[i].strip())
        return b"\n".join(lines)
    return mutate


TEXT_MUTATORS = {f.__name__: f for f in (flip, truncate, delete_line, duplicate_line, swap_columns, replace_field,
                                         non_utf8, bom, crlf)}
STRUCT_MUTATORS = {f.__name__: structural(f) for f in (retype, drop, swap_values)}


def mutator_names(fmt: Shape) -> list[str]:
    """The mutations that apply to ``fmt`` (structural ones only where it parses)."""
    return sorted({**TEXT_MUTATORS, **(STRUCT_MUTATORS if fmt.structured else {})})


@st.composite
def mutated(draw: Draw, fmt: Shape, first: str) -> tuple[list[str], bytes]:
    """``first``, then 0-2 more mutations of ``fmt.seed``: (their names, the mutated bytes)."""
    mutators = {**TEXT_MUTATORS, **STRUCT_MUTATORS}
    names = [first] + draw(st.lists(st.sampled_from(mutator_names(fmt)), max_size=2))
    data = fmt.seed
    for name in names:
        data = mutators[name](draw, data, fmt)
    return names, data
