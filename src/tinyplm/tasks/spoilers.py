"""Spoiler detection: Goodreads sentences (CSV), Goodreads reviews (the original JSON lines) and TV Tropes.

* ``goodreads_spoilers``: ``spoilers/goodreads_sentences/train.csv`` under the data root, header
  ``,book_title,sent_spoil,sentence``; one example per row, label ``sent_spoil`` (1 = spoiler).
* ``goodreads_spoilers_reviews``: ``goodreads_spoilers/goodreads.jsonl``, the
  ``goodreads_reviews_spoiler.json`` layout read unchanged: one review per line, its
  ``review_sentences`` a list of ``[label, sentence]``; one example per sentence. With
  ``context_sentences: N`` each sentence gets the N sentences before it in its review (joined by a
  space) as its text pair; the first sentence of a review has no pair. ``context_after: M`` adds
  the M sentences after it (see :func:`page_context`): the detector reads a whole review before
  anyone else does.
* ``tvtropes_spoilers``: ``spoilers/tvtropes/{train,dev}.csv``, no header, ``id,sentence,label``.
  The files list a show's sentences together, in the order of its page (neighbouring sentences
  share their label far more often than by chance, docs/tasks.md; train and dev hold different
  shows). With ``context_sentences: N`` each sentence
  gets the N sentences before it in the file as its text pair, the page context a reader has;
  the first line of a file has none; ``context_after: M`` adds the M sentences after it. Nothing
  marks where one show's page ends, so the first (last) sentences of a page may get the end of
  the page before (the start of the page after) as context.

Goodreads ships no dev file, so dev is split off the training file **by book**: a book (its title
in the CSV, its ``book_id`` in the JSON lines) is in dev when the sha256 of ``DEV_SEED/<book>``,
read as a fraction of 2^64, is below ``DEV_FRACTION`` (0.12). No book is on both sides and the
split is the same on every machine and run (what it puts in dev of the shipped CSV: docs/tasks.md).
Spoilers are rare, so ROC AUC is the primary metric (Wan et al. 2019) and the cross-entropy weighs
the classes (``class_weights: balanced``).

**Markup gaps.** The sentences keep the spaces left where the sites' markup was cut out: spoiler
tags and links leave runs of spaces and a space before the closing punctuation, as in TV Tropes'
``"Dukat becomes this after   Ziyal's death ."``. Those gaps give the label away (how much:
docs/tasks.md, "Markup gaps"). Text a reader writes has no such gaps, so every reader here closes
them (:func:`close_markup_gaps`, on each sentence and so on each review context) before any model
sees the text, by the one function that ``predict`` calls too
(:func:`~tinyplm.tasks.readers.text.prepared`, given :func:`text_cleanup`); the service's predictor
applies :func:`text_cleanup` to every text it is given. WordPiece and the word tokenizer split every
shipped sentence the same either way; a tokenizer that keeps spaces (a byte-level BPE, character
n-grams) would otherwise learn the gaps (``benchmarks/tvtropes_gaps.py`` measures all of this;
docs/tasks.md keeps the figures).

Every bad row raises :class:`~tinyplm.errors.DataError` naming the file and line; the files are read
by the one reader of their format (:mod:`tinyplm.tasks.readers`), as ``tinyplm predict`` reads them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from tinyplm.tasks.base import Example, Task
from tinyplm.tasks.io import at, no_examples
from tinyplm.tasks.readers.fields import Fields, Labels, sequence_rows, text_value
from tinyplm.tasks.readers.jsonl import read_json_lines
from tinyplm.tasks.readers.reviews import REVIEW_LABELS, read_review
from tinyplm.tasks.readers.rows import TRAINING, Row, RowError, file_lines, items
from tinyplm.tasks.readers.table import fixed_columns, read_table, require_columns
from tinyplm.tasks.readers.text import AFTER_MARK as AFTER_MARK  # at home in readers.text, named here too
from tinyplm.tasks.readers.text import close_markup_gaps, prepared
from tinyplm.tasks.readers.text import page_context as page_context

BINARY = REVIEW_LABELS  # the label values in the files ("0", "1")
#: What the models answer: the name of each label value above, in the same order.
SPOILER_NAMES = ("not_spoiler", "spoiler")
DEV_FRACTION = 0.12
DEV_SEED = "tinyplm-spoilers-v1"
GOODREADS_CSV = Path("spoilers") / "goodreads_sentences" / "train.csv"
GOODREADS_JSONL = Path("goodreads_spoilers") / "goodreads.jsonl"
TVTROPES_DIR = Path("spoilers") / "tvtropes"
#: The columns of a TV Tropes file, which has no header line.
TVTROPES_COLUMNS = ("id", "sentence", "label")
GOODREADS_METRICS = ("roc_auc", "pr_auc", "f1_best")
TVTROPES_METRICS = ("accuracy", "roc_auc")
SPLIT_NOTE = (f"dev = the books whose seeded sha256 ({DEV_SEED!r}) falls below {DEV_FRACTION} "
              "(no book on both sides; the rest is train)")


def text_cleanup(task: str | None) -> Callable[[str], str] | None:
    """What the readers of ``task`` do to each text before a model sees it (the spoiler tasks:
    :func:`close_markup_gaps`), handed to :func:`~tinyplm.tasks.readers.text.prepared` by the
    training readers and by ``tinyplm predict`` alike, and applied by the predictor, so predicting
    gives a model the text it was trained and evaluated on; None for every other task (its text is
    used as given)."""
    return close_markup_gaps if task in SPOILER_TASKS else None


def in_dev(book: str, fraction: float = DEV_FRACTION, seed: str = DEV_SEED) -> bool:
    """True when ``book`` (a title or id) belongs to the dev side of the by-book split."""
    digest = hashlib.sha256(f"{seed}/{book.strip()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass(frozen=True)
class Booked:
    """One sentence before the split: its book, text, optional context and label index."""

    book: str
    example: Example


def _by_book(rows: list[Booked], path: Path, split: str) -> list[Example]:
    """The examples of ``split`` ("train" or "dev") of the by-book split of ``rows``."""
    want_dev = split != "train"
    out = [replace(r.example, group=r.book) for r in rows if in_dev(r.book) == want_dev]
    if not out:
        raise no_examples(path, f"no book of its {len(rows)} sentences falls in the {split} side of the by-book "
                          "split; the file is too small to split")
    return out


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of every non-blank record of a CSV file (normal quoting), as the one table
    reader splits it (:func:`~tinyplm.tasks.readers.table.read_table`); ``line`` is the record's first."""
    # no header: the columns are named by position (the first record's own fields may repeat a value)
    table = read_table(file_lines(path), str(path), tsv=False,
                       header=lambda first: ([str(i) for i in range(len(first))], False))
    for row in TRAINING.apply(table.rows):
        yield row.line, list(row.item.values())


