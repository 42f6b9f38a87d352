"""prediction_agreement for the embedding head: the mean cosine of the two models' vectors over
every eval split's texts (``agreement`` and ``mean_cosine``), texts under cosine 0.99 counted as
disagreements; a classifier's record is unchanged."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from transformers import BertConfig, BertModel, BertTokenizerFast

from conftest import WORDS, tiny_vocab
from tinyplm.evaluate.agreement import SAME_VECTOR, Agreement, prediction_agreement
from tinyplm.evaluate.embedding import embedding_agreement
from tinyplm.models.infer import predict_logits
from tinyplm.models.pooling import Pooling, PoolMode, SentenceLayout
from tinyplm.models.sentence import SentenceEncoder
from tinyplm.report.info import CompressInfo
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.tasks.heads import Head


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def model() -> SentenceEncoder:
    """A tiny random BERT (vocab 99, hidden 32, 2 layers, 4 heads, FFN 37), mean-pooled, normalised."""
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64))
    return SentenceEncoder(encoder, SentenceLayout(Pooling(PoolMode.MEAN, dimension=32), normalize=True)).eval()


def _texts(n: int, seed: int) -> Encoded:
    rng = random.Random(seed)
    rows = [Example(" ".join(rng.choices(WORDS, k=rng.randint(1, 20))), None, None) for _ in range(n)]
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)
    return encode_split(Split("texts", rows, Path("texts"), Head.EMBEDDING), tok, 32)


class Moved(nn.Module):
    """Its parent's vectors plus noise of size ``noise`` fixed per text (by its second id)."""

    def __init__(self, parent: nn.Module, noise: float, seed: int = 3) -> None:
        super().__init__()
        self.parent, self.config, self.noise = parent, parent.config, noise
        self.table = torch.randn(99, 32, generator=torch.Generator().manual_seed(seed))

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.parent(input_ids, attention_mask, token_type_ids) + self.noise * self.table[input_ids[:, 1]]


def test_a_model_agrees_with_itself_completely(model) -> None:
    evals = {"sts": _texts(12, 0), "retrieval": _texts(7, 1)}
    a = prediction_agreement(model, model, evals, False, Head.EMBEDDING)
    assert a.examples == 19 and a.disagreements == 0 and a.max_abs_logit_diff == 0.0
    assert a.mean_cosine == pytest.approx(1.0) and a.agreement == a.mean_cosine
    assert a.to_dict()["mean_cosine"] == pytest.approx(1.0)


@settings(max_examples=12, deadline=None)
@given(noise=st.floats(0.0, 0.6), sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_the_mean_cosine_is_over_every_text_of_every_split(model, noise, sizes) -> None:
    evals = {f"split{i}": _texts(n, i) for i, n in enumerate(sizes)}
    evals["empty"] = Encoded([], [], torch.empty((0, 0)), 0, head=Head.EMBEDDING)  # left out, not a failure
    moved = Moved(model, noise)
    a = prediction_agreement(model, moved, evals, False, Head.EMBEDDING)
    kept = [enc for enc in evals.values() if len(enc)]
    assert a.examples == sum(sizes)
    ref = np.concatenate([predict_logits(model, enc).numpy() for enc in kept])
    cand = np.concatenate([predict_logits(moved, enc).numpy() for enc in kept])
    assert a.mean_cosine == pytest.approx(embedding_agreement(ref, cand), abs=1e-9) and a.agreement == a.mean_cosine
    cosines = (ref * cand).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(cand, axis=1)
    assert a.disagreements == int((cosines < SAME_VECTOR).sum())
    assert a.max_abs_logit_diff == pytest.approx(float(np.abs(ref - cand).max()), abs=1e-6)


def test_a_moved_model_disagrees_on_texts_under_cosine_0_99(model) -> None:
    evals = {"sts": _texts(30, 2)}
    a = prediction_agreement(model, Moved(model, 0.5), evals, False, Head.EMBEDDING)
    assert 0 < a.mean_cosine < 0.99 and a.disagreements > 0
    assert CompressInfo.from_dict({"step": {}, "agreement": a.to_dict()}).agreement == Agreement(**a.to_dict())


def test_a_classifier_record_has_no_mean_cosine() -> None:
    a = Agreement(examples=4, disagreements=1, agreement=0.75, max_abs_logit_diff=0.5)
    assert a.to_dict() == {"examples": 4, "disagreements": 1, "agreement": 0.75, "max_abs_logit_diff": 0.5}
