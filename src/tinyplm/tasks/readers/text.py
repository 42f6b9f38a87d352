"""What is done to a text between the file and the model, in one place: markup gaps closed
(:func:`close_markup_gaps`, for the spoiler tasks) and the sentences around it made its context
(:func:`page_context`). :func:`prepared` does both to a stream of rows; the training readers and
``tinyplm predict`` call it alike, so a model is given at prediction the texts it was trained on.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from tinyplm.tasks.readers.rows import Row

_SPACES = re.compile(r"\s+")
_BEFORE_CLOSING = re.compile(r" (?=[.,;:!?)\]}])")
_AFTER_OPENING = re.compile(r"(?<=[(\[{]) ")

#: What stands between the sentences before and the sentences after in a text pair that has both
#: (:func:`page_context`). Plain text, so every tokenizer (WordPiece, BPE, the BiLSTMs' words,
#: TF-IDF) keeps it; "|" is a vocabulary entry of the packaged MiniLM's WordPiece.
AFTER_MARK = "|"


def close_markup_gaps(text: str) -> str:
    """``text`` with every run of whitespace made one space, none at the ends, and none before a
    closing mark (``.,;:!?)]}``) or after an opening bracket: the gaps that cut-out markup leaves
    in the spoiler sentences (see :mod:`tinyplm.tasks.spoilers`). Words and punctuation are kept."""
    return _AFTER_OPENING.sub("", _BEFORE_CLOSING.sub("", _SPACES.sub(" ", text).strip()))


def page_context(sentences: list[str], i: int, before: int, after: int = 0) -> str | None:
    """The text pair of sentence ``i`` of a review (or a page): the ``before`` sentences before it
    joined by a space; with ``after`` > 0, then :data:`AFTER_MARK` and the ``after`` sentences after
    it (the mark is there even when one side is empty, so the model can tell the sides apart). None
    when no context is asked or there is none (the only sentence)."""
    previous = " ".join(sentences[max(0, i - before):i]) if before else ""
    if not after:
        return previous or None
    following = " ".join(sentences[i + 1:i + 1 + after])
    if not (previous or following):
        return None
    return " ".join(part for part in (previous, AFTER_MARK, following) if part)


def prepared(rows: Iterable[Row], cleanup: Callable[[str], str] | None, before: int = 0,
             after: int = 0) -> Iterator[Row]:
    """``rows`` (items with ``text`` and ``text_pair``: an example, a prediction input) in order, each
    good row's text passed through ``cleanup`` (None: kept as it is) and, when context is asked
    (``before``/``after`` > 0), its pair made the cleaned texts of the ``before`` good rows before it
    and the ``after`` good rows after it (:func:`page_context`; a row waits until those are read, so
    a stream of any length is read once). With context, a row that brings a pair of its own is an
    error: the model's pair is its context. Bad rows pass unchanged and take no part in any context."""
    if not (before or after):
        for row in rows:
            yield _cleaned(row, cleanup) if row.error is None and cleanup is not None else row
        return
    waiting: deque[tuple[Row, int | None]] = deque()  # rows in order, with their good-row number
    texts: dict[int, str] = {}  # good rows' texts still needed as someone's context
    seen = 0
    for row in rows:
        number = None
        if row.error is None and row.item.text_pair is not None:
            row = replace(row, item=None, error=f"{row.where}: this model takes the texts around each as its "
                          "second text (its context); the input gives a second text of its own")
        elif row.error is None:
            row = _cleaned(row, cleanup) if cleanup is not None else row
            texts[seen], number = row.item.text, seen
            seen += 1
        waiting.append((row, number))
        yield from _ready(waiting, texts, before, after, seen, done=False)
    yield from _ready(waiting, texts, before, after, seen, done=True)


def _cleaned(row: Row, cleanup: Callable[[str], str]) -> Row:
    pair = row.item.text_pair
    return replace(row, item=replace(row.item, text=cleanup(row.item.text),
                                     text_pair=None if pair is None else cleanup(pair)))


def _ready(waiting: deque[tuple[Row, int | None]], texts: dict[int, str], before: int, after: int, seen: int,
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
        first = max(0, number - before)
        window = [texts[k] for k in range(first, min(seen, number + 1 + after))]
        pair = page_context(window, number - first, before, after)
        for k in range(first, max(0, number + 1 - before)):
            texts.pop(k, None)
        yield replace(row, item=replace(row.item, text_pair=pair))
