"""Where prediction inputs come from: the :class:`Source` (file or stdin, format, columns), format
detection and opening; the rows are read by :mod:`tinyplm.predict.inputs` with the readers that
training uses (:mod:`tinyplm.tasks.readers`), as :class:`Row` records."""


from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tinyplm.errors import TinyplmError
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.formats import FORMATS, JSON_SUFFIXES, format_of
from tinyplm.tasks.readers.rows import Row as Row  # the readers' record, at home in tasks.readers.rows
from tinyplm.tasks.readers.rows import opened

#: The task whose JSON lines are whole reviews (``goodreads_reviews_spoiler.json``'s layout).
REVIEWS_TASK = "goodreads_spoilers_reviews"
STDIN = "-"


@dataclass(frozen=True)
class Source:
    """What to read: ``path`` (``-`` for stdin), its ``format``, the columns the user named, and the
    model's ``head`` and ``task`` (the run's task picks GLUE's columns). ``header``: whether a
    CSV/TSV file starts with a header line (None: decide as
    :func:`~tinyplm.predict.table_inputs.table_columns` says). ``context_sentences`` and
    ``context_after``: the sentences before and after (of a review; the rows around, for one text
    per row) each sentence gets as its text pair (the model's own settings). ``pairs``: whether the
    model's task reads pairs of texts (None: unknown, or either; :mod:`tinyplm.inference.pairs`)."""

    path: str
    format: str
    head: Head
    text_column: str | None = None
    pair_column: str | None = None
    task: str | None = None
    header: bool | None = None
    context_sentences: int = 0
    context_after: int = 0
    pairs: bool | None = None

    @property
    def name(self) -> str:
        return "<stdin>" if self.path == STDIN else self.path


def detect_format(path: str, head: Head, asked: str | None = None, task: str | None = None) -> str:
    """The input format: ``asked`` when given, else from the suffix (``.txt`` and others: ``text``;
    a tagger's ``.txt`` whose first line is ``-DOCSTART-``: ``conll``; ``.json``/``.jsonl`` for a
    model of the Goodreads-reviews ``task``: ``reviews``). Raises ``TinyplmError`` for an unknown
    format, a plain-text input to a question-answering model, or reviews for another head."""
    if asked is not None and asked not in FORMATS:
        raise TinyplmError(f"--input-format: expected one of {', '.join(FORMATS)}, got {asked!r}")
    if asked is None and task == REVIEWS_TASK and Path(path).suffix.lower() in JSON_SUFFIXES:
        return "reviews"
    row = Head(head).row
    if asked == "reviews" and not row.task_texts:
        raise TinyplmError(f"{path}: reviews (one JSON object per review, its review_sentences) are for sentence "
                           f"classifiers; this model has a {head} head")
    fmt = asked or format_of(path)
    if asked is None and fmt == "text" and row.words and path != STDIN and _starts_docstart(Path(path)):
        fmt = "conll"
    if row.fields.pair_required and fmt in ("text", "conll"):  # one text per example: no room for two fields
        raise TinyplmError(f"{path}: a question-answering model needs a question and a context per example: give "
                           "CSV/TSV/JSON lines with question and context columns, or the official SQuAD JSON")
    if fmt == "squad" and not row.windows:
        raise TinyplmError(f"{path}: SQuAD JSON is for question-answering models; this one has a {head} head "
                           "(JSON lines: --input-format jsonl)")
    return fmt


def _starts_docstart(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.readline().lstrip(b"\xef\xbb\xbf").startswith(b"-DOCSTART-")
    except OSError:
        return False


@contextmanager
def open_binary(path: str) -> Iterator[BinaryIO]:
    """``path`` (or stdin for ``-``) opened for reading bytes; raises ``DataError`` naming it."""
    if path == STDIN:
        yield sys.stdin.buffer
        return
    with opened(path, "input file") as fh:
        yield fh
