"""Tiny embedding models written to disk as tinyplm saves them, for the tests of the embedding head:
a transformer in the sentence-transformers layout (tiny random BERT, mean pooling, normalised) and
a static sentence encoder (random piece vectors, Zipf weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from conftest import tiny_vocab
from helpers_families import tiny_tokenizer


def make_sentence_dir(path: Path, seed: int = 0) -> Path:
    """A tiny random BertModel (vocab 99, hidden 32, 2 layers, 4 heads, FFN 37) under mean pooling and
    L2 normalisation, saved with ``save_sentence_encoder`` (modules.json and the pooling config)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from tinyplm.models.pooling import Pooling, PoolMode, SentenceLayout
    from tinyplm.models.sentence import SentenceEncoder, save_sentence_encoder

    torch.manual_seed(seed)
    encoder = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64))
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)
    layout = SentenceLayout(Pooling(PoolMode.MEAN, dimension=32), normalize=True, max_seq_length=48)
    return save_sentence_encoder(SentenceEncoder(encoder, layout), tok, path)


def make_static_dir(path: Path, dims: int = 8, seed: int = 0) -> Path:
    """A tiny static sentence encoder (random piece vectors reduced to ``dims``, Zipf weights,
    normalised) saved with ``save_static_sentence``."""
    from tinyplm.models.classic.static_sentence import save_static_sentence, static_sentence_student

    tok = tiny_tokenizer("wordpiece")
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(len(tok), 16)).astype(np.float32)

    def embed_pieces(ids):
        return table[np.asarray(list(ids))]

    model = static_sentence_student(embed_pieces, tok, dims, "zipf", range(len(tok)), None, True)
    return save_static_sentence(model, tok, path)
