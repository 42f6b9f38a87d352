"""``runtime: fastest`` for the embedding head: a candidate is judged by its vectors of the control
texts against its parent's (the lower confidence bound of their mean cosine against ``min_cosine``),
the texts need no labels, the choice records each candidate's mean cosine; the whole step runs on a
SentenceEncoder and its result saves and loads back; NNCF's accuracy control scores the embedding
head by mean cosine."""

from __future__ import annotations

import random
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from transformers import BertConfig, BertModel, BertTokenizerFast

from conftest import WORDS, tiny_vocab
from tinyplm.compress.openvino import openvino_int8
from tinyplm.compress.runtime import (
    ALPHA,
    Choice,
    choose_fastest,
    control_indices,
    control_set,
)
from tinyplm.compress.runtime_bounds import mean_lower
from tinyplm.compress.runtime_vectors import VectorChoice, judge_vectors, row_cosines
from tinyplm.compress.steps import CompressContext, apply_step
from tinyplm.config.compress import FastestRuntime
from tinyplm.errors import TinyplmError
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import predict_logits
from tinyplm.models.io import save_model
from tinyplm.models.onnx import OrtEmbedder
from tinyplm.models.openvino import OvEmbedder
from tinyplm.models.pooling import Pooling, PoolMode, SentenceLayout
from tinyplm.models.sentence import SentenceEncoder
from tinyplm.report.notes import RuntimeChoice
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.tasks.heads import Head

Z = NormalDist().inv_cdf(1 - ALPHA / 2)  # two candidates


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _tokenizer() -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)


def _model() -> SentenceEncoder:
    """A tiny random BERT (vocab 99, hidden 32, 2 layers, 4 heads, FFN 37), mean-pooled, normalised."""
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64))
    return SentenceEncoder(encoder, SentenceLayout(Pooling(PoolMode.MEAN, dimension=32), normalize=True)).eval()


def _texts(n: int, seed: int, words: tuple[int, int] = (1, 30)) -> Encoded:
    rng = random.Random(seed)
    rows = [Example(" ".join(rng.choices(WORDS, k=rng.randint(*words))), None, None) for _ in range(n)]
    return encode_split(Split("texts", rows, Path("texts"), Head.EMBEDDING), _tokenizer(), 48)


class Moved(nn.Module):
    """Its parent's vectors moved by noise of size ``noise`` (fixed per text, by its first ids) and
    normalised again: a form whose vectors' cosine with its parent's falls as ``noise`` grows."""

    def __init__(self, parent: nn.Module, noise: float) -> None:
        super().__init__()
        self.parent, self.config, self.noise = parent, parent.config, noise
        self.table = torch.randn(99, 32, generator=torch.Generator().manual_seed(3))

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        vectors = self.parent(input_ids, attention_mask, token_type_ids)  # (batch, dim)
        moved = vectors + self.noise * self.table[input_ids[:, 1]]
        return torch.nn.functional.normalize(moved, dim=-1)


def _timer(speeds: dict[str, float]):
    return lambda models, enc: {k: speeds[k] for k in models}


