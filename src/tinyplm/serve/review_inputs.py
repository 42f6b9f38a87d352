"""Prediction inputs from whole reviews: JSON lines in the ``goodreads_reviews_spoiler.json``
layout (Wan et al. 2019), read unchanged, one input per sentence.

Each line is a review object whose ``review_sentences`` is a list of ``[label, sentence]`` pairs
(the label is not needed and is ignored; a bare sentence string is taken too). A sentence's text
pair is the ``context_sentences`` sentences before it in its review, by the training reader's own
rule (:func:`tinyplm.tasks.spoilers.review_context`), so a model trained with review context is
given the same inputs here. Each row's ``key`` (``review_id`` when the review has one, and the
sentence's number from 0) goes into its output record. A line that is not a review object is one
row error; a bad sentence (not text, empty) is a row error of its own and the review's other
sentences are still predicted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from tinyplm.serve.fields import RowError, check_text
from tinyplm.serve.records import TextInput
from tinyplm.serve.sources import Row, Source, decoded_lines
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.spoilers import review_context

#: The fields of a review input's ``key``, written beside ``line`` in every output record.
REVIEW_KEYS = ("review_id", "sentence")


def read_reviews(source: Source, stream: BinaryIO) -> Iterator[Row]:
    """One row per sentence of every review line of ``stream``, in file order (see the module docstring)."""
    for line, text, error in decoded_lines(stream):
        where = f"{source.name}:{line}"
        if error:
            yield Row(line, where, error=f"{where}: {error}")
            continue
        if not text.strip():
            continue
        try:
            review_id, sentences = _review(text)
        except RowError as exc:
            yield Row(line, where, error=f"{where}: {exc}")
            continue
        texts = [s if isinstance(s, str) else "" for s in sentences]
        for i, sentence in enumerate(sentences):
            at, key = f"{where}: review_sentences[{i}]", {"review_id": review_id, "sentence": i}
            if isinstance(sentence, RowError):
                yield Row(line, at, error=f"{at}: {sentence}", key=key)
            else:
                yield Row(line, at, TextInput(sentence, review_context(texts, i, source.context_sentences)), key=key)


def _review(text: str) -> tuple[str | None, list[str | RowError]]:
    """(review_id, each sentence or the error that keeps it from being one) of one JSON line;
    raises :class:`RowError` when the line is not a review object."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise RowError(f"not valid JSON ({getattr(err, 'msg', str(err)[:80])})") from None
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object (one review), got {shown(obj)}")
    pairs = obj.get("review_sentences")
    if not isinstance(pairs, list) or not pairs:
        found = "nothing" if "review_sentences" not in obj else shown(pairs)
        raise RowError(f"'review_sentences' holds {found}, expected a non-empty list of [label, sentence]")
    ident = obj.get("review_id")
    review_id = str(ident) if isinstance(ident, str | int) and not isinstance(ident, bool) else None
    return review_id, [_sentence(item) for item in pairs]


def _sentence(item: object) -> str | RowError:
    """The sentence of one ``[label, sentence]`` item (or a bare sentence string), else the error."""
    sentence = item[1] if isinstance(item, list) and len(item) == 2 else item
    if not isinstance(sentence, str):
        return RowError(f"holds {json.dumps(item)[:80]}, expected [label, sentence] or a sentence")
    try:
        return check_text(sentence, "sentence")
    except RowError as exc:
        return exc
