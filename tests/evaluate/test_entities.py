"""Entity-level P/R/F1 with seqeval's default (conlleval) chunk rules."""

from __future__ import annotations

import pytest

from tinyplm.evaluate.entities import entities, entity_scores


def test_chunks_follow_conlleval_rules() -> None:
    assert entities(["B-PER", "I-PER", "O"]) == {("PER", 0, 1)}
    assert entities(["I-LOC", "I-LOC"]) == {("LOC", 0, 1)}  # I- after nothing starts an entity
    assert entities(["B-LOC", "B-LOC"]) == {("LOC", 0, 0), ("LOC", 1, 1)}
    assert entities(["B-PER", "I-ORG"]) == {("PER", 0, 0), ("ORG", 1, 1)}  # a type change splits
    assert entities(["O", "O"]) == set()


def test_micro_scores_need_exact_boundaries_and_type() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-MISC", "O"]]
    out = entity_scores(gold, pred)
    # gold: PER(0,1), LOC(3,3), ORG(0,0); pred: PER(0,0), LOC(3,3), MISC(0,0): one hit
    assert out["precision"] == pytest.approx(1 / 3) and out["recall"] == pytest.approx(1 / 3)
    assert out["f1"] == pytest.approx(1 / 3)
    assert entity_scores(gold, gold)["f1"] == 1.0


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O", "O"]], [["O"]])
