"""BERT masking of collated batches: rates, the 80/10/10 split, never specials or padding."""

from __future__ import annotations

import pytest
import torch

from tinyplm.train.masking import IGNORE, Masking, mask_tokens, random_tokens

SPECIALS = (0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask in this made-up vocabulary
MASKING = Masking(mask_id=4, vocab_size=1000, special_ids=SPECIALS)


def _batch(rows: int = 500, seq: int = 300, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of random word ids framed by [CLS] ... [SEP], then padding of random length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 1000, (rows, seq), generator=g)
    lengths = torch.randint(seq // 2, seq + 1, (rows,), generator=g)
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids[:, 0] = 2
    ids[torch.arange(rows), lengths - 1] = 3
    ids[mask == 0] = 0
    return ids, mask


def test_rates_over_100k_tokens() -> None:
    ids, attn = _batch()
    eligible = attn.bool() & ~torch.isin(ids, torch.tensor(SPECIALS))
    assert int(eligible.sum()) > 100_000
    masked, labels = mask_tokens(ids, attn, MASKING, torch.Generator().manual_seed(1))
    selected = labels != IGNORE
    rate = float(selected.sum() / eligible.sum())
    assert abs(rate - 0.15) < 0.005
    n = float(selected.sum())
    as_mask = float((masked[selected] == 4).sum()) / n
    kept = float((masked[selected] == ids[selected]).sum()) / n
    assert abs(as_mask - 0.8) < 0.01
    assert abs(kept - 0.1) < 0.01  # a random draw equal to the original (1 in 995) is negligible
    assert abs(1 - as_mask - kept - 0.1) < 0.01
    assert not (selected & ~eligible).any()  # never a special or padding token
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(masked[~selected], ids[~selected])  # nothing else changes
    assert not torch.isin(masked[selected & (masked != 4)], torch.tensor(SPECIALS)).any()


def test_deterministic_by_generator_and_input_untouched() -> None:
    ids, attn = _batch(rows=8, seq=40)
    before = ids.clone()
    a = mask_tokens(ids, attn, MASKING, torch.Generator().manual_seed(5))
    b = mask_tokens(ids, attn, MASKING, torch.Generator().manual_seed(5))
    c = mask_tokens(ids, attn, MASKING, torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    assert torch.equal(ids, before)


def test_custom_rate_and_split() -> None:
    ids, attn = _batch(rows=200)
    m = Masking(mask_id=4, vocab_size=1000, special_ids=SPECIALS, rate=0.3, split=(1.0, 0.0, 0.0))
    masked, labels = mask_tokens(ids, attn, m, torch.Generator().manual_seed(0))
    selected = labels != IGNORE
    eligible = attn.bool() & ~torch.isin(ids, torch.tensor(SPECIALS))
    assert abs(float(selected.sum() / eligible.sum()) - 0.3) < 0.01
    assert bool((masked[selected] == 4).all())


def test_random_tokens_avoid_specials() -> None:
    drawn = random_tokens(20_000, MASKING, torch.Generator().manual_seed(0))
    assert not torch.isin(drawn, torch.tensor(SPECIALS)).any()
    assert int(drawn.min()) >= 5 and int(drawn.max()) < 1000


@pytest.mark.parametrize("kwargs", [{"rate": 0.0}, {"rate": 1.0}, {"split": (0.5, 0.5, 0.5)},
                                    {"split": (1.1, -0.1, 0.0)}])
def test_bad_masking_settings(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="masking"):
        Masking(mask_id=4, vocab_size=10, special_ids=SPECIALS, **kwargs)


def test_from_tokenizer_uses_mask_and_specials() -> None:
    from transformers import BertTokenizerFast

    from conftest import tiny_vocab

    vocab = tiny_vocab()
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    m = Masking.from_tokenizer(tok)
    assert m.mask_id == tok.mask_token_id and m.vocab_size == len(tok)
    assert {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id} <= set(m.special_ids)
