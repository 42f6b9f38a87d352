"""Head statistics on hand-made attention tensors whose patterns are known."""

from __future__ import annotations

import math

import pytest
import torch

from tinyplm.evaluate.heads import HeadAccumulator, TokenMarks, pattern_heads, piece_counts, rarest_positions

# Two sentences: [CLS] w w , w [SEP] (6 real) and [CLS] w w [SEP] + 2 padding; the rarest piece at 2 and 1.
REAL = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
SEP_AT = (5, 3)


def marks() -> TokenMarks:
    cls = torch.zeros_like(REAL)
    cls[:, 0] = True
    sep = torch.zeros_like(REAL)
    punct = torch.zeros_like(REAL)
    rare = torch.zeros_like(REAL)
    for b, at in enumerate(SEP_AT):
        sep[b, at] = True
    punct[0, 3] = True
    rare[0, 2] = rare[1, 1] = True
    return TokenMarks(real=REAL, cls=cls, sep=sep, punct=punct, rare=rare)


def hand_made() -> torch.Tensor:
    """(2, 3, 6, 6): head 0 attends to the previous token ([CLS] to itself), head 1 to [SEP],
    head 2 broadly: twice as much to the token itself as to each other real token; padded keys 0."""
    probs = torch.zeros(2, 3, 6, 6)
    for b, at in enumerate(SEP_AT):
        n = int(REAL[b].sum())
        for i in range(n):
            probs[b, 0, i, max(i - 1, 0)] = 1.0
            probs[b, 1, i, at] = 1.0
            probs[b, 2, i, :n] = 1.0 / (n + 1)
            probs[b, 2, i, i] = 2.0 / (n + 1)
    return probs


def broad_entropy(n: int) -> float:
    return -(2 / (n + 1) * math.log(2 / (n + 1)) + (n - 1) / (n + 1) * math.log(1 / (n + 1)))


def test_the_analysis_finds_exactly_the_previous_token_and_sep_heads() -> None:
    acc = HeadAccumulator([3, 3])
    acc.add(0, hand_made(), marks())
    acc.add(1, hand_made()[:, [2, 1, 0]], marks())  # layer 1: the same heads in another order
    stats = acc.result()
    found = {(p.layer, p.head, p.kind) for p in pattern_heads(stats)}
    assert found == {(0, 0, "prev"), (0, 1, "sep"), (1, 2, "prev"), (1, 1, "sep")}
    assert {(p.layer, p.head) for p in pattern_heads(stats, kinds=("prev", "next"))} == {(0, 0), (1, 2)}
    assert stats["argmax_prev"][0][0] == pytest.approx(1.0)  # every query with a previous token
    assert stats["prev"][0][0] == pytest.approx(1.0)
    assert stats["sep"][0][1] == pytest.approx(1.0) and stats["sep"][0][0] == pytest.approx(0.0)
    assert stats["cls"][0][0] == pytest.approx(4 / 10)  # queries 0 and 1 of both sentences
    assert stats["argmax_next"][0][1] == pytest.approx(2 / 8)  # the query before [SEP] in each sentence
    assert stats["entropy"][0][0] == pytest.approx(0.0, abs=1e-9)
    assert stats["entropy"][0][2] == pytest.approx((6 * broad_entropy(6) + 4 * broad_entropy(4)) / 10)
    assert stats["confidence"][0][2] == pytest.approx((6 * 2 / 7 + 4 * 2 / 5) / 10)
    assert stats["punct"][0][2] == pytest.approx(1 / 10)  # one punctuation mark, in the 6-token sentence
    assert stats["rare"][0][2] == pytest.approx(2 / 10)
    assert stats["argmax_cls"][0][2] == pytest.approx(2 / 10)  # only [CLS] itself
    assert stats["next"][0][0] == pytest.approx(0.0)


def test_a_next_token_head_below_the_rule_is_not_positional() -> None:
    probs = torch.zeros(1, 1, 6, 6)
    for i in range(6):
        probs[0, 0, i, min(i + 1, 5)] = 0.8 if i % 4 else 0.3  # 2 of 5 queries put their max elsewhere
        probs[0, 0, i, 0] += 1.0 - probs[0, 0, i, min(i + 1, 5)]
    acc = HeadAccumulator([1])
    acc.add(0, probs, TokenMarks(**{k: v[:1] for k, v in vars(marks()).items()}))
    stats = acc.result()
    assert stats["argmax_next"][0][0] == pytest.approx(3 / 5)
    assert pattern_heads(stats, kinds=("next",)) == []
    assert [p.head for p in pattern_heads(stats, threshold=0.5, kinds=("next",))] == [0]


def test_a_batch_that_does_not_fit_is_refused() -> None:
    acc = HeadAccumulator([2])
    with pytest.raises(ValueError, match="does not fit 2 heads"):
        acc.add(0, hand_made(), marks())


def test_rarity_from_piece_counts() -> None:
    counts = torch.from_numpy(piece_counts([[5, 6, 6, 7], [7, 7, 99]], vocab_size=10))
    assert counts[5] == 1 and counts[6] == 2 and counts[7] == 3 and int(counts.sum()) == 6  # 99 is ignored
    ids = torch.tensor([[2, 7, 6, 5, 3], [2, 6, 6, 3, 0], [2, 3, 0, 0, 0]])
    candidates = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    rare = rarest_positions(ids, candidates, counts)
    assert rare.tolist() == [[False, False, False, True, False], [False, True, False, False, False], [False] * 5]
