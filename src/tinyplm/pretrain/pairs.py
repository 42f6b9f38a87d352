"""Sentence-pair examples for next-sentence (BERT) and sentence-order (ALBERT) prediction.

Documents (lists of paragraphs, :func:`~tinyplm.pretrain.corpus.read_documents`) are cut into
sentences; consecutive sentences are packed into segments of about ``segment_words`` words; each
pair is a segment A and the segment B that follows it in the same document:

* **NSP**: with probability 0.5, B is replaced by a segment starting at a random sentence of
  another document (label 1, "not next"); otherwise B is the true continuation (label 0). These
  are the labels of ``BertForPreTraining``'s ``next_sentence_label``.
* **SOP**: with probability 0.5 the two segments are swapped (label 1); otherwise they keep their
  order (label 0). Both segments always come from the same document, so the topic gives nothing away.

Unlike BERT's original builder, the true continuation displaced by a random B is not put back
into the pool: the corpus is cut into consecutive (A, B) windows once, which keeps the pair count
deterministic and the builder short.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tinyplm.errors import DataError

PairKind = Literal["nsp", "sop"]
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)")


@dataclass(frozen=True)
class Pair:
    """Two text segments and the pair label (0: in order / continuation, 1: swapped / random)."""

    a: str
    b: str
    label: int


def sentences(text: str) -> list[str]:
    """Split at ``.``, ``!`` or ``?`` (closing quotes kept) followed by white space."""
    out, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        out.append(text[start : end.end()].strip())
        start = end.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def _segment(sents: Sequence[str], start: int, words: int) -> tuple[str, int]:
    """Sentences from ``start`` until about ``words`` words -> (segment text, next sentence index)."""
    out, n, i = [], 0, start
    while i < len(sents) and (not out or n + len(sents[i].split()) <= words):
        out.append(sents[i])
        n += len(sents[i].split())
        i += 1
    return " ".join(out), i


def build_pairs(docs: Sequence[Sequence[str]], kind: PairKind, segment_words: int = 40, seed: int = 0) -> list[Pair]:
    """NSP or SOP pairs from ``docs`` (see module docstring), deterministic by ``seed``.

    Raises ``DataError`` when no document has two segments, or (NSP) there is only one document.
    """
    if kind not in ("nsp", "sop"):
        raise ValueError(f"pair kind must be 'nsp' or 'sop', got {kind!r}")
    rng = random.Random(seed)
    doc_sents = [[s for item in doc for s in sentences(item)] for doc in docs]
    usable = [i for i, s in enumerate(doc_sents) if len(s) >= 2]
    if not usable:
        raise DataError("sentence pairs need documents of at least two sentences; none found")
    nonempty = [i for i, s in enumerate(doc_sents) if s]
    if kind == "nsp" and len(nonempty) < 2:
        raise DataError("next-sentence pairs need at least two documents (random B comes from another one)")
    pairs: list[Pair] = []
    for d in usable:
        sents, i = doc_sents[d], 0
        while i < len(sents) - 1:
            a, j = _segment(sents, i, segment_words)
            if j >= len(sents):
                break
            b, i = _segment(sents, j, segment_words)
            if rng.random() < 0.5:
                if kind == "sop":
                    pairs.append(Pair(b, a, 1))
                else:
                    other = d
                    while other == d:
                        other = rng.choice(nonempty)
                    start = rng.randrange(len(doc_sents[other]))
                    pairs.append(Pair(a, _segment(doc_sents[other], start, segment_words)[0], 1))
            else:
                pairs.append(Pair(a, b, 0))
    return pairs
