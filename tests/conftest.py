"""Shared fixtures: tiny random BERT models and tiny synthetic data.

The tiny model follows DESIGN.md: vocab 99, hidden 32, 2 layers, 4 heads, FFN 37.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TINYPLM_SHARED_DATA", REPO.parent / "shared" / "data"))

WORDS = (
    "the a an is was good bad great awful movie film plot actor fun dull not very and but "
    "it this that of to in love hate boring best worst story"
).split()


def tiny_vocab() -> list[str]:
    """99 WordPiece tokens: specials, words, letters and ## pieces."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = list(string.ascii_lowercase)
    pieces = ["##" + c for c in string.ascii_lowercase]
    punct = list(".,!?'-")
    vocab = specials + WORDS + letters + pieces + punct
    vocab = list(dict.fromkeys(vocab))
    filler = [f"tok{i}" for i in range(99 - len(vocab))]
    out = (vocab + filler)[:99]
    assert len(out) == 99
    return out


def make_tiny_model_dir(path: Path, num_labels: int = 2, seed: int = 0) -> Path:
    """Save a tiny random BertForSequenceClassification + fast tokenizer in HF format."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(tiny_vocab()) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    tok.save_pretrained(path)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    model = BertForSequenceClassification(cfg)
    model.save_pretrained(path)
    return path


@pytest.fixture
def tiny_model_dir(tmp_path: Path) -> Path:
    """A directory holding a tiny random 2-class BERT classifier and its tokenizer."""
    return make_tiny_model_dir(tmp_path / "tiny-bert")


@pytest.fixture
def shared_data() -> Path:
    """The read-only ../shared/data folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set TINYPLM_SHARED_DATA)")
    return SHARED_DATA
