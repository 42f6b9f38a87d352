"""Prediction inputs from whole reviews: JSON lines in the ``goodreads_reviews_spoiler.json``
layout (Wan et al. 2019), read unchanged, one input per sentence.

Each line is a review object whose ``review_sentences`` is a list of ``[label, sentence]`` pairs
(the label is not needed and is ignored; a bare sentence string is taken too). A sentence's text
pair is the ``context_sentences`` sentences before it in its review (and the ``context_after``
after it), by the training reader's own rule (:func:`tinyplm.tasks.spoilers.page_context`), so a
model trained with review context is given the same inputs here. Each row's ``key``
(``review_id`` when the review has one, and the sentence's number from 0) goes into its output
record. A line that is not a review object is one row error; a bad sentence (not text, empty) is
a row error of its own and the review's other sentences are still predicted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import BinaryIO

from tinyplm.inference.records import TextInput
from tinyplm.predict.fields import RowError, check_text
from tinyplm.predict.sources import Row, Source, read_json_lines
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.spoilers import page_context

#: The fields of a review input's ``key``, written beside ``line`` in every output record.
REVIEW_KEYS = ("review_id", "sentence")


def read_reviews(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """One row per sentence of every review line of ``stream``, in file order (see the module docstring)."""
    return read_json_lines(source, stream, partial(_review_rows, context=source.context_sentences,
                                                   after=source.context_after))


def _review_rows(obj: object, line: int, where: str, context: int, after: int = 0) -> list[Row]:
    """The rows of one parsed review line; raises :class:`RowError` when it is not a review object."""
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object (one review), got {shown(obj)}")
    pairs = obj.get("review_sentences")
    if not isinstance(pairs, list) or not pairs:
        found = "nothing" if "review_sentences" not in obj else shown(pairs)
        raise RowError(f"'review_sentences' holds {found}, expected a non-empty list of [label, sentence]")
    ident = obj.get("review_id")
    review_id = str(ident) if isinstance(ident, str | int) and not isinstance(ident, bool) else None
    sentences = [_sentence(item) for item in pairs]
    texts = [s if isinstance(s, str) else "" for s in sentences]
    rows = []
    for i, sentence in enumerate(sentences):
        at, key = f"{where}: review_sentences[{i}]", {"review_id": review_id, "sentence": i}
        if isinstance(sentence, RowError):
            rows.append(Row(line, at, error=f"{at}: {sentence}", key=key))
        else:
            rows.append(Row(line, at, TextInput(sentence, page_context(texts, i, context, after)), key=key))
    return rows


def _sentence(item: object) -> str | RowError:
    """The sentence of one ``[label, sentence]`` item (or a bare sentence string), else the error."""
    sentence = item[1] if isinstance(item, list) and len(item) == 2 else item
    if not isinstance(sentence, str):
        return RowError(f"holds {json.dumps(item)[:80]}, expected [label, sentence] or a sentence")
    try:
        return check_text(sentence, "sentence")
    except RowError as exc:
        return exc
