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
  The files list a show's sentences together, in the order of its page (on the shipped files a
  sentence has the label of the one before it 70% of the time in train, 74% in dev, against 50%
  by chance; train and dev hold different shows). With ``context_sentences: N`` each sentence
  gets the N sentences before it in the file as its text pair, the page context a reader has;
  the first line of a file has none; ``context_after: M`` adds the M sentences after it. Nothing
  marks where one show's page ends, so the first (last) sentences of a page may get the end of
  the page before (the start of the page after) as context.

Goodreads ships no dev file, so dev is split off the training file **by book**: a book (its title
in the CSV, its ``book_id`` in the JSON lines) is in dev when the sha256 of ``DEV_SEED/<book>``,
read as a fraction of 2^64, is below ``DEV_FRACTION`` (0.12). No book is on both sides and the
split is the same on every machine and run. On the shipped CSV this puts 1,723 of the 15,000
sentences (11.5%; 3.5% of them spoilers) and 11.5% of the 5,412 titles in dev. Spoilers are rare
(3.6%), so ROC AUC is the primary metric (Wan et al. 2019) and the cross-entropy weighs the
classes (``class_weights: balanced``).

**Markup gaps.** The sentences keep the spaces left where the sites' markup was cut out: spoiler
tags and links leave runs of spaces and a space before the closing punctuation, as in TV Tropes'
``"Dukat becomes this after   Ziyal's death ."``. Those gaps give the label away. On the shipped
TV Tropes train file 88% of the sentences with three or more spaces in a row are spoilers (46% of
the rest), and a logistic regression on gap counts alone reaches dev ROC AUC 0.71; on the
Goodreads CSV 55% of the 58 sentences with a double space are spoilers (3.4% of the rest). Text a
reader writes has no such gaps, so every reader here closes them (:func:`close_markup_gaps`, on
each sentence and so on each review context) before any model sees the text, and ``predict`` and
the service do the same to every text given to a model of these tasks (:func:`text_cleanup`).
WordPiece and the word tokenizer split every shipped sentence the same either way; a tokenizer
that keeps spaces (a byte-level BPE, character n-grams) would otherwise learn the gaps: character
1-5-gram TF-IDF reaches TV Tropes dev AUC 0.750 on the raw text and 0.733 on the closed text
(``benchmarks/tvtropes_gaps.py`` measures all of this).

Every bad row raises :class:`~tinyplm.errors.DataError` naming the file and line.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.base import Example, Task
from tinyplm.tasks.io import at, check_columns, no_examples, parse_label, quoted, read_text, require_text

BINARY = ("0", "1")  # the label values in the files
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


_SPACES = re.compile(r"\s+")
_BEFORE_CLOSING = re.compile(r" (?=[.,;:!?)\]}])")
_AFTER_OPENING = re.compile(r"(?<=[(\[{]) ")


def close_markup_gaps(text: str) -> str:
    """``text`` with every run of whitespace made one space, none at the ends, and none before a
    closing mark (``.,;:!?)]}``) or after an opening bracket: the gaps that cut-out markup leaves
    in the spoiler sentences (see the module docstring). Words and punctuation are kept as they are."""
    return _AFTER_OPENING.sub("", _BEFORE_CLOSING.sub("", _SPACES.sub(" ", text).strip()))


def text_cleanup(task: str | None) -> Callable[[str], str] | None:
    """What the readers of ``task`` do to each text before a model sees it (the spoiler tasks:
    :func:`close_markup_gaps`), so predicting gives a model the text it was trained and evaluated
    on; None for every other task (its text is used as given)."""
    return close_markup_gaps if task in SPOILER_TASKS else None


def in_dev(book: str, fraction: float = DEV_FRACTION, seed: str = DEV_SEED) -> bool:
    """True when ``book`` (a title or id) belongs to the dev side of the by-book split."""
    digest = hashlib.sha256(f"{seed}/{book.strip()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass(frozen=True)
class Row:
    """One sentence before the split: its book, text, optional context and label index."""

    book: str
    example: Example


def _by_book(rows: list[Row], path: Path, split: str) -> list[Example]:
    """The examples of ``split`` ("train" or "dev") of the by-book split of ``rows``."""
    want_dev = split != "train"
    out = [r.example for r in rows if in_dev(r.book) == want_dev]
    if not out:
        raise no_examples(path, f"no book of its {len(rows)} sentences falls in the {split} side of the by-book "
                          "split; the file is too small to split")
    return out


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of every non-blank record of a CSV file (normal quoting); ``line`` is the
    record's last line (its only one unless a quoted field holds a line break)."""
    lines = [line + "\n" for line in read_text(path).split("\n")]
    reader = csv.reader(lines)
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"{at(path, max(reader.line_num, 1))}: cannot parse CSV ({err})") from None
        if fields and any(f.strip() for f in fields):
            yield reader.line_num, [f.removesuffix("\r") for f in fields]


def _width(fields: list[str], width: int, path: Path, line: int) -> None:
    if len(fields) != width:
        raise DataError(f"{at(path, line)}: expected {width} comma-separated fields, got {len(fields)}")


