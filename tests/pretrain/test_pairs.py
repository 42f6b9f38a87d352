"""NSP and SOP sentence pairs: 50% positives, order and provenance as labelled."""

from __future__ import annotations

import random

import pytest

from tinyplm.errors import DataError
from tinyplm.pretrain.pairs import build_pairs, sentences


def _docs(n_docs: int = 200, paragraphs: int = 40, seed: int = 0) -> list[list[str]]:
    """Sentences tagged with their document and position: "dD sS w w w."."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        k, paras = 0, []
        for _ in range(paragraphs):
            sents = []
            for _ in range(rng.randint(1, 4)):
                sents.append(f"d{d} s{k} " + " ".join("w" for _ in range(rng.randint(3, 12))) + ".")
                k += 1
            paras.append(" ".join(sents))
        docs.append(paras)
    return docs


def _tags(segment: str) -> list[tuple[int, int]]:
    return [(int(s.split()[0][1:]), int(s.split()[1][1:])) for s in sentences(segment)]


@pytest.mark.parametrize("kind", ["nsp", "sop"])
def test_half_positive_and_labels_true(kind: str) -> None:
    pairs = build_pairs(_docs(), kind, segment_words=20, seed=1)
    assert len(pairs) > 5000
    share = sum(p.label == 1 for p in pairs) / len(pairs)
    assert abs(share - 0.5) < 0.02
    for p in pairs:
        a, b = _tags(p.a), _tags(p.b)
        same_doc = a[0][0] == b[0][0]
        contiguous = a[-1][1] + 1 == b[0][1]
        if kind == "sop":
            assert same_doc  # both segments always from one document
            if p.label == 0:
                assert contiguous
            else:  # swapped: B is the segment that came first, directly before A
                assert b[-1][1] + 1 == a[0][1]
        else:
            assert (p.label == 0) == (same_doc and contiguous) or (p.label == 1 and not same_doc)
            if p.label == 1:
                assert not same_doc


def test_deterministic_by_seed() -> None:
    docs = _docs(n_docs=5, paragraphs=10)
    assert build_pairs(docs, "nsp", seed=3) == build_pairs(docs, "nsp", seed=3)
    assert build_pairs(docs, "nsp", seed=3) != build_pairs(docs, "nsp", seed=4)


def test_segments_respect_the_word_budget() -> None:
    pairs = build_pairs(_docs(n_docs=5), "sop", segment_words=20, seed=0)
    for p in pairs:
        for seg in (p.a, p.b):
            parts = sentences(seg)
            assert len(parts) == 1 or len(seg.split()) <= 20


def test_sentence_split_keeps_closing_quotes() -> None:
    assert sentences('He said "Go." Then he left! Did he? Yes') == ['He said "Go."', "Then he left!", "Did he?", "Yes"]


def test_errors_name_the_problem() -> None:
    with pytest.raises(DataError, match="two sentences"):
        build_pairs([["One sentence only"]], "sop")
    with pytest.raises(DataError, match="two documents"):
        build_pairs([["First one. Second one. Third one."]], "nsp")
    with pytest.raises(ValueError, match="nsp"):
        build_pairs(_docs(n_docs=2), "next")  # type: ignore[arg-type]


def test_static_copies_beyond_the_seed_room_are_refused() -> None:
    """Static masks are seeded (text, copy) with room for 64 copies a text: copy 64 of one text drew
    the mask of copy 0 of the next, so more than 64 copies were not that many masks."""
    from pydantic import ValidationError

    from tinyplm.config.pretrain import MaskingSpec

    assert MaskingSpec(static_copies=64).static_copies == 64
    with pytest.raises(ValidationError, match="static_copies"):
        MaskingSpec(static_copies=65)
