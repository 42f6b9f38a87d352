"""Prediction inputs from tables (CSV, TSV) and from the official SQuAD JSON; see
:mod:`tinyplm.predict.inputs` for the formats and the :class:`~tinyplm.predict.sources.Row` contract."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import BinaryIO

from tinyplm.errors import DataError
from tinyplm.predict.fields import Columns, RowError, build_input, default_columns, head_columns, headerless_layout
from tinyplm.predict.sources import Row, Source, decoded_lines
from tinyplm.tasks.heads import Head
from tinyplm.tasks.json_layout import Layout, validate


def read_table(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """Rows of a CSV (normal quoting) or TSV (GLUE's: no quoting) file; a row's ``line`` is its
    first line. Blank lines are no records. The first line is a header naming the columns unless
    the file has none (:func:`table_columns`). Raises ``DataError`` for an empty file or a header
    without the needed columns."""
    bad: dict[int, str] = {}  # undecodable lines not yet reported

    def lines() -> Iterator[str]:
        for number, text, error in decoded_lines(stream):
            if error:
                bad[number] = error
            yield text + "\n"

    tsv = source.format == "tsv"
    reader = csv.reader(lines(), delimiter="\t" if tsv else ",", quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
    first_line, first = _first_record(reader, source)
    names, has_header = table_columns(source, first)
    if has_header and first_line in bad:
        raise DataError(f"{source.name}:{first_line}: {bad[first_line]}")
    cols = _columns(source, names, has_header, first_line)
    previous = reader.line_num
    if not has_header:
        problems = [bad.pop(n) for n in range(first_line, previous + 1) if n in bad]
        yield _row(source, names, first, cols, first_line, problems)
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            yield Row(previous + 1, f"{source.name}:{previous + 1}",
                      error=f"{source.name}:{previous + 1}: cannot split the line ({err})")
            previous = reader.line_num
            continue
        first_of, previous = previous + 1, reader.line_num
        problems = [bad.pop(n) for n in range(first_of, previous + 1) if n in bad]
        if fields:
            yield _row(source, names, fields, cols, first_of, problems)


def _first_record(reader, source: Source) -> tuple[int, list[str]]:
    """(first line, fields) of the first non-blank record; raises ``DataError`` for an empty file
    or a first record that cannot be split."""
    previous = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            raise DataError(f"{source.name}: empty; expected a header line naming the columns, or rows "
                            "(--no-header)") from None
        except csv.Error as err:
            raise DataError(f"{source.name}:{previous + 1}: cannot split the first line ({err})") from None
        if fields:
            return previous + 1, fields
        previous = reader.line_num


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
        return [name.strip() for name in first], True
    if fits:
        return list(layout.columns), False
    return [str(i) for i in range(1, len(first) + 1)], False


def _columns(source: Source, names: list[str], has_header: bool, line: int) -> Columns:
    """The :class:`Columns` of a table whose columns are ``names``; raises ``DataError``."""
    where = f"{source.name}:{line}"
    text, pair = source.text_column, source.pair_column
    if not has_header:  # a column number names the column of that place
        text, pair = (_numbered(names, given, where) for given in (text, pair))
    if not has_header and text is None and source.head == Head.SEQUENCE:
        layout = headerless_layout(source.task)
        if layout is not None and names == list(layout.columns):
            text = layout.text
        elif len(names) == 1:
            text = names[0]
        else:
            raise DataError(f"{where}: the file has no header line, so name its text column by number (1 to "
                            f"{len(names)}) with --text-column")
    cols = default_columns(names, source.head, source.task, text, pair, where)
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


def _row(source: Source, header: list[str], fields: list[str], cols: Columns, first: int, problems: list[str]) -> Row:
    where = f"{source.name}:{first}"
    if problems:
        return Row(first, where, error=f"{where}: {problems[0]}")
    if len(fields) != len(header):
        sep = "tab-separated" if source.format == "tsv" else "comma-separated"
        return Row(first, where, error=f"{where}: expected {len(header)} {sep} fields, got {len(fields)}")
    try:
        return Row(first, where, build_input(source.head, dict(zip(header, fields, strict=True)), cols))
    except RowError as exc:
        return Row(first, where, error=f"{where}: {exc}")


class _Paragraph(Layout):
    context: str
    qas: list[dict]


class _Article(Layout):
    paragraphs: list[_Paragraph]


class _Squad(Layout):
    """The skeleton of the official layout; each question is checked on its own."""

    data: list[_Article]


def read_squad_json(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """One row per question of an official SQuAD JSON document (``line`` 0; ``where`` its JSON path).
    Raises ``DataError`` naming the file (and line:column or JSON path) when it is not UTF-8 JSON in
    the official layout; a question without a text, or an empty context, is a row error."""
    data = stream.read()
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(f"{source.name}:{line}: not valid UTF-8 (byte 0x{data[err.start]:02x})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{source.name}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None
    except (ValueError, RecursionError) as err:
        raise DataError(f"{source.name}: not valid JSON ({str(err)[:120]})") from None
    doc = validate(_Squad, raw, source.name)
    cols = head_columns(Head.SPAN, None, None)
    for a, article in enumerate(doc.data):
        for p, para in enumerate(article.paragraphs):
            for q, qa in enumerate(para.qas):
                where = f"{source.name}: data[{a}].paragraphs[{p}].qas[{q}]"
                try:
                    yield Row(0, where, build_input(Head.SPAN, {**qa, "context": para.context}, cols))
                except RowError as exc:
                    yield Row(0, where, error=f"{where}: {exc}")
