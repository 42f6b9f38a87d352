"""The one CSV/TSV reader: GLUE's TSV (no quoting: a ``"`` is an ordinary character, every record
one line) and CSV (normal quoting, a record may span lines), with or without a header line.

:func:`read_table` takes decoded lines and yields one :class:`~tinyplm.tasks.readers.rows.Row` per
non-blank record, its ``item`` the record as a ``{column: field}`` dict. A record is located at its
first line. A line holding only separators and spaces is blank. An undecodable line, a line the
``csv`` module cannot split or a record of the wrong width is an error row; an empty file, or a
header line that cannot be read, raises ``DataError`` at once.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tinyplm.errors import DataError
from tinyplm.tasks.readers.rows import Line, Row

#: The longest field read, in characters. Python's csv module refuses fields over 131,072 characters
#: by default; a long document (a review, a SQuAD context, a page of text to embed) is valid input,
#: and memory is its real bound. 2**31 - 1: the largest the module takes on every platform (a C long).
FIELD_LIMIT = 2**31 - 1

#: Given the first record's fields: (the column names, whether that record is a header line naming them).
Header = Callable[[list[str]], tuple[list[str], bool]]


def first_is_header(first: list[str]) -> tuple[list[str], bool]:
    """The common case: the first record names the columns."""
    return [name.strip() for name in first], True


def fixed_columns(columns: Iterable[str]) -> Header:
    """A file without a header line whose columns are ``columns``."""
    return lambda first: (list(columns), False)


@dataclass(frozen=True)
class Table:
    """An opened table: its column ``names``, the ``header_line`` naming them (None: the file has
    none; then the first record is a row), its ``rows`` in file order, and the ``first_line`` of
    its first record (the header's, or the first row's)."""

    names: list[str]
    header_line: int | None
    rows: Iterator[Row]
    first_line: int = 1


def read_table(lines: Iterable[Line], name: str, tsv: bool, header: Header = first_is_header) -> Table:
    """The table in ``lines`` (see the module docstring); ``name`` is the file in messages, ``header``
    decides the columns from the first record. Raises ``DataError`` for an empty file or an unreadable
    first record that is a header."""
    bad: dict[int, str] = {}  # undecodable lines not yet reported

    def texts() -> Iterator[str]:
        for number, text, error in lines:
            if error:
                bad[number] = error
            yield text + "\n"

    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # process-wide: never lowered here
    # strict: a quoted field never closed is an error, not the rest of the file read as one field
    reader = csv.reader(texts(), delimiter="\t" if tsv else ",", quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL,
                        strict=True)
    records = _records(reader, name, bad)
    first = next(records, None)
    if first is None:
        raise DataError(f"{name}: holds no examples (the file is empty; expected a header line naming the "
                        "columns, or rows)")
    if first.error is not None and first.item is None:
        raise DataError(first.error)
    names, has_header = header(first.item)
    if has_header and first.error is not None:
        raise DataError(first.error)
    rows = _rows(records if has_header else _chain(first, records), names, tsv)
    return Table(names, first.line if has_header else None, rows, first.line)


def _chain(first: Row, rest: Iterator[Row]) -> Iterator[Row]:
    yield first
    yield from rest


def _records(reader, name: str, bad: dict[int, str]) -> Iterator[Row]:
    """Raw records: ``item`` the fields, ``error`` an undecodable line's (the fields kept) or a split error."""
    previous = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            where = f"{name}:{previous + 1}"
            why = "a quoted field opened here is never closed" if "unexpected end of data" in str(err) else str(err)
            yield Row(previous + 1, where, error=f"{where}: cannot split the line ({why})")
            previous = reader.line_num
            continue
        first, previous = previous + 1, reader.line_num
        problems = [bad.pop(n) for n in range(first, previous + 1) if n in bad]
        if fields and any(f.strip() for f in fields):
            where = f"{name}:{first}"
            yield Row(first, where, fields, f"{where}: {problems[0]}" if problems else None)


def _rows(records: Iterator[Row], names: list[str], tsv: bool) -> Iterator[Row]:
    """Records as ``{column: field}`` rows; a record of another width than ``names`` is an error row."""
    for record in records:
        if record.error is not None:
            yield Row(record.line, record.where, error=record.error)
        elif len(record.item) != len(names):
            sep = "tab-separated" if tsv else "comma-separated"
            yield Row(record.line, record.where,
                      error=f"{record.where}: expected {len(names)} {sep} fields, got {len(record.item)}")
        else:
            values: dict[str, str] = {}
            for column, field in zip(names, record.item, strict=True):
                values.setdefault(column, field)  # a name given twice: its first column
            yield Row(record.line, record.where, values)


def require_columns(names: list[str], required: Iterable[str | None], where: str,
                    twice: str = "rename the others") -> None:
    """Raise ``DataError`` at ``where`` naming the first of ``required`` that ``names`` lacks (and
    those found; a header of one column holding tabs is said to look tab-separated), or that the
    header names more than once (which of the columns is meant cannot be known; ``twice`` says what
    to do)."""
    for column in required:
        if column is not None and column not in names:
            shown = ", ".join(repr(c) for c in names) or "none"
            tabs = " (the header holds tabs: a tab-separated file is read as one when named .tsv)" if (
                len(names) == 1 and "\t" in names[0]) else ""
            raise DataError(f"{where}: missing column '{column}'; found columns: {shown}{tabs}")
        if column is not None and names.count(column) > 1:
            raise DataError(f"{where}: column '{column}' appears {names.count(column)} times in the header line; "
                            f"{twice}")
