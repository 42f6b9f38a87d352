"""Prediction inputs from tables (CSV, TSV) and from the official SQuAD JSON; see
:mod:`tinyplm.serve.inputs` for the formats and the :class:`~tinyplm.serve.sources.Row` contract."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import BinaryIO

from tinyplm.errors import DataError
from tinyplm.serve.fields import RowError, build_input, default_columns, head_columns
from tinyplm.serve.sources import Row, Source, decoded_lines
from tinyplm.tasks.heads import Head
from tinyplm.tasks.json_layout import Layout, validate


def read_table(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """Rows of a CSV (normal quoting) or TSV (GLUE's: no quoting) file with a header line; a row's
    ``line`` is its first line. Blank lines are no records. Raises ``DataError`` for an empty file
    or a header without the needed columns."""
    bad: dict[int, str] = {}  # undecodable lines not yet reported

    def lines() -> Iterator[str]:
        for number, text, error in decoded_lines(stream):
            if error:
                bad[number] = error
            yield text + "\n"

    tsv = source.format == "tsv"
    reader = csv.reader(lines(), delimiter="\t" if tsv else ",", quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
    header = _header(reader, source, bad)
    cols = default_columns(header, source.head, source.task, source.text_column, source.pair_column,
                           f"{source.name}:1")
    previous = reader.line_num
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
        first, previous = previous + 1, reader.line_num
        problems = [bad.pop(n) for n in range(first, previous + 1) if n in bad]
        if fields:
            yield _row(source, header, fields, cols, first, problems)


def _header(reader, source: Source, bad: dict[int, str]) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{source.name}: empty; expected a header line naming the columns") from None
    except csv.Error as err:
        raise DataError(f"{source.name}:1: cannot split the header line ({err})") from None
    if 1 in bad:
        raise DataError(f"{source.name}:1: {bad[1]}")
    return [name.strip() for name in header]


def _row(source: Source, header: list[str], fields: list[str], cols, first: int, problems: list[str]) -> Row:
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
