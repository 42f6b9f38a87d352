"""The one JSON-lines reader, and the one reader of a whole JSON document (SQuAD).

:func:`read_json_lines` yields a :class:`~tinyplm.tasks.readers.rows.Row` per non-blank line, its
``item`` the parsed value; an undecodable line or one that is not JSON is an error row naming it.
What the value must be is the caller's (a custom task's object, a review, a prediction input).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from tinyplm.tasks.json_layout import parse_json
from tinyplm.tasks.readers.rows import Line, Row, line_rows, whole_text


def read_json_lines(lines: Iterable[Line], name: str) -> Iterator[Row]:
    """One row per non-blank line of ``lines`` (see the module docstring); ``name`` is the file in messages."""
    for row in line_rows(lines, name):
        if row.error is None and not row.item.strip():
            continue
        try:
            yield row if row.error else replace(row, item=json.loads(row.item))
        except (ValueError, RecursionError) as err:
            yield replace(row, item=None, error=f"{row.where}: not valid JSON ({getattr(err, 'msg', str(err)[:80])})")


def read_json_document(lines: Iterable[Line], name: str) -> Any:
    """The parsed JSON of a whole document; raises ``DataError`` naming ``name`` and the line (and
    column) of an undecodable byte or a syntax error."""
    return parse_json(whole_text(lines, name), name)