def read_goodreads_csv(path: Path, split: str) -> list[Example]:
    """The ``split`` side of the Goodreads sentence CSV (columns found by name in the header), each
    sentence with its markup gaps closed (:func:`close_markup_gaps`)."""
    rows = csv_rows(path)
    first = next(rows, None)
    if first is None:
        raise no_examples(path, "the file is empty")
    header = first[1]
    index = check_columns(path, header, ["book_title", "sent_spoil", "sentence"])
    out = []
    for line, fields in rows:
        _width(fields, len(header), path, line)
        book = require_text(fields[index["book_title"]], "book_title", path, line)
        text = close_markup_gaps(require_text(fields[index["sentence"]], "sentence", path, line))
        label = parse_label(fields[index["sent_spoil"]], BINARY, path, line)
        out.append(Row(book, Example(text, None, label, line)))
    if not out:
        raise no_examples(path, "only a header line")
    return _by_book(out, path, split)


def read_tvtropes_csv(path: Path, split: str, context_sentences: int = 0, context_after: int = 0) -> list[Example]:
    """A TV Tropes file: ``id,sentence,label`` rows (:data:`TVTROPES_COLUMNS`) without a header;
    each sentence with its markup gaps closed (:func:`close_markup_gaps`); with
    ``context_sentences`` N (``context_after`` M) its text pair is the N sentences before it
    (and the M after it) in the file (:func:`page_context`)."""
    rows = []
    text_at, label_at = TVTROPES_COLUMNS.index("sentence"), TVTROPES_COLUMNS.index("label")
    for line, fields in csv_rows(path):
        _width(fields, len(TVTROPES_COLUMNS), path, line)
        text = close_markup_gaps(require_text(fields[text_at], "sentence", path, line))
        rows.append((line, text, parse_label(fields[label_at], BINARY, path, line)))
    if not rows:
        raise no_examples(path)
    texts = [text for _, text, _ in rows]
    return [Example(text, page_context(texts, i, context_sentences, context_after), label, line)
            for i, (line, text, label) in enumerate(rows)]


def read_goodreads_jsonl(path: Path, split: str, context_sentences: int = 0,
                         context_after: int = 0) -> list[Example]:
    """The ``split`` side of a ``goodreads_reviews_spoiler.json`` file, one example per sentence;
    with ``context_sentences`` N (``context_after`` M) each sentence's text pair is the N sentences
    before it (and the M after it) in its review (:func:`page_context`)."""
    rows: list[Row] = []
    for line, text in enumerate(read_text(path).split("\n"), start=1):
        if text.strip():
            rows.extend(_review(text, path, line, context_sentences, context_after))
    if not rows:
        raise no_examples(path)
    return _by_book(rows, path, split)


def _review(text: str, path: Path, line: int, context: int, after: int) -> list[Row]:
    """The sentences of one review line (raises ``DataError`` naming the line)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{at(path, line)}: not valid JSON ({err.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{at(path, line)}: expected a JSON object (one review), got {type(obj).__name__}")
    for key in ("review_sentences", "book_id"):
        if key not in obj:
            shown = ", ".join(repr(k) for k in list(obj)[:12]) or "none"
            raise DataError(f"{at(path, line)}: missing key '{key}'; found keys: {shown}")
    pairs, book = obj["review_sentences"], obj["book_id"]
    if not isinstance(book, str | int) or isinstance(book, bool) or not str(book).strip():
        raise DataError(f"{at(path, line)}: 'book_id' should be a non-empty string or number, got {book!r:.60}")
    if not isinstance(pairs, list) or not pairs:
        raise DataError(f"{at(path, line)}: 'review_sentences' should be a non-empty list of [label, sentence]")
    sentences = [_sentence(pair, i, path, line) for i, pair in enumerate(pairs)]
    texts = [s for _, s in sentences]
    return [Row(str(book), Example(sentence, page_context(texts, i, context, after), label, line))
            for i, (label, sentence) in enumerate(sentences)]


#: What stands between the sentences before and the sentences after in a text pair that has both
#: (:func:`page_context`). Plain text, so every tokenizer (WordPiece, BPE, the BiLSTMs' words,
#: TF-IDF) keeps it; "|" is a vocabulary entry of the packaged MiniLM's WordPiece.
AFTER_MARK = "|"


def page_context(sentences: list[str], i: int, before: int, after: int = 0) -> str | None:
    """The text pair of sentence ``i`` of a review (or a TV Tropes file): the ``before`` sentences
    before it joined by a space; with ``after`` > 0, then :data:`AFTER_MARK` and the ``after``
    sentences after it (the mark is there even when one side is empty, so the model can tell the
    sides apart). None when no context is asked or there is none (the only sentence). ``tinyplm
    predict`` builds it by this same rule, so a model trained with context sees the same inputs."""
    previous = " ".join(sentences[max(0, i - before):i]) if before else ""
    if not after:
        return previous or None
    following = " ".join(sentences[i + 1:i + 1 + after])
    if not (previous or following):
        return None
    return " ".join(part for part in (previous, AFTER_MARK, following) if part)


def _sentence(pair: object, i: int, path: Path, line: int) -> tuple[int, str]:
    """``(label index, sentence)`` of one ``[label, sentence]`` item of ``review_sentences``."""
    where = f"{at(path, line)}: review_sentences[{i}]"
    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
        raise DataError(f"{where} should be [label, sentence], got {quoted(json.dumps(pair))}")
    raw = pair[0]
    if isinstance(raw, bool) or str(raw).strip() not in BINARY:
        raise DataError(f"{where}: label {quoted(str(raw))} is not one of 0, 1")
    if not pair[1].strip():
        raise DataError(f"{where}: empty sentence")
    return BINARY.index(str(raw).strip()), close_markup_gaps(require_text(pair[1], f"review_sentences[{i}]", path,
                                                                           line))


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
