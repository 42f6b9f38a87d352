"""The one reader of a scored text-pairs file: the similarity set an embedding model is judged on.

A pairs file is a CSV or TSV with a header line (TSV read as GLUE's, without quoting:
:func:`~tinyplm.tasks.readers.table.read_table`), or JSON lines of objects; the format comes from
the suffix (:func:`~tinyplm.tasks.readers.formats.format_of`). Each record names two texts and a
score, under one of the sets of names in :data:`PAIR_NAMES` and :data:`SCORE_NAMES`: the first set
the header (or the first JSON object) holds is read from every record. A file that holds none is a
``DataError`` naming the file, its line and the names expected; a bad record is an error row naming
its line (:func:`~tinyplm.tasks.readers.fields.sequence_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.io import at, no_examples
from tinyplm.tasks.readers.fields import Fields, Labels, sequence_rows
from tinyplm.tasks.readers.formats import format_of
from tinyplm.tasks.readers.jsonl import read_json_lines
from tinyplm.tasks.readers.rows import Row, file_lines
from tinyplm.tasks.readers.table import read_table

#: The accepted names of the two texts, in the order they are looked for (GLUE STS-B's first).
PAIR_NAMES: tuple[tuple[str, str], ...] = (("sentence1", "sentence2"), ("text1", "text2"))
#: The accepted names of the score (any finite number), in the order they are looked for.
SCORE_NAMES: tuple[str, ...] = ("score", "label")
#: The formats a pairs file may have (:data:`~tinyplm.tasks.readers.formats.SUFFIXES`).
PAIR_FORMATS = ("csv", "tsv", "jsonl")


def expected_names() -> str:
    """The accepted names in words, for messages."""
    texts = " or ".join(f"'{a}' and '{b}'" for a, b in PAIR_NAMES)
    scores = " or ".join(f"'{name}'" for name in SCORE_NAMES)
    return f"{texts} for the texts, and {scores} for the score"


def pair_fields(names: Iterable[str], where: str, noun: str = "columns") -> Fields:
    """The :class:`Fields` of the first accepted names (:data:`PAIR_NAMES`, :data:`SCORE_NAMES`)
    that ``names`` holds; raises ``DataError`` at ``where`` listing what is expected and what was
    found (``noun``: what the names are, columns or keys)."""
    names = list(names)
    texts = next(((a, b) for a, b in PAIR_NAMES if a in names and b in names), None)
    score = next((name for name in SCORE_NAMES if name in names), None)
    if texts is None or score is None:
        found = ", ".join(repr(name) for name in names[:12]) or "none"
        raise DataError(f"{where}: expected {noun} {expected_names()}; found {noun}: {found}")
    return Fields(text=texts[0], pair=texts[1], label=score)


def read_pair_rows(path: Path) -> Iterator[Row]:
    """One row per record of the pairs file at ``path``, its item an
    :class:`~tinyplm.tasks.base.Example` (``text``, ``text_pair``, ``label`` the score as a float).
    Raises ``DataError`` for a missing, empty or undecodable-header file, an unknown suffix or names
    that are not accepted; later bad records are error rows."""
    path = Path(path)
    kind = format_of(path)
    if kind in ("csv", "tsv"):
        table = read_table(file_lines(path), str(path), tsv=kind == "tsv")
        fields = pair_fields(table.names, at(path, table.header_line or 1))
        rows: Iterator[Row] = table.rows
    elif kind == "jsonl":
        first, rows = _first(read_json_lines(file_lines(path), str(path)))
        if first is None:
            raise no_examples(path, f"the file is empty; expected JSON objects with {expected_names()}")
        if first.error is not None:
            raise DataError(first.error)
        if not isinstance(first.item, dict):
            raise DataError(f"{first.where}: expected a JSON object with {expected_names()}, "
                            f"got {type(first.item).__name__}")
        fields = pair_fields(first.item, first.where, "keys")
    else:
        raise DataError(f"{path}: unknown pairs file type '{path.suffix}'; expected .csv, .tsv or .jsonl")
    return sequence_rows(rows, fields, Labels(regression=True), path)


def _first(rows: Iterator[Row]) -> tuple[Row | None, Iterator[Row]]:
    """The first of ``rows`` (None when there is none) and all of them again, that one included."""
    first = next(rows, None)

    def again() -> Iterator[Row]:
        if first is not None:
            yield first
        yield from rows

    return first, again()