def test_row_cosines_and_the_lower_bound() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    b = np.array([[2.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    assert row_cosines(a, b) == pytest.approx([1.0, 2 ** -0.5, 0.0])  # a zero row: 0
    assert mean_lower(np.array([0.5]), Z) == -np.inf
    values = np.array([0.9, 1.0, 0.95, 0.97])
    assert mean_lower(values, Z) == pytest.approx(values.mean() - Z * values.std(ddof=1) / 2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), noise=st.floats(0.0, 2.0), seed=st.integers(0, 100))
def test_the_bound_is_under_the_mean_and_decides_the_verdict(n, noise, seed) -> None:
    rng = np.random.default_rng(seed)
    parent = rng.normal(size=(n, 8))
    child = parent + noise * rng.normal(size=(n, 8))
    step = FastestRuntime(kind="runtime", min_cosine=0.9)
    v = judge_vectors(parent, child, step, Z)
    assert -1.0 <= v.cosine_bound <= v.mean_cosine + 1e-6
    assert v.mean_cosine == pytest.approx(float(row_cosines(parent, child).mean()), abs=1e-6)
    assert (v.refused is None) == (v.cosine_bound >= 0.9)


def test_a_moved_candidate_is_refused_naming_min_cosine_and_a_faithful_one_kept() -> None:
    model, texts = _model(), _texts(60, 0)
    step = FastestRuntime(kind="runtime", control_examples=30, calibration_examples=10)
    candidates = {"openvino_int8": Moved(model, 0.3), "openvino": Moved(model, 0.0)}
    choice = choose_fastest(model, candidates, texts, _timer({"openvino_int8": 900.0, "openvino": 500.0}), step, 0,
                            False, head=Head.EMBEDDING)
    assert isinstance(choice, VectorChoice) and choice.chosen == "openvino" and choice.within_limits
    moved, kept = choice.candidates["openvino_int8"], choice.candidates["openvino"]
    vectors = predict_logits(model, texts.subset(control_indices(60, 10, 30, 0, texts.lengths())))
    moved_vectors = predict_logits(candidates["openvino_int8"], texts.subset(
        control_indices(60, 10, 30, 0, texts.lengths())))
    assert moved["mean_cosine"] == pytest.approx(float(row_cosines(vectors, moved_vectors).mean()), abs=1e-6)
    assert moved["mean_cosine"] < 0.99 and moved["cosine_bound"] < moved["mean_cosine"]
    assert moved["refused"].startswith(f"mean cosine {moved['mean_cosine']:.4f} to its parent's vectors on 30 texts")
    assert "under min_cosine 0.99" in moved["refused"]
    assert kept["refused"] is None and kept["mean_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert choice.min_cosine == 0.99 and choice.examples == 30 and choice.control == "longest_training"
    assert choice.confidence == pytest.approx(1 - ALPHA / 2)
    record = choice.to_dict()
    assert set(record["candidates"]["openvino"]) == {"mean_cosine", "cosine_bound", "sent_per_s", "refused"}
    assert RuntimeChoice.from_details({"chosen_by": record}) == RuntimeChoice(
        "openvino", 30, "longest_training", True, {"openvino_int8": moved["refused"]})


def _turned(angles_deg: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Parent vectors (1, 0) and child vectors turned by each angle: cosines known exactly."""
    turn = np.radians(angles_deg)
    return np.tile([1.0, 0.0], (len(turn), 1)), np.stack([np.cos(turn), np.sin(turn)], axis=1)


def test_too_few_texts_cannot_show_a_close_candidate_within_the_limit() -> None:
    parent, child = _turned([0.0, 2.5, 12.8])  # cosines 1, 0.999, 0.975: mean above 0.99, spread wide
    v = judge_vectors(parent, child, FastestRuntime(kind="runtime", min_cosine=0.99), Z)
    assert v.mean_cosine >= 0.99 > v.cosine_bound
    assert v.refused.startswith(f"mean cosine {v.mean_cosine:.4f} to its parent's vectors on 3 texts, but 3 texts "
                                "cannot show it at least min_cosine 0.99")
    assert v.refused.endswith("more texts are needed (control_examples)")
    parent, child = _turned([0.0, 2.5, 12.8] * 200)  # the same cosines on more texts: shown
    assert judge_vectors(parent, child, FastestRuntime(kind="runtime", min_cosine=0.99), Z).refused is None
    with pytest.raises(ValueError, match="no texts"):
        judge_vectors(parent[:0], child[:0], FastestRuntime(kind="runtime"), Z)
    with pytest.raises(ValueError, match=r"vectors of shape \(600, 1\), its parent \(600, 2\)"):
        judge_vectors(parent, child[:, :1], FastestRuntime(kind="runtime"), Z)


def test_when_none_passes_the_highest_bound_is_kept_and_the_choice_says_so() -> None:
    model, texts = _model(), _texts(40, 1)
    step = FastestRuntime(kind="runtime", control_examples=20, calibration_examples=10)
    candidates = {"nearer": Moved(model, 0.2), "farther": Moved(model, 0.5)}
    choice = choose_fastest(model, candidates, texts, _timer({"nearer": 1.0, "farther": 2.0}), step, 0, False,
                            head=Head.EMBEDDING)
    assert all(c["refused"] for c in choice.candidates.values())
    assert choice.candidates["nearer"]["cosine_bound"] > choice.candidates["farther"]["cosine_bound"]
    assert not choice.within_limits and choice.chosen == "nearer"


def test_control_set_draws_the_longest_texts_outside_calibration_from_unlabelled_texts() -> None:
    texts = _texts(50, 2)
    assert texts.labels.shape == (50, 0)
    step = FastestRuntime(kind="runtime", control_examples=12, calibration_examples=20)
    held, source = control_set(texts, None, step, 0)
    calibration = torch.randperm(50, generator=torch.Generator().manual_seed(0))[:20].tolist()
    chosen = control_indices(50, 20, 12, 0, texts.lengths())
    assert source == "longest_training" and len(held) == 12 and held.labels.shape == (12, 0)
    assert held.input_ids == [texts.input_ids[i] for i in chosen] and not set(chosen) & set(calibration)
    rest = sorted(set(range(50)) - set(calibration), key=lambda i: -len(texts.input_ids[i]))
    assert min(held.lengths()) >= len(texts.input_ids[rest[12]])


def test_a_classifier_choice_keeps_its_record() -> None:
    """The classifiers' choice is unchanged: its fields, and nothing of the embedding rule."""
    assert [f for f in Choice.__dataclass_fields__] == [
        "chosen", "reference_accuracy", "max_drop", "max_flip", "examples", "control", "confidence",
        "within_limits", "candidates"]


def test_the_step_on_a_sentence_encoder_keeps_a_faithful_form_that_saves_and_loads(tmp_path) -> None:
    model, texts = _model(), _texts(40, 3)
    step = FastestRuntime(kind="runtime", candidates=["onnx_dynamic_int8", "openvino"], weights="int8",
                          control_examples=20, calibration_examples=8, min_cosine=0.9)
    ctx = CompressContext(texts, None, False, tmp_path / "work", head=Head.EMBEDDING,
                          timer=_timer({"onnx_dynamic_int8": 10.0, "openvino": 20.0}))
    out, info = apply_step(model, step, ctx)
    by = info["chosen_by"]
    assert by["chosen"] == "openvino" and isinstance(out, OvEmbedder) and by["within_limits"]
    for kind in step.candidates:
        assert by["candidates"][kind]["mean_cosine"] > 0.95 and by["candidates"][kind]["refused"] is None
    tok = _tokenizer()
    saved = save_model(out, tok, tmp_path / "model")
    loaded, _ = load_for_head(saved, (), False, Head.EMBEDDING)
    assert isinstance(loaded, OvEmbedder)
    assert torch.allclose(predict_logits(loaded, texts), predict_logits(out, texts), atol=1e-5)


def test_nncf_accuracy_control_scores_the_embedding_head_by_mean_cosine(tmp_path) -> None:
    model, texts = _model(), _texts(40, 4)
    q = openvino_int8(model, texts, tmp_path, examples=8, precision="f32", max_drop=0.01, control_examples=8,
                      head=Head.EMBEDDING)
    assert isinstance(q, OvEmbedder) and "mean cosine to the PyTorch model's vectors" in q.quantization
    assert row_cosines(predict_logits(model, texts), predict_logits(q, texts)).min() > 0.95
    with pytest.raises(TinyplmError, match="the span head has no accuracy-controlled int8"):
        openvino_int8(model, texts, tmp_path / "span", examples=12, max_drop=0.01, control_examples=12,
                      head=Head.SPAN)
    assert not (tmp_path / "span").exists()  # refused before any work


def test_onnx_candidate_for_an_embedding_model_is_an_embedder(tmp_path) -> None:
    model, texts = _model(), _texts(20, 5)
    step = FastestRuntime(kind="runtime", candidates=["onnx_static_int8"], control_examples=10,
                          calibration_examples=8, min_cosine=0.5)
    ctx = CompressContext(texts, None, False, tmp_path / "work", head=Head.EMBEDDING,
                          timer=_timer({"onnx_static_int8": 1.0}))
    out, info = apply_step(model, step, ctx)
    assert isinstance(out, OrtEmbedder) and info["chosen_by"]["candidates"]["onnx_static_int8"]["refused"] is None
