"""Corpus text kept in tables: one text (or one pair of texts) per row of a CSV, TSV or JSON-lines file.

Unlabelled text often comes as a table whose one column is the text (review sentences with their
book and rating, a scrape with its URL). A corpus path ending in one of :data:`TABLE_SUFFIXES` is
read as such a table: each row's ``text_field`` (``corpus.text_field`` of a recipe) is one item,
whitespace collapsed. A ``.json`` file is JSON lines or one array of objects (a file of JSON lines is
often named so; read as plain text, its keys and braces were trained on); a compressed file's ending
is the one before its ``.gz``. A pair task's unlabelled examples come as two columns of one table (a
question and a sentence, two sentences): :func:`table_pairs` reads ``text_field`` and
``pair_field`` of each row. Tables are read only where named as files: a folder's corpus is its
``*.txt`` files (:func:`tinyplm.pretrain.corpus.corpus_files`).

CSV and TSV go through the project's one table reader (:mod:`tinyplm.tasks.readers.table`: a TSV as
GLUE writes it, without quoting, so a GLUE file's texts read as its task's do; a CSV with normal
quoting); JSON lines through the standard library's ``json`` (the tables are small enough to hold).
"""

from __future__ import annotations

import json
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.readers.table import read_table

#: File endings read as tables, and whether each is tab-separated (None: JSON lines, or for
#: ``.json`` also one array of objects).
TABLE_SUFFIXES: dict[str, bool | None] = {".csv": False, ".tsv": True, ".jsonl": None, ".json": None}


def table_suffix(path: Path) -> str:
    """The file's ending, lower-cased, the one before ``.gz`` for a compressed file."""
    path = Path(path)
    return (path.with_suffix("") if path.suffix.lower() == ".gz" else path).suffix.lower()


def is_table(path: Path) -> bool:
    """True when ``path`` is read as a table (its ending is one of :data:`TABLE_SUFFIXES`)."""
    return table_suffix(path) in TABLE_SUFFIXES


def table_items(path: Path, text: str, text_field: str | None, min_chars: int = 20) -> list[str]:
    """The ``text_field`` of every row of the table ``path`` (its decoded ``text``), whitespace
    collapsed, those of at least ``min_chars`` characters. Raises ``DataError`` naming the file
    (and line) when ``text_field`` is not given, is not a column of the table, a row cannot be read
    (a CSV or TSV record of another width than the header), a JSON line is not an object or its
    field is not a string."""
    rows = _rows(Path(path), text, text_field)
    return [flat for where, row in rows if len(flat := _cell(where, row, text_field)) >= min_chars]


def table_pairs(path: Path, text: str, text_field: str | None, pair_field: str) -> list[tuple[str, str]]:
    """``(text_field, pair_field)`` of every row of the table ``path`` whose two cells both hold
    text, whitespace collapsed; raises ``DataError`` as :func:`table_items` does, for either field."""
    rows = _rows(Path(path), text, text_field)
    pairs = [(_cell(where, row, text_field), _cell(where, row, pair_field)) for where, row in rows]
    return [(a, b) for a, b in pairs if a and b]


def _rows(path: Path, text: str, text_field: str | None) -> list[tuple[str, dict]]:
    """(where, row) of every row of the table (where: ``FILE:LINE``, or ``FILE: item N`` of a JSON
    array), once the text field is known to be named."""
    suffix = table_suffix(path)
    tsv = TABLE_SUFFIXES[suffix]
    document = _json_document_rows(path, text) if suffix == ".json" else None
    if document is not None:
        rows = document
    else:
        rows = _json_rows(path, text) if tsv is None else _csv_rows(path, text, tsv)
    if text_field is None:
        raise DataError(f"{path}: a table; name the field holding the text (corpus.text_field in a recipe, "
                        "family.embeddings.text_field or family.bilm.text_field beside a student's own corpus, "
                        f"--text-field on the command line; its fields: {_fields(rows)})")
    return rows


def _cell(where: str, row: dict, field: str) -> str:
    """The row's ``field``, whitespace collapsed ('' for an empty cell); ``where`` names the row."""
    if field not in row:
        raise DataError(f"{where}: no field {field!r} (the text field asked for); this row has "
                        f"{', '.join(map(repr, row)) or 'none'}")
    value = row[field]
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{where}: field {field!r} holds {type(value).__name__}, expected text")
    return " ".join(value.split())


def _fields(rows: list[tuple[str, dict]]) -> str:
    return ", ".join(repr(k) for k in rows[0][1]) if rows else "none: the table is empty"


def _csv_rows(path: Path, text: str, tsv: bool) -> list[tuple[str, dict]]:
    """(line of the row's start, row) for each row under the header; the first unreadable row (a
    record of another width than the header, a line that cannot be split) raises ``DataError``."""
    if not text.strip():
        raise DataError(f"{path}: empty table (expected a header line naming its columns)")
    lines = ((number, line, None) for number, line in enumerate(text.split("\n"), 1))
    table = read_table(lines, str(path), tsv=tsv)
    rows = []
    for row in table.rows:
        if row.error is not None:
            raise DataError(row.error)
        rows.append((f"{path}:{row.line}", row.item))
    return rows


def _json_document_rows(path: Path, text: str) -> list[tuple[str, dict]] | None:
    """The rows of a ``.json`` file that is one JSON document: an array of objects, each a row; a
    single object over several lines (a dataset's one document, SQuAD's say) raises ``DataError``.
    None when the file is not one document (JSON lines, or broken: :func:`_json_rows` says where)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(doc, dict) and len(text.strip().split("\n")) == 1:
        return None  # JSON lines of one row
    if not isinstance(doc, list):
        raise DataError(f"{path}: one JSON {_kind(doc)}, not rows; a corpus table in JSON is JSON lines (one "
                        "object per line) or an array of objects, each holding the text field")
    for number, row in enumerate(doc, 1):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {number} of the array is a JSON {_kind(row)}; expected an object with "
                            "the text field")
    return [(f"{path}: item {number}", row) for number, row in enumerate(doc, 1)]


def _json_rows(path: Path, text: str) -> list[tuple[str, dict]]:
    rows = []
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{line}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{line}: a JSON {_kind(row)}; expected an object with the text field")
        rows.append((f"{path}:{line}", row))
    return rows


def _kind(value: object) -> str:
    """What a parsed JSON value is, in JSON's words (an object, not a dict)."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), "null")
