"""Whole-word, span (SpanBERT) and n-gram (ALBERT) masking: statistics over >100,000 tokens."""

from __future__ import annotations

import pytest
import torch

from tinyplm.train.masking import IGNORE, Masking, mask_tokens, sample_span_lengths, word_index

SPECIALS = (0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask in this made-up vocabulary


def _batch(rows: int = 600, seq: int = 256, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[CLS] words [SEP] padding; words of 1 to 3 pieces (word_starts marks each word's first)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 1000, (rows, seq), generator=g)
    lengths = torch.randint(seq // 2, seq + 1, (rows,), generator=g)
    attn = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    starts = torch.zeros(rows, seq, dtype=torch.long)
    for r in range(rows):
        pos = 1
        while pos < seq:
            starts[r, pos] = 1
            pos += int(torch.randint(1, 4, (), generator=g))
    ids[:, 0] = 2
    ids[torch.arange(rows), lengths - 1] = 3
    ids[attn == 0] = 0
    return ids, attn, starts


def _masking(strategy: str, **kw) -> Masking:
    return Masking(mask_id=4, vocab_size=1000, special_ids=SPECIALS, strategy=strategy, **kw)


@pytest.fixture(scope="module")
def batch():
    return _batch()


@pytest.mark.parametrize("strategy", ["whole_word", "span", "ngram"])
def test_rate_split_words_and_specials(strategy: str, batch) -> None:
    ids, attn, starts = batch
    m = _masking(strategy)
    eligible = attn.bool() & ~torch.isin(ids, torch.tensor(SPECIALS))
    assert int(eligible.sum()) > 100_000
    masked, labels = mask_tokens(ids, attn, m, torch.Generator().manual_seed(1), word_starts=starts)
    selected = labels != IGNORE
    assert abs(float(selected.sum() / eligible.sum()) - 0.15) < 0.005
    n = float(selected.sum())
    assert abs(float((masked[selected] == 4).sum()) / n - 0.8) < 0.01
    assert abs(float((masked[selected] == ids[selected]).sum()) / n - 0.1) < 0.01
    assert not (selected & ~eligible).any()  # never a special or padding token
    assert torch.equal(masked[~selected], ids[~selected])
    # a word is selected whole or not at all
    words = word_index(eligible, starts)
    for row in range(0, ids.shape[0], 7):
        for w in range(int(words[row].max()) + 1):
            picked = selected[row][words[row] == w]
            assert picked.all() or not picked.any(), (strategy, row, w)


def test_span_lengths_follow_truncated_geometric() -> None:
    m = _masking("span")
    assert abs(m.mean_span() - 3.8) < 0.01  # SpanBERT reports a mean span of 3.8 words
    lengths = sample_span_lengths(50_000, m, torch.Generator().manual_seed(0)).double()
    assert int(lengths.min()) == 1 and int(lengths.max()) == 10
    assert abs(float(lengths.mean()) / m.mean_span() - 1) < 0.05
    # the geometric shape itself: P(1) / P(2) = 1 / (1 - p)
    ratio = float((lengths == 1).sum() / (lengths == 2).sum())
    assert abs(ratio - 1.25) < 0.08


def test_ngram_lengths_are_harmonic() -> None:
    m = _masking("ngram")
    lengths = sample_span_lengths(60_000, m, torch.Generator().manual_seed(0))
    share = torch.bincount(lengths, minlength=4)[1:].double() / len(lengths)
    expected = torch.tensor([1, 1 / 2, 1 / 3], dtype=torch.float64)
    assert torch.allclose(share, expected / expected.sum(), atol=0.01)


def test_spans_cover_several_words(batch) -> None:
    """Span masking selects runs of adjacent words, token masking rarely does."""
    ids, attn, starts = batch
    ids, attn, starts = ids[:100], attn[:100], starts[:100]

    def mean_run(strategy: str) -> float:
        _, labels = mask_tokens(ids, attn, _masking(strategy), torch.Generator().manual_seed(2), word_starts=starts)
        sel = (labels != IGNORE).int()
        runs = int(((sel[:, 1:] == 1) & (sel[:, :-1] == 0)).sum() + sel[:, 0].sum())
        return float(sel.sum()) / runs

    assert mean_run("span") > 2 * mean_run("token")


def test_word_index_does_not_join_across_specials() -> None:
    eligible = torch.tensor([[0, 1, 1, 0, 1, 1]], dtype=torch.bool)
    starts = torch.tensor([[0, 1, 0, 0, 0, 1]])  # position 4 continues nothing: a special precedes it
    assert word_index(eligible, starts).tolist() == [[-1, 0, 0, -1, 1, 2]]


def test_deterministic_by_generator(batch) -> None:
    ids, attn, starts = (t[:20] for t in batch)
    for strategy in ("whole_word", "span", "ngram"):
        a = mask_tokens(ids, attn, _masking(strategy), torch.Generator().manual_seed(3), word_starts=starts)
        b = mask_tokens(ids, attn, _masking(strategy), torch.Generator().manual_seed(3), word_starts=starts)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_bad_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="strategy"):
        _masking("bogus")
