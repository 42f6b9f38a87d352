"""Read a JSON file and check it against a layout, with errors that name the JSON path.

A layout is a pydantic model validated in strict mode (no "1" for 1, no 1 for "1"), so a value of
the wrong type fails where it is, not later as an ``AttributeError`` deep in a reader::

    dev-v1.1.json: data[0].paragraphs[3].qas[6].answers[1].text: expected a string, got null

pydantic rather than hand-written ``isinstance`` checks: the official layouts are nested lists of
objects, and a schema states them once, with every violation's location for free.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from tinyplm.errors import DataError, TinyplmError
from tinyplm.tasks.io import read_text

M = TypeVar("M", bound=BaseModel)

#: What a pydantic error type expected, in words.
EXPECTED = {
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
}

#: Bounds a layout may set on a number (``Field(gt=0)``), in words.
BOUNDS = {"gt": "greater than", "ge": "of at least", "lt": "less than", "le": "of at most"}


class Layout(BaseModel):
    """Base of a JSON layout: strict types; keys the layout does not name are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def load_json(path: Path, error: type[TinyplmError] = DataError) -> Any:
    """The parsed JSON of ``path``; raises ``error`` naming the file (and line:column of a syntax
    error) when it is missing, not UTF-8 or not JSON."""
    return parse_json(read_text(path, error), path, error)


def parse_json(text: str, name: Path | str, error: type[TinyplmError] = DataError) -> Any:
    """The parsed JSON of ``text`` (the file ``name``); raises ``error`` naming ``name`` and the
    line:column of a syntax error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{name}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None
    except (ValueError, RecursionError) as err:  # an integer of 4300+ digits; nesting deeper than the stack
        raise error(f"{name}: not valid JSON ({str(err)[:120]})") from None


def validate(layout: type[M], raw: Any, path: Path | str, error: type[TinyplmError] = DataError) -> M:
    """``raw`` checked against ``layout``; raises ``error`` naming the file, the JSON path of the
    first bad value, what was expected there and what was found."""
    try:
        return layout.model_validate(raw)
    except ValidationError as exc:
        raise error(f"{path}: {describe_error(exc.errors()[0])}") from None


def problem(layout: type[Layout], raw: Any, at: tuple = ()) -> str | None:
    """None when ``raw`` fits ``layout``, else its first problem as ``json.path: expected ...``, the
    path starting at ``at`` (where ``raw`` sits in its document)."""
    try:
        layout.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        return describe_error({**err, "loc": (*at, *err["loc"])})
    return None


def describe_error(err: dict) -> str:
    """One pydantic error as ``json.path: expected ..., got ...``."""
    loc = tuple(err["loc"])
    if err["type"] == "missing":
        return f"{json_path(loc[:-1])}: missing key '{loc[-1]}'"
    expected = EXPECTED.get(err["type"])
    bound = next((f"{word} {value}" for key, word in BOUNDS.items() if (value := (err.get("ctx") or {}).get(key))
                  is not None), None)
    if expected is None:
        expected = f"expected a number {bound}" if bound else err["msg"].removeprefix("Value error, ")
    return f"{json_path(loc)}: {expected}, got {shown(err.get('input'))}"


def json_path(loc: tuple) -> str:
    """``("data", 0, "title")`` -> ``data[0].title``; the empty path is ``top level``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).isidentifier():
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "top level"


def shown(value: Any) -> str:
    """A JSON value in words: ``null``, ``true``, ``a number (3)``, ``a string ('x')``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"a number ({value!r:.40})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "an object" if isinstance(value, dict) else type(value).__name__
