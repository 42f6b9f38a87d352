"""Prediction inputs streamed from a file (or stdin), one :class:`Row` per example, in file order.

Formats (``--input-format``, default from the file name, see :func:`detect_format`):

- ``text``: one example per line (a tagger's line is split into words on whitespace);
- ``csv`` / ``tsv``: a header line naming the columns (:func:`~tinyplm.predict.fields.default_columns`),
  or none (``--no-header``, or a file of a header-less task such as CoLA or TV Tropes: its columns
  then have the task's names or numbers from 1; :func:`~tinyplm.predict.table_inputs.table_columns`);
  CSV with normal quoting, TSV as GLUE writes it (no quoting: a ``"`` is an ordinary character);
- ``jsonl``: one JSON object per line (``text``/``text_pair``; ``question``/``context``/``id``;
  ``tokens``), or a bare JSON string as the text;
- ``squad``: the official SQuAD JSON (``data[].paragraphs[].context/qas[].id/question``; answers
  are not needed); the only format read whole, as JSON has to be;
- ``conll``: CoNLL-style tokenised sentences, a word per line (its first column), a blank line
  between sentences, ``-DOCSTART-`` lines dropped;
- ``reviews``: Goodreads reviews as JSON lines (``review_sentences``), one input per sentence
  (:mod:`tinyplm.predict.review_inputs`).

A model trained with ``context_sentences: N`` (and ``context_after: M``) on a task whose context
is the lines around (``tvtropes_spoilers``: a show's page, in order) gets the same here: in a
``text``, ``csv``, ``tsv`` or ``jsonl`` input each text's pair is the texts of the N rows before
it (and the M rows after it), by the training reader's rule (:func:`with_file_context`). A row in
error gives no context.

Nothing is read ahead beyond the current record (the next M rows, for ``context_after: M``), so a
file of any size streams. Bytes are decoded line by line: an undecodable line, an empty text, a
missing field is a :class:`Row` with an ``error`` (naming the file, line and field), so the
caller may stop or skip it. A header without
the needed column, or an unreadable file, raises ``DataError`` at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import BinaryIO

from tinyplm.inference.records import Input, TextInput, TokensInput
from tinyplm.predict.fields import RowError, build_input, check_text, head_columns
from tinyplm.predict.review_inputs import read_reviews
from tinyplm.predict.sources import Row, Source, decoded_lines, read_json_lines
from tinyplm.predict.table_inputs import read_squad_json, read_table
from tinyplm.tasks.heads import Head
from tinyplm.tasks.spoilers import page_context

#: The formats whose rows may take the rows around them as context (one text per row).
CONTEXT_FORMATS = ("text", "csv", "tsv", "jsonl")


def read_inputs(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """The rows of ``stream`` in ``source.format`` (see the module docstring)."""
    rows = _read_rows(source, stream)
    wants_context = source.context_sentences or source.context_after
    if wants_context and source.format in CONTEXT_FORMATS and source.head == Head.SEQUENCE:
        return with_file_context(rows, source.context_sentences, source.context_after)
    return rows


def with_file_context(rows: Iterable[Row], context: int, after: int = 0) -> Iterator[Row]:
    """``rows``, in order, with each text's pair made the texts of the ``context`` good rows before
    it and the ``after`` good rows after it (:func:`~tinyplm.tasks.spoilers.page_context`, as the
    training reader builds it; a row waits until the ``after`` rows past it are read). A row that
    brings a pair of its own (a pair column) is an error: the model's pair is its context."""
    waiting: deque[tuple[Row, int | None]] = deque()  # rows in file order, with their good-row number
    texts: dict[int, str] = {}  # good rows' texts still needed as someone's context
    seen = 0
    for row in rows:
        item, number = row.item, None
        if isinstance(item, TextInput) and item.text_pair is not None:
            row = replace(row, item=None, error=f"{row.where}: this model takes the texts around each as its "
                          "second text (its context); the input gives a second text of its own")
        elif isinstance(item, TextInput):
            texts[seen], number = item.text, seen
            seen += 1
        waiting.append((row, number))
        yield from _ready(waiting, texts, context, after, seen, done=False)
    yield from _ready(waiting, texts, context, after, seen, done=True)


def _ready(waiting: deque[tuple[Row, int | None]], texts: dict[int, str], context: int, after: int, seen: int,
           done: bool) -> Iterator[Row]:
    """The rows at the front of ``waiting`` whose following context is read (all of them when
    ``done``), each text given its pair; texts no later row needs are dropped from ``texts``."""
    while waiting:
        row, number = waiting[0]
        if number is not None and not done and seen - 1 - number < after:
            return
        waiting.popleft()
        if number is None:
            yield row
            continue
        first = max(0, number - context)
        window = [texts[k] for k in range(first, min(seen, number + 1 + after))]
        pair = page_context(window, number - first, context, after)
        for k in range(first, max(0, number + 1 - context)):
            texts.pop(k, None)
        yield replace(row, item=replace(row.item, text_pair=pair))


def _read_rows(source: Source, stream: BinaryIO) -> Iterator[Row]:
    if source.format == "text":
        return _read_text(source, stream)
    if source.format == "conll":
        return _read_conll(source, stream)
    if source.format == "jsonl":
        return _read_jsonl(source, stream)
    if source.format == "squad":
        return read_squad_json(source, stream)
    if source.format == "reviews":
        return read_reviews(source, stream)
    return read_table(source, stream)


def _read_text(source: Source, stream: BinaryIO) -> Iterator[Row]:
    for line, text, error in decoded_lines(stream):
        where = f"{source.name}:{line}"
        if error:
            yield Row(line, where, error=f"{where}: {error}")
            continue
        if not text.strip():
            yield Row(line, where, error=f"{where}: empty text (a blank line)")
            continue
        try:
            checked = check_text(text, "line")
        except RowError as exc:
            yield Row(line, where, error=f"{where}: {exc}")
            continue
        item = TokensInput(tuple(checked.split())) if source.head == Head.TOKEN else TextInput(checked)
        yield Row(line, where, item)


def _read_conll(source: Source, stream: BinaryIO) -> Iterator[Row]:
    words: list[str] = []
    first, problem = 0, None
    for line, text, error in decoded_lines(stream):
        parts = text.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words or problem:
                yield _sentence(source, first, words, problem)
            words, problem = [], None
            continue
        if not words and not problem:
            first = line
        problem = problem or (f"{source.name}:{line}: {error}" if error else None)
        words.append(parts[0])
    if words or problem:
        yield _sentence(source, first, words, problem)


def _sentence(source: Source, first: int, words: list[str], problem: str | None) -> Row:
    where = f"{source.name}:{first}"
    return Row(first, where, error=problem) if problem else Row(first, where, TokensInput(tuple(words)))


def _read_jsonl(source: Source, stream: BinaryIO) -> Iterator[Row]:
    cols = head_columns(source.head, source.text_column, source.pair_column)
    return read_json_lines(source, stream, lambda obj, line, where: [Row(line, where, _json_input(obj, source.head,
                                                                                                 cols))])


def _json_input(obj: object, head: Head, cols) -> Input:
    """One parsed JSON line -> an input (raises :class:`RowError`)."""
    if isinstance(obj, str) and head != Head.SPAN:
        obj = {cols.text: obj}
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object, got {type(obj).__name__}")
    return build_input(head, obj, cols)
