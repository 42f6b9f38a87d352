"""Prediction inputs from tables (CSV, TSV) and from the official SQuAD JSON, read by the training
readers; here is only what prediction decides itself: which columns to read (a header line or
not, the columns the user named). See :mod:`tinyplm.predict.inputs` for the formats."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tinyplm.errors import DataError
from tinyplm.predict.fields import default_columns, headerless_layout, item_rows
from tinyplm.predict.sources import Row, Source
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers import table as reader
from tinyplm.tasks.readers.fields import Fields
from tinyplm.tasks.readers.rows import Line
from tinyplm.tasks.squad import read_squad_document, squad_articles


def read_table(source: Source, lines: Iterable[Line]) -> Iterator[Row]:
    """Rows of a CSV (normal quoting) or TSV (GLUE's: no quoting) file, read by the one table reader
    (:func:`tinyplm.tasks.readers.table.read_table`); a row's ``line`` is its first line. The first
    line is a header naming the columns unless the file has none (:func:`table_columns`). Raises
    ``DataError`` for an empty file or a header without the needed columns."""
    table, cols = _table(source, lines)
    return item_rows(table.rows, source.head, cols, source.name)


def _table(source: Source, lines: Iterable[Line]) -> tuple[reader.Table, Fields]:
    """The table in ``lines`` (its rows not read yet) and the columns its examples are read from."""
    table = reader.read_table(lines, source.name, source.format == "tsv", lambda first: table_columns(source, first))
    return table, _columns(source, table.names, table.header_line is not None, table.first_line)


def columns_read(source: Source, lines: Iterable[Line]) -> str:
    """The columns :func:`read_table` reads the examples of the table in ``lines`` from, for the
    user to see (``column 'sentence'``, ``columns 'sentence1' and 'sentence2'``; a header-less
    file's are named by number as well): the choice among known layouts is otherwise silent.
    Only the first record is read. Raises ``DataError`` as :func:`read_table` does."""
    table, cols = _table(source, lines)
    named = [_shown_column(name, table.names, table.header_line is not None)
             for name in (cols.text, cols.pair) if name is not None]
    return f"column{'s' if len(named) > 1 else ''} {' and '.join(named)}"


def _shown_column(name: str, names: list[str], has_header: bool) -> str:
    """``name`` quoted; a header-less file's column also by its number (its name alone if it is one)."""
    if has_header or name not in names:
        return repr(name)
    number = names.index(name) + 1
    return f"number {number}" if name == str(number) else f"{name!r} (number {number})"


def table_columns(source: Source, first: list[str]) -> tuple[list[str], bool]:
    """(column names, whether ``first``, the first record, is a header line naming them).

    ``source.header`` decides when the user set it (``--header``/``--no-header``). Left unset, a
    file of a task whose files have no header (:func:`~tinyplm.predict.fields.headerless_layout`:
    CoLA, TV Tropes) is read as one when its first record reads as that layout's data (its width, a
    label in its label column, no column name; :meth:`~tinyplm.predict.fields.HeaderlessLayout.is_data`);
    every other file has a header. Without a header the columns are the task layout's names (when
    the width fits) or numbers from 1, as ``cut -f`` counts them."""
    layout = headerless_layout(source.task)
    fits = layout is not None and len(first) == len(layout.columns)
    has_header = source.header
    if has_header is None:
        has_header = layout is None or not layout.is_data(first)
    if has_header:
        return reader.first_is_header(first)
    if fits:
        return list(layout.columns), False
    return [str(i) for i in range(1, len(first) + 1)], False


def _columns(source: Source, names: list[str], has_header: bool, line: int) -> Fields:
    """The :class:`~tinyplm.tasks.readers.fields.Fields` of a table whose columns are ``names``;
    raises ``DataError``."""
    where = f"{source.name}:{line}"
    text, pair = source.text_column, source.pair_column
    if not has_header:  # a column number names the column of that place
        text, pair = (_numbered(names, given, where) for given in (text, pair))
    if not has_header and text is None and Head(source.head).row.task_texts:
        layout = headerless_layout(source.task)
        if layout is not None and names == list(layout.columns):
            text = layout.text
        elif len(names) == 1:
            text = names[0]
        else:
            raise DataError(f"{where}: the file has no header line, so name its text column by number (1 to "
                            f"{len(names)}) with --text-column")
    cols = default_columns(names, source.head, source.task, text, pair, where, source.pairs)
    for name in (cols.text, cols.pair):
        if name is not None and names.count(name) > 1:
            raise DataError(f"{where}: column {name!r} appears {names.count(name)} times in the header line; if "
                            "the file has no header line, pass --no-header (its columns are then numbered from 1)")
    return cols


def _numbered(names: list[str], given: str | None, where: str) -> str | None:
    """The name of column number ``given`` (from 1) of a header-less table, or ``given`` itself
    when it is not a number; raises ``DataError`` for a number beyond the row's columns."""
    if given is None or not given.strip().isdigit():
        return given
    number = int(given)
    if not 1 <= number <= len(names):
        raise DataError(f"{where}: column {number} asked for, but the rows have {len(names)} columns (1 to "
                        f"{len(names)}: {', '.join(map(repr, names))})")
    return names[number - 1]


def read_squad_json(source: Source, lines: Iterable[Line]) -> Iterator[Row]:
    """One row per question of an official SQuAD JSON document, by the training reader
    (:func:`tinyplm.tasks.squad.squad_articles`, answers not read): ``line`` 0, ``where`` its JSON
    path. Raises ``DataError`` naming the file (and line:column or JSON path) when it is not UTF-8
    JSON in the official layout; a question without a text, or an empty context, is a row error."""
    doc = read_squad_document(lines, source.name)
    for _, rows in squad_articles(doc, source.name, labels=False):
        yield from rows
