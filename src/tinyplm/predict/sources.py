"""Where prediction inputs come from: the :class:`Source` (file or stdin, format, columns), the
:class:`Row` each reader yields, format detection and line-by-line decoding; the readers are in
:mod:`tinyplm.predict.inputs` (formats) and :mod:`tinyplm.predict.table_inputs`."""


from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tinyplm.errors import DataError, TinyplmError
from tinyplm.inference.records import Input
from tinyplm.predict.fields import RowError
from tinyplm.tasks.heads import Head

FORMATS = ("text", "csv", "tsv", "jsonl", "squad", "conll", "reviews")
#: The task whose JSON lines are whole reviews (``goodreads_reviews_spoiler.json``'s layout).
REVIEWS_TASK = "goodreads_spoilers_reviews"
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "squad",
            ".conll": "conll"}
STDIN = "-"


@dataclass(frozen=True)
class Row:
    """One input record: its 1-based ``line`` (a sentence's first line; 0 in a JSON document),
    ``where`` it is for messages (``file:line``, or ``file: data[0].paragraphs[1].qas[2]``), and
    either the ``item`` or the ``error`` that kept it from being one. ``key`` holds the fields that
    tell apart several inputs of one line (a review's ``review_id`` and ``sentence`` number),
    echoed in its output record."""

    line: int
    where: str
    item: Input | None = None
    error: str | None = None
    key: dict[str, object] | None = None


@dataclass(frozen=True)
class Source:
    """What to read: ``path`` (``-`` for stdin), its ``format``, the columns the user named, and the
    model's ``head`` and ``task`` (the run's task picks GLUE's columns). ``header``: whether a
    CSV/TSV file starts with a header line (None: decide as
    :func:`~tinyplm.predict.table_inputs.table_columns` says). ``context_sentences`` and
    ``context_after``: the sentences before and after (of a review; the rows around, for one text
    per row) each sentence gets as its text pair (the model's own settings)."""

    path: str
    format: str
    head: Head
    text_column: str | None = None
    pair_column: str | None = None
    task: str | None = None
    header: bool | None = None
    context_sentences: int = 0
    context_after: int = 0

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
    suffix = Path(path).suffix.lower()
    if asked is None and task == REVIEWS_TASK and suffix in (".json", ".jsonl", ".ndjson"):
        return "reviews"
    if asked == "reviews" and head != Head.SEQUENCE:
        raise TinyplmError(f"{path}: reviews (one JSON object per review, its review_sentences) are for sentence "
                           f"classifiers; this model has a {head} head")
    fmt = asked or SUFFIXES.get(suffix, "text")
    if asked is None and fmt == "text" and head == Head.TOKEN and path != STDIN and _starts_docstart(Path(path)):
        fmt = "conll"
    if head == Head.SPAN and fmt in ("text", "conll"):
        raise TinyplmError(f"{path}: a question-answering model needs a question and a context per example: give "
                           "CSV/TSV/JSON lines with question and context columns, or the official SQuAD JSON")
    if fmt == "squad" and head != Head.SPAN:
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
    try:
        fh = open(path, "rb")  # closed by the with below
    except FileNotFoundError:
        raise DataError(f"{path}: input file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, expected an input file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with fh:
        yield fh


def decoded_lines(stream: BinaryIO) -> Iterator[tuple[int, str, str | None]]:
    """``(line, text, error)`` per line of a byte stream: the text without its line break (a BOM on
    the first line dropped); an undecodable line comes with ``error`` naming the byte and column and
    its text decoded with ``surrogateescape`` (never a valid input: :func:`check_text` refuses it)."""
    for number, raw in enumerate(stream, start=1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        try:
            yield number, raw.decode("utf-8"), None
        except UnicodeDecodeError as err:
            yield (number, raw.decode("utf-8", "surrogateescape"),
                   f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); save the file as UTF-8")


def read_json_lines(source: Source, stream: BinaryIO,
                    rows: Callable[[object, int, str], Iterable[Row]]) -> Iterator[Row]:
    """The rows of a JSON-lines stream: each non-blank line decoded and parsed, then handed to
    ``rows(value, line, where)``. An undecodable line, invalid JSON, or a :class:`RowError` that
    ``rows`` raises becomes one error row naming the line; blank lines separate nothing."""
    for line, text, error in decoded_lines(stream):
        where = f"{source.name}:{line}"
        if error:
            yield Row(line, where, error=f"{where}: {error}")
            continue
        if not text.strip():
            continue
        try:
            made = list(rows(_parsed(text), line, where))  # whole first: a RowError gives one error row
        except RowError as exc:
            yield Row(line, where, error=f"{where}: {exc}")
            continue
        yield from made


def _parsed(text: str) -> object:
    """One line's JSON value; raises :class:`RowError` when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise RowError(f"not valid JSON ({getattr(err, 'msg', str(err)[:80])})") from None
