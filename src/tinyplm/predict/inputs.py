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
  (:mod:`tinyplm.tasks.readers.reviews`; each row's ``key`` is its ``review_id`` and sentence number).

Every format is read by the same reader as training reads it (:mod:`tinyplm.tasks.readers`), under
the prediction :class:`~tinyplm.tasks.readers.rows.Policy`: labels are not needed, and a bad row is
handed on (``skip``, for the caller to record) or raised (``raise``). The texts are then prepared
as the training readers prepare them (:func:`~tinyplm.tasks.readers.text.prepared`: the task's
clean-up, the spoiler tasks' markup gaps closed, and the context below), so a model is given the
texts it was trained on.

A model trained with ``context_sentences: N`` (and ``context_after: M``) on a task whose context
is the lines around (``tvtropes_spoilers``: a show's page, in order) gets the same here: in a
``text``, ``csv``, ``tsv`` or ``jsonl`` input each text's pair is the texts of the N rows before
it (and the M rows after it), by the training reader's rule (:func:`with_file_context`). A row in
error gives no context; a row that brings a pair of its own is an error.

Nothing is read ahead beyond the current record (the next M rows, for ``context_after: M``), so a
file of any size streams. Bytes are decoded line by line: an undecodable line, an empty text, a
missing field is a :class:`Row` with an ``error`` (naming the file, line and field), so the
caller may stop or skip it. A header without
the needed column, or an unreadable file, raises ``DataError`` at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import BinaryIO

from tinyplm.inference.pairs import pair_mismatch
from tinyplm.inference.records import QAInput, TextInput, TokensInput
from tinyplm.predict.fields import head_columns, item_rows
from tinyplm.predict.sources import Row, Source
from tinyplm.predict.table_inputs import read_squad_json, read_table
from tinyplm.tasks import canonical
from tinyplm.tasks.base import Example
from tinyplm.tasks.conll import Sentence, conll_rows
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.jsonl import read_json_lines
from tinyplm.tasks.readers.plain import read_text_lines
from tinyplm.tasks.readers.reviews import read_review
from tinyplm.tasks.readers.rows import Line, Policy, decoded_lines
from tinyplm.tasks.readers.text import prepared
from tinyplm.tasks.spoilers import text_cleanup
from tinyplm.tasks.squad import QAExample

#: The formats whose rows may take the rows around them as context (one text per row).
CONTEXT_FORMATS = ("text", "csv", "tsv", "jsonl")
#: How prediction reads by default: no label needed, every bad row handed on to the caller.
PREDICTING = Policy("skip", labels=False)


def read_inputs(source: Source, stream: BinaryIO, policy: Policy = PREDICTING) -> Iterator[Row]:
    """The rows of ``stream`` in ``source.format`` (see the module docstring), items as prediction
    inputs, bad rows treated as ``policy`` says."""
    lines = decoded_lines(stream)
    if Head(source.head).row.task_texts and source.format in (*CONTEXT_FORMATS, "reviews"):
        cleanup = text_cleanup(canonical(source.task or ""))
        if source.format == "reviews":
            rows = _read_reviews(source, lines, cleanup)
        else:
            rows = prepared(_read_rows(source, lines), cleanup, source.context_sentences, source.context_after)
    else:
        rows = _read_rows(source, lines)
    return policy.apply(_fitted(source, replace(row, item=as_input(row.item))) if row.error is None else row
                        for row in rows)


def _fitted(source: Source, row: Row) -> Row:
    """``row``, or a row error when its text has a second text and the model's task reads one text, or
    none and the task reads pairs (:mod:`tinyplm.inference.pairs`; a JSON line's ``text_pair``)."""
    if not isinstance(row.item, TextInput):
        return row
    why = pair_mismatch(source.task, source.pairs, row.item.text_pair is not None)
    return row if why is None else replace(row, item=None, error=f"{row.where}: {why}")


def with_file_context(rows: Iterable[Row], context: int, after: int = 0) -> Iterator[Row]:
    """``rows``, in order, each text's pair made the texts of the ``context`` good rows before it
    and the ``after`` good rows after it, as the training readers build it
    (:func:`~tinyplm.tasks.readers.text.prepared`, no clean-up)."""
    return prepared(rows, None, context, after)


def as_input(item: object) -> object:
    """A reader's item as the predictor's input: an example as a :class:`TextInput`, a question as a
    :class:`QAInput`, a sentence as a :class:`TokensInput` (an input already: as it is)."""
    if isinstance(item, Example):
        return TextInput(item.text, item.text_pair)
    if isinstance(item, QAExample):
        return QAInput(item.question, item.context, item.id or None)
    if isinstance(item, Sentence):
        return TokensInput(item.tokens)
    return item


def _read_rows(source: Source, lines: Iterable[Line]) -> Iterator[Row]:
    if source.format == "text":
        return read_text_lines(lines, source.name, words=Head(source.head).row.words)
    if source.format == "conll":
        return conll_rows(lines, source.name, None)
    if source.format == "jsonl":
        return _read_jsonl(source, lines)
    if source.format == "squad":
        return read_squad_json(source, lines)
    return read_table(source, lines)


def _read_reviews(source: Source, lines: Iterable[Line], cleanup) -> Iterator[Row]:
    """One row per sentence of every review, each given its review's context (as in training)."""
    for row in read_json_lines(lines, source.name):
        review = read_review(row, labels=False)
        yield from prepared(review.rows, cleanup, source.context_sentences, source.context_after)


def _read_jsonl(source: Source, lines: Iterable[Line]) -> Iterator[Row]:
    """JSON lines: objects, or (where an example is one text: not a question) a bare string as the text."""
    cols = head_columns(source.head, source.text_column, source.pair_column)
    rows = read_json_lines(lines, source.name)
    row = Head(source.head).row
    if not row.fields.pair_required:
        rows = (replace(r, item={cols.text: r.item}) if isinstance(r.item, str) else r for r in rows)
    if row.words and source.text_column is None:  # a tagger reads a "text" as its words, as tables and serve do
        rows = (replace(r, item={**r.item, cols.text: r.item["text"]})
                if isinstance(r.item, dict) and cols.text not in r.item and "text" in r.item else r for r in rows)
    return item_rows(rows, source.head, cols, source.name)