def read_goodreads_csv(path: Path, split: str) -> list[Example]:
    """The ``split`` side of the Goodreads sentence CSV (columns found by name in the header), each
    sentence with its markup gaps closed (:func:`close_markup_gaps`)."""
    table = read_table(file_lines(path), str(path), tsv=False)
    require_columns(table.names, ["book_title", "sent_spoil", "sentence"], at(path, table.header_line))
    books: dict[int, str] = {}

    def with_book(rows: Iterator[Row]) -> Iterator[Row]:
        for row in rows:
            try:
                books[row.line] = text_value(row.item, "book_title") if row.error is None else ""
            except RowError as exc:
                row = Row(row.line, row.where, error=f"{row.where}: {exc}")
            yield row

    rows = sequence_rows(with_book(table.rows), Fields("sentence", None, "sent_spoil"), Labels(BINARY), path)
    out = [Booked(books[e.line], e) for e in items(prepared(rows, text_cleanup("goodreads_spoilers")))]
    if not out:
        raise no_examples(path, "only a header line")
    return _by_book(out, path, split)


def read_tvtropes_csv(path: Path, split: str, context_sentences: int = 0, context_after: int = 0) -> list[Example]:
    """A TV Tropes file: ``id,sentence,label`` rows (:data:`TVTROPES_COLUMNS`) without a header;
    each sentence with its markup gaps closed and, with ``context_sentences`` N (``context_after``
    M), its text pair the N sentences before it (and the M after it) in the file
    (:func:`~tinyplm.tasks.readers.text.prepared`, as ``tinyplm predict`` builds it)."""
    table = read_table(file_lines(path), str(path), tsv=False, header=fixed_columns(TVTROPES_COLUMNS))
    rows = sequence_rows(table.rows, Fields("sentence", None, "label"), Labels(BINARY), path)
    examples = items(prepared(rows, text_cleanup("tvtropes_spoilers"), context_sentences, context_after))
    if not examples:
        raise no_examples(path)
    return examples


