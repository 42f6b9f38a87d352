"""Which fields of a record (a CSV/TSV row, a JSON object) the model's head reads, and the records
as items (:func:`item_rows`).

:func:`head_columns` and :func:`default_columns` say which fields
(:class:`~tinyplm.tasks.readers.fields.Fields`, as the training readers name them) hold what for
the model's head: ``text`` (sequence: the text; span: the question; token: the words, a list or a
space-separated string), ``pair`` (sequence: the second text; span: the context; ``pair_required``
False: a record without it is a single text), ``id`` (span: echoed when present). A sequence model's text and pair
are read by the training readers' own :func:`~tinyplm.tasks.readers.fields.sequence_rows`, a
question or a sentence by :func:`build_input`, which raises :class:`RowError` naming the field (the
caller adds the file and line). :func:`default_columns` picks the columns of a table from its
header: the run's GLUE task's own columns when known, else the first known layout present.
:func:`headerless_layout` names the columns of the tasks whose files have no header line (CoLA,
TV Tropes), so such a file can be predicted as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from tinyplm.errors import DataError
from tinyplm.inference.pairs import trained_on
from tinyplm.inference.records import Input, QAInput, TextInput, TokensInput
from tinyplm.tasks.glue import GLUE_SPECS
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.io import has_visible
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.readers.fields import Fields, check_text, record_rows, sequence_rows, text_value
from tinyplm.tasks.readers.rows import Row, RowError
from tinyplm.tasks.readers.table import require_columns
from tinyplm.tasks.spoilers import BINARY, TVTROPES_COLUMNS

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


def head_columns(head: Head, text: str | None, pair: str | None) -> Fields:
    """The fields of a JSON object for ``head``: the user's names, else the head row's ``fields``:
    ``text``/``text_pair`` (sequence), ``question``/``context``/``id`` (span), ``tokens`` (token),
    ``text`` (embedding). A head without a second field reads none, whatever ``pair`` says."""
    own = Head(head).row.fields
    if own.pair is None:
        return Fields(text or own.text, id=own.id)
    return Fields(text or own.text, pair or own.pair, pair_required=own.pair_required or pair is not None, id=own.id)


def default_columns(header: Sequence[str], head: Head, task: str | None, text: str | None,
                    pair: str | None, where: str, pairs: bool | None = None) -> Fields:
    """The columns of a table whose header is ``header`` (see the module docstring); ``pairs``: whether
    the model's task reads pairs of texts (None: either), which keeps to the layouts of its kind.
    Raises ``DataError`` at ``where`` when a named column is missing, no known layout is present,
    or a pair model is given one text column."""
    found = set(header)
    row = Head(head).row
    if not row.task_texts:
        cols = head_columns(head, text, pair)
        if row.words and text is None and row.fields.text not in found and "text" in found:
            cols = Fields("text")
    elif text is not None:
        if pairs and pair is None:
            raise DataError(f"{where}: --text-column {text!r} without --pair-column, but {trained_on(task, True)}; "
                            "name the second text's column with --pair-column")
        cols = Fields(text, pair, pair_required=pair is not None)
    else:
        spec = GLUE_SPECS.get(task or "")
        layouts = ([(spec.text, spec.pair)] if spec and not spec.columns else []) + list(TABLE_LAYOUTS)
        layouts = [(t, p) for t, p in layouts if pairs is None or (p is not None) == pairs or pair is not None]
        first = next(((t, p) for t, p in layouts if t in found and (p is None or p in found)), None)
        if first is None:
            columns = ', '.join(map(repr, header)) or 'none'
            if pairs:
                raise DataError(f"{where}: no pair of text columns found among {columns}, but "
                                f"{trained_on(task, True)}; name them with --text-column and --pair-column")
            raise DataError(f"{where}: no text column found among {columns}; "
                            "name it with --text-column (and --pair-column for pairs)")
        cols = Fields(first[0], pair or first[1], pair_required=(pair or first[1]) is not None)
    require_columns(list(header), [cols.text, cols.pair if cols.pair_required else None], where,
                    twice="if the file has no header line, pass --no-header (its columns are then numbered from 1)")
    return cols


def item_rows(rows: Iterable[Row], head: Head, cols: Fields, name: str) -> Iterator[Row]:
    """``rows`` of records (a table row's dict, a parsed JSON line) as rows of items for ``head``: the
    task's texts by the training readers' own :func:`~tinyplm.tasks.readers.fields.sequence_rows`
    (no label read), any other head's example by :func:`build_input`."""
    if Head(head).row.task_texts:
        return sequence_rows(rows, cols, None, name)
    return record_rows(rows, lambda values, line: build_input(head, values, cols))


def build_input(head: Head, values: Mapping[str, object], cols: Fields) -> Input:
    """The question (span), the sentence (token) or the text (embedding) ``values`` describe, by the
    head's entry of :data:`BUILDERS`; raises :class:`RowError`."""
    return BUILDERS[head](values, cols)


def _question(values: Mapping[str, object], cols: Fields) -> QAInput:
    ident = values.get(cols.id) if cols.id else None
    if ident is not None and (not isinstance(ident, str | int) or isinstance(ident, bool)):
        raise RowError(f"'{cols.id}' holds {shown(ident)}, expected a string or a whole number")
    return QAInput(text_value(values, cols.text), text_value(values, cols.pair), None if ident is None else str(ident))


def _sentence(values: Mapping[str, object], cols: Fields) -> TokensInput:
    return TokensInput(_words(values, cols.text))


def _text(values: Mapping[str, object], cols: Fields) -> TextInput:
    return TextInput(text_value(values, cols.text))


def _words(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    """A sentence's words: a list of strings, or a string split on whitespace."""
    value = values.get(key)
    if isinstance(value, str):
        return tuple(check_text(value, f"column '{key}'").split())
    if not isinstance(value, list) or not value:
        got = "nothing" if key not in values else shown(value)
        raise RowError(f"'{key}' holds {got}, expected a non-empty list of words or a text")
    for i, word in enumerate(value):
        if not isinstance(word, str) or not has_visible(word) or any(c.isspace() for c in word):
            raise RowError(f"'{key}'[{i}] holds {shown(word)}, expected a word (a string without spaces, "
                           "not only invisible characters)")
        check_text(word, f"'{key}'[{i}]")
    return tuple(value)


#: One example of a head from a record's values (the task's texts are read by ``sequence_rows``).
BUILDERS: PerHead = PerHead("input built from a record's fields",
                            {Head.SPAN: _question, Head.TOKEN: _sentence, Head.EMBEDDING: _text})
