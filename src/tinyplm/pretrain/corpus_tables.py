"""Corpus text kept in tables: one text per row of a CSV, TSV or JSON-lines file.

Unlabelled text often comes as a table whose one column is the text (review sentences with their
book and rating, a scrape with its URL). A corpus path ending in one of :data:`TABLE_SUFFIXES` is
read as such a table: each row's ``text_field`` (``corpus.text_field`` of a recipe) is one item,
whitespace collapsed. Tables are read only where named as files: a folder's corpus is its
``*.txt`` files (:func:`tinyplm.pretrain.corpus.corpus_files`).

Read with the standard library's ``csv`` and ``json`` (the tables are small enough to hold, and
pandas would add nothing but a dependency here).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tinyplm.errors import DataError

#: File endings read as tables, and the CSV delimiter of each (None: JSON lines).
TABLE_SUFFIXES: dict[str, str | None] = {".csv": ",", ".tsv": "\t", ".jsonl": None}


def is_table(path: Path) -> bool:
    """True when ``path`` is read as a table (its ending is one of :data:`TABLE_SUFFIXES`)."""
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def table_items(path: Path, text: str, text_field: str | None, min_chars: int = 20) -> list[str]:
    """The ``text_field`` of every row of the table ``path`` (its decoded ``text``), whitespace
    collapsed, those of at least ``min_chars`` characters. Raises ``DataError`` naming the file
    (and line) when ``text_field`` is not given, is not a column of the table, a JSON line is not
    an object or its field is not a string."""
    path = Path(path)
    delimiter = TABLE_SUFFIXES[path.suffix.lower()]
    rows = _json_rows(path, text) if delimiter is None else _csv_rows(path, text, delimiter)
    if text_field is None:
        raise DataError(f"{path}: a table; name the field holding the text (corpus.text_field in a recipe, "
                        f"--text-field on the command line; its fields: {_fields(rows)})")
    out: list[str] = []
    for line, row in rows:
        if text_field not in row:
            raise DataError(f"{path}:{line}: no field {text_field!r} (the text field asked for); this row has "
                            f"{', '.join(map(repr, row)) or 'none'}")
        value = row[text_field]
        if value is None:
            continue  # an empty cell
        if not isinstance(value, str):
            raise DataError(f"{path}:{line}: field {text_field!r} holds {type(value).__name__}, expected text")
        flat = " ".join(value.split())
        if len(flat) >= min_chars:
            out.append(flat)
    return out


def _fields(rows: list[tuple[int, dict]]) -> str:
    return ", ".join(repr(k) for k in rows[0][1]) if rows else "none: the table is empty"


def _csv_rows(path: Path, text: str, delimiter: str) -> list[tuple[int, dict]]:
    """(line of the row's start, row) for each row under the header; a short row's missing cells are None."""
    reader = csv.DictReader(text.splitlines(keepends=True), delimiter=delimiter)
    try:
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not a valid {path.suffix[1:].upper()} row ({exc})") from None
    if reader.fieldnames is None:
        raise DataError(f"{path}: empty table (expected a header line naming its columns)")
    return rows


def _json_rows(path: Path, text: str) -> list[tuple[int, dict]]:
    rows = []
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{line}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{line}: a JSON {type(row).__name__}; expected an object with the text field")
        rows.append((line, row))
    return rows
