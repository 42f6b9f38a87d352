"""The one reader of Goodreads reviews: JSON lines in the ``goodreads_reviews_spoiler.json`` layout
(Wan et al. 2019), read unchanged, one record per sentence.

Each line is a review object whose ``review_sentences`` is a list of ``[label, sentence]`` pairs.
With labels required (training) each review needs its ``book_id`` (the dev split is by book) and
each pair a label of 0 or 1; read for prediction the label is not needed and a bare sentence
string is taken too. A line that is not a review object is one error row; a bad sentence is an error
row of its own, the review's other sentences still read. Each sentence row's ``key`` is the review's
``review_id`` (when it has one) and the sentence's number from 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from tinyplm.tasks.base import Example
from tinyplm.tasks.io import quoted
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.readers.fields import check_text, missing
from tinyplm.tasks.readers.rows import Row, RowError

#: The fields of a sentence row's ``key``, written beside ``line`` in every prediction record.
REVIEW_KEYS = ("review_id", "sentence")
#: The label values of ``review_sentences`` (1 = spoiler).
REVIEW_LABELS = ("0", "1")


@dataclass(frozen=True)
class Review:
    """One review line read: its ``book`` (None when it has none, or labels are not read) and one row
    per sentence (or the one error row of a line that is no review)."""

    book: str | None
    rows: list[Row]


def read_review(row: Row, labels: bool) -> Review:
    """The sentences of one parsed JSON line ``row`` (a row of
    :func:`~tinyplm.tasks.readers.jsonl.read_json_lines`); see the module docstring."""
    if row.error is not None:
        return Review(None, [row])
    try:
        book, pairs, review_id = _review(row.item, labels)
    except RowError as exc:
        return Review(None, [Row(row.line, row.where, error=f"{row.where}: {exc}")])
    return Review(book, list(_sentence_rows(row, pairs, review_id, labels)))


def _review(obj: object, labels: bool) -> tuple[str | None, list, str | None]:
    """(book, review_sentences, review_id) of one review object; raises :class:`RowError`."""
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object (one review), got {shown(obj)}")
    for key in ("review_sentences", "book_id") if labels else ("review_sentences",):
        if key not in obj:
            raise missing(key, obj)
    pairs, book = obj["review_sentences"], obj.get("book_id")
    if not isinstance(pairs, list) or not pairs:
        raise RowError(f"'review_sentences' holds {shown(pairs)}, expected a non-empty list of [label, sentence]")
    if labels and (not isinstance(book, str | int) or isinstance(book, bool) or not str(book).strip()):
        raise RowError(f"'book_id' should be a non-empty string or number, got {book!r:.60}")
    ident = obj.get("review_id")
    review_id = str(ident) if isinstance(ident, str | int) and not isinstance(ident, bool) else None
    return (str(book) if labels else None), pairs, review_id


def _sentence_rows(row: Row, pairs: list, review_id: str | None, labels: bool) -> Iterator[Row]:
    for i, pair in enumerate(pairs):
        where, key = f"{row.where}: review_sentences[{i}]", {"review_id": review_id, "sentence": i}
        try:
            label, text = _review_item(pair, labels)
        except RowError as exc:
            yield Row(row.line, where, error=f"{where}{exc}", key=key)
        else:
            yield Row(row.line, where, Example(text, None, label, row.line), key=key)


def _review_item(pair: object, labels: bool) -> tuple[int | None, str]:
    """``(label index or None, sentence)`` of one item of ``review_sentences`` (a ``[label,
    sentence]`` pair; without labels a bare sentence too); raises :class:`RowError` whose message
    follows the item's place."""
    sentence = pair[1] if isinstance(pair, list) and len(pair) == 2 else pair if not labels else None
    if not isinstance(sentence, str):
        expected = "[label, sentence]" if labels else "[label, sentence] or a sentence"
        raise RowError(f" should be {expected}, got {quoted(json.dumps(pair))}")
    label = None
    if labels:
        raw = pair[0]
        if isinstance(raw, bool) or str(raw).strip() not in REVIEW_LABELS:
            raise RowError(f": label {quoted(str(raw))} is not one of 0, 1")
        label = REVIEW_LABELS.index(str(raw).strip())
    if not sentence.strip():
        raise RowError(": empty sentence")
    try:
        return label, check_text(sentence, "the sentence")
    except RowError as exc:
        raise RowError(f": {exc}") from None
