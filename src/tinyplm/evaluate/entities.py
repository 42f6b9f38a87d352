"""Entity-level precision, recall and F1 for IOB tags, with seqeval's default (conlleval) semantics.

An entity is a maximal run ``B-X I-X ...``; an ``I-X`` that follows ``O`` or another type also
starts an entity (lenient, as conlleval and ``seqeval``'s default mode). A predicted entity counts
only when type, start and end all match a gold one. Scores are micro-averaged over all entities.
Written here because ``seqeval`` is a small unmaintained package; these are its default rules.
"""

from __future__ import annotations

from collections.abc import Sequence


def entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """``(type, first, last)`` of each entity in one sentence's tags (inclusive indices)."""
    out: set[tuple[str, int, int]] = set()
    start, kind = -1, ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, t = tag.partition("-")
        ends = start >= 0 and (prefix in ("B", "O", "S") or t != kind)
        if ends:
            out.add((kind, start, i - 1))
            start = -1
        if prefix in ("B", "S") or (prefix in ("I", "E") and start < 0):
            start, kind = i, t
    return out


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 over sentences of tags (``precision``, ``recall``, ``f1``).

    Raises ``ValueError`` when the sentence counts or a sentence's lengths differ."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    n_gold = n_pred = n_hit = 0
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
        ge, pe = entities(g), entities(p)
        n_gold, n_pred, n_hit = n_gold + len(ge), n_pred + len(pe), n_hit + len(ge & pe)
    precision = n_hit / n_pred if n_pred else 0.0
    recall = n_hit / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
