"""The input formats and which file suffix means which: the one table that both a custom task
(``.csv``, ``.jsonl``) and ``tinyplm predict`` (every format) read a file's format from."""

from __future__ import annotations

from pathlib import Path

#: Every format a reader exists for (:mod:`tinyplm.tasks.readers`).
FORMATS = ("text", "csv", "tsv", "jsonl", "squad", "conll", "reviews")
#: File suffix -> format; any other suffix is plain text.
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "squad", ".conll": "conll"}
#: The suffixes of JSON files, which hold reviews when the task is the Goodreads-reviews one.
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")


def format_of(path: Path | str) -> str:
    """The format ``path``'s suffix names (:data:`SUFFIXES`), ``text`` for any other."""
    return SUFFIXES.get(Path(path).suffix.lower(), "text")