def read_goodreads_jsonl(path: Path, split: str, context_sentences: int = 0,
                         context_after: int = 0) -> list[Example]:
    """The ``split`` side of a ``goodreads_reviews_spoiler.json`` file, one example per sentence
    (:func:`~tinyplm.tasks.readers.reviews.read_review`); with ``context_sentences`` N
    (``context_after`` M) each sentence's text pair is the N sentences before it (and the M after
    it) in its review."""
    rows: list[Booked] = []
    cleanup = text_cleanup("goodreads_spoilers_reviews")
    for line in read_json_lines(file_lines(path), str(path)):
        review = read_review(line, labels=True)
        sentences = items(prepared(review.rows, cleanup, context_sentences, context_after))
        rows.extend(Booked(str(review.book), example) for example in sentences)
    if not rows:
        raise no_examples(path)
    return _by_book(rows, path, split)


def spoiler_task(name: str, data_root: Path, context_sentences: int = 0, context_after: int = 0) -> Task:
    """The :class:`Task` called ``name`` (see the module docstring) under ``data_root``; the
    context settings apply to :data:`CONTEXT_TASKS` (recorded in their ``info``)."""
    context = {"context_sentences": context_sentences, **({"context_after": context_after} if context_after else {})}
    root = Path(data_root)
    if name == "goodreads_spoilers":
        path = root / GOODREADS_CSV
        return Task(name, SPOILER_NAMES, False, GOODREADS_METRICS, {"train": path, "dev": path}, read_goodreads_csv,
                    description="is a Goodreads review sentence a spoiler (dev split by book)", collection="spoilers",
                    class_weights="balanced", info={"dev_split": SPLIT_NOTE})
    if name == "goodreads_spoilers_reviews":
        path = root / GOODREADS_JSONL
        reader = partial(read_goodreads_jsonl, context_sentences=context_sentences, context_after=context_after)
        return Task(name, SPOILER_NAMES, False, GOODREADS_METRICS, {"train": path, "dev": path}, reader,
                    description="spoiler sentences of whole Goodreads reviews (dev split by book_id)",
                    collection="spoilers", class_weights="balanced",
                    info={"dev_split": SPLIT_NOTE, **context})
    if name == "tvtropes_spoilers":
        folder = root / TVTROPES_DIR
        info = context if context_sentences or context_after else {}
        files = {"train": folder / "train.csv", "dev": folder / "dev.csv"}
        return Task(name, SPOILER_NAMES, False, TVTROPES_METRICS, files,
                    partial(read_tvtropes_csv, context_sentences=context_sentences, context_after=context_after),
                    description="is a TV Tropes sentence a spoiler", collection="spoilers", info=info)
    raise KeyError(name)


SPOILER_TASKS: tuple[str, ...] = ("goodreads_spoilers", "goodreads_spoilers_reviews", "tvtropes_spoilers")
#: The tasks whose sentences may take the sentences around them as context (``context_sentences``
#: before, ``context_after`` after): a review's own sentences, or the lines around in a TV Tropes
#: file (a show's page, in order).
CONTEXT_TASKS: tuple[str, ...] = ("goodreads_spoilers_reviews", "tvtropes_spoilers")
