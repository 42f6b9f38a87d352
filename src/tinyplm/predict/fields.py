"""One record's named fields (a CSV/TSV row, a JSON object) -> one prediction input, checked.

:class:`Columns` says which fields hold what for the model's head; :func:`build_input` makes the
:mod:`~tinyplm.inference.records` input or raises :class:`RowError` with a message naming the field
(the caller adds the file and line). :func:`default_columns` picks the columns of a table from its
header: the run's GLUE task's own columns when known, else the first known layout present.
:func:`headerless_layout` names the columns of the tasks whose files have no header line (CoLA,
TV Tropes), so such a file can be predicted as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tinyplm.errors import DataError
from tinyplm.inference.records import Input, QAInput, TextInput, TokensInput
from tinyplm.tasks.glue import GLUE_SPECS
from tinyplm.tasks.heads import Head
from tinyplm.tasks.io import encodable
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.spoilers import BINARY, TVTROPES_COLUMNS


class RowError(ValueError):
    """One record cannot be an input (the message names the field and what was expected)."""


@dataclass(frozen=True)
class Columns:
    """Field names: ``text`` (sequence: the text; span: the question; token: the words, a list or a
    space-separated string), ``pair`` (sequence: the second text; span: the context), ``pair_required``
    (False: a record without ``pair`` is a single text), ``id`` (span: echoed when present)."""

    text: str
    pair: str | None = None
    pair_required: bool = False
    id: str | None = None


#: Text/pair layouts tried on a table header, pairs first (GLUE's own, then the generic names).
TABLE_LAYOUTS: tuple[tuple[str, str | None], ...] = (
    ("text", "text_pair"),
    *dict.fromkeys((s.text, s.pair) for s in GLUE_SPECS.values() if s.pair),
    ("text", None),
    *dict.fromkeys((s.text, None) for s in GLUE_SPECS.values() if not s.pair and not s.columns),
)


@dataclass(frozen=True)
class HeaderlessLayout:
    """The columns of a task's files that have no header line, which of them is the text, and
    the values its ``label`` column holds (a header line's name there would be none of them)."""

    columns: tuple[str, ...]
    text: str
    labels: tuple[str, ...] = ("0", "1")

    def is_data(self, fields: list[str]) -> bool:
        """Whether ``fields`` read as a record of this layout (not as a header line naming columns)."""
        if len(fields) != len(self.columns) or "label" not in self.columns:
            return False
        names = {*self.columns, "text", "text_pair"}
        return (fields[self.columns.index("label")].strip() in self.labels
                and not any(f.strip().lower() in names for f in fields))


def headerless_layout(task: str | None) -> HeaderlessLayout | None:
    """The layout of ``task``'s header-less files (GLUE's CoLA, TV Tropes), else None."""
    spec = GLUE_SPECS.get(task or "")
    if spec is not None and spec.columns:
        return HeaderlessLayout(tuple(spec.columns), spec.text, tuple(spec.labels))
    if task == "tvtropes_spoilers":
        return HeaderlessLayout(TVTROPES_COLUMNS, "sentence", BINARY)
    return None


def head_columns(head: Head, text: str | None, pair: str | None) -> Columns:
    """The fields of a JSON object for ``head``: the user's names, else ``text``/``text_pair``
    (sequence), ``question``/``context``/``id`` (span) or ``tokens`` (token)."""
    if head == Head.SPAN:
        return Columns(text or "question", pair or "context", True, "id")
    if head == Head.TOKEN:
        return Columns(text or "tokens")
    return Columns(text or "text", pair or "text_pair", pair is not None)


def default_columns(header: Sequence[str], head: Head, task: str | None, text: str | None,
                    pair: str | None, where: str) -> Columns:
    """The columns of a table whose header is ``header`` (see the module docstring). Raises
    ``DataError`` at ``where`` when a named column is missing or no known layout is present."""
    found = set(header)
    if head != Head.SEQUENCE:
        cols = head_columns(head, text, pair)
        if head == Head.TOKEN and text is None and "tokens" not in found and "text" in found:
            cols = Columns("text")
    elif text is not None:
        cols = Columns(text, pair, pair is not None)
    else:
        spec = GLUE_SPECS.get(task or "")
        layouts = ([(spec.text, spec.pair)] if spec and not spec.columns else []) + list(TABLE_LAYOUTS)
        first = next(((t, p) for t, p in layouts if t in found and (p is None or p in found)), None)
        if first is None:
            raise DataError(f"{where}: no text column found among {', '.join(map(repr, header)) or 'none'}; "
                            "name it with --text-column (and --pair-column for pairs)")
        cols = Columns(first[0], pair or first[1], (pair or first[1]) is not None)
    needed = [cols.text] + ([cols.pair] if cols.pair and cols.pair_required else [])
    missing = [name for name in needed if name not in found]
    if missing:
        raise DataError(f"{where}: missing column {missing[0]!r}; found columns: "
                        f"{', '.join(map(repr, header)) or 'none'}")
    return cols


def build_input(head: Head, values: Mapping[str, object], cols: Columns) -> Input:
    """The input ``values`` describe; raises :class:`RowError`."""
    if head == Head.SPAN:
        ident = values.get(cols.id) if cols.id else None
        if ident is not None and not isinstance(ident, str | int):
            raise RowError(f"'{cols.id}' holds {shown(ident)}, expected a string")
        return QAInput(text_field(values, cols.text), text_field(values, cols.pair),
                       None if ident is None else str(ident))
    if head == Head.TOKEN:
        return TokensInput(_words(values, cols.text))
    pair = None
    if cols.pair and (cols.pair_required or values.get(cols.pair) is not None):
        pair = text_field(values, cols.pair)
    return TextInput(text_field(values, cols.text), pair)


def text_field(values: Mapping[str, object], key: str) -> str:
    """``values[key]`` as a non-empty text (unchanged); raises :class:`RowError`."""
    if key not in values:
        raise RowError(f"missing '{key}'; found {', '.join(map(repr, values)) or 'nothing'}")
    value = values[key]
    if not isinstance(value, str):
        raise RowError(f"'{key}' holds {shown(value)}, expected a string")
    return check_text(value, key)


def check_text(value: str, key: str) -> str:
    """``value`` unless it is empty, only whitespace or not UTF-8; raises :class:`RowError`."""
    if not value.strip():
        raise RowError(f"empty text in '{key}'")
    if not encodable(value):
        raise RowError(f"'{key}' is not valid UTF-8 text (undecodable bytes or an unpaired surrogate escape)")
    return value


def _words(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    """A sentence's words: a list of strings, or a string split on whitespace."""
    value = values.get(key)
    if isinstance(value, str):
        return tuple(check_text(value, key).split())
    if not isinstance(value, list) or not value:
        got = "nothing" if key not in values else shown(value)
        raise RowError(f"'{key}' holds {got}, expected a non-empty list of words or a text")
    for i, word in enumerate(value):
        if not isinstance(word, str) or not word.strip() or any(c.isspace() for c in word):
            raise RowError(f"'{key}'[{i}] holds {shown(word)}, expected a word (a non-empty string without spaces)")
        check_text(word, f"{key}[{i}]")
    return tuple(value)
