"""The readers of a retrieval set's three files in the BEIR layout (Thakur et al. 2021), read unchanged.

- ``corpus.jsonl``: one object per line, ``{"_id", "title", "text"}`` (``title`` may be missing or
  null). The document's text is ``title + " " + text`` when the title is non-empty, else ``text``,
  as BEIR joins them.
- ``queries.jsonl``: one object per line, ``{"_id", "text"}``.
- ``qrels/<split>.tsv``: a header line ``query-id  corpus-id  score`` (tab-separated), then one
  judgment per line; the score is graded relevance, a whole number of 0 or more (0: judged not
  relevant).

An ``_id`` may be a JSON string or integer (read as its digits). Each reader yields one
:class:`~tinyplm.tasks.readers.rows.Row` per record, its item a :class:`Record` or a
:class:`Judgment`; a bad record is an error row naming the file, the line and what was expected.
Whether the ids of the three files agree is checked by their caller
(:func:`tinyplm.tasks.retrieval.read_beir`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tinyplm.tasks.io import at, quoted
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.readers.fields import check_text, missing, record_rows, text_value
from tinyplm.tasks.readers.jsonl import read_json_lines
from tinyplm.tasks.readers.rows import Line, Row, RowError
from tinyplm.tasks.readers.table import read_table, require_columns

#: The columns of a qrels file, as its header line names them.
QRELS_COLUMNS = ("query-id", "corpus-id", "score")


@dataclass(frozen=True)
class Record:
    """One document or query: its ``id``, its ``text`` and the ``line`` it is on."""

    id: str
    text: str
    line: int


@dataclass(frozen=True)
class Judgment:
    """One qrels row: ``query`` id, ``doc`` id, graded ``relevance`` (0: not relevant), its ``line``."""

    query: str
    doc: str
    relevance: int
    line: int


def read_records(lines: Iterable[Line], name: str, titled: bool) -> Iterator[Row]:
    """One row per non-blank line of a ``corpus.jsonl`` (``titled``: its ``title`` joined to the text)
    or ``queries.jsonl`` (only ``text`` read); ``name`` is the file in messages."""
    return record_rows(read_json_lines(lines, name), lambda values, line: _record(values, line, titled))


def _record(values: Mapping[str, object], line: int, titled: bool) -> Record:
    """The :class:`Record` of one JSON object; raises :class:`RowError`."""
    ident = record_id(values, "_id")
    if not titled:
        return Record(ident, text_value(values, "text"), line)
    if "text" not in values:
        raise missing("text", values)
    text, title = values["text"], values.get("title")
    if not isinstance(text, str):
        raise RowError(f"key 'text' holds {shown(text)}, expected a string")
    if title is not None and not isinstance(title, str):
        raise RowError(f"key 'title' holds {shown(title)}, expected a string or null")
    joined = f"{title} {text}" if title else text
    return Record(ident, check_text(joined, "keys 'title' and 'text' (the document)"), line)


def record_id(values: Mapping[str, object], key: str) -> str:
    """``values[key]`` as an id: a non-empty string, or an integer's digits; raises :class:`RowError`."""
    if key not in values:
        raise missing(key, values)
    value = values[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"key '{key}' holds {shown(value)}, expected a non-empty string or an integer")
    return value


def read_judgments(lines: Iterable[Line], name: str) -> Iterator[Row]:
    """One row per judgment of a qrels file; raises ``DataError`` (naming ``name`` and the line) for
    an empty file or a header line without the :data:`QRELS_COLUMNS`."""
    table = read_table(lines, name, tsv=True)
    require_columns(table.names, QRELS_COLUMNS, at(name, table.header_line or 1))
    return record_rows(table.rows, _judgment)


def _judgment(values: Mapping[str, object], line: int) -> Judgment:
    """The :class:`Judgment` of one qrels row; raises :class:`RowError`."""
    query, doc, score = (str(values[column]) for column in QRELS_COLUMNS)
    for column, ident in zip(QRELS_COLUMNS, (query, doc), strict=False):
        if not ident.strip():
            raise RowError(f"empty {column}")
    score = score.strip()
    if not (score.isascii() and score.isdigit()):
        raise RowError(f"score {quoted(score)} is not a whole number of 0 or more (graded relevance)")
    return Judgment(query, doc, int(score), line)
