"""The training and analysis stages on every encoder family of the role table (tiny random models
from config classes, nothing downloaded): fine-tuning by every method, prediction and layer-wise
distillation (hidden states, attention, MiniLM relations), students from teacher layers and
narrowed ones, predict giving evaluate's labels, probes and head analysis. Where a stage cannot
apply to a family, a ``ModelError`` says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import TINY_TRAIN, tiny_sentiment_rows
from helpers_families import FAMILIES, HEADS, HIDDEN, LAYERS, make_family_dir
from tinyplm.config import TrainSpec
from tinyplm.config.base import ObjectiveSpec
from tinyplm.config.finetune import Method
from tinyplm.config.schema import ShapeSpec, StudentSpec
from tinyplm.distill.objective import build_objective
from tinyplm.errors import ModelError
from tinyplm.evaluate.head_run import accumulate, heads_per_layer, vocabulary
from tinyplm.evaluate.probe import layer_features
from tinyplm.evaluate.probe_data import Level, encode_items
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.models import build_student, load_classifier, roles, save_model
from tinyplm.models.features import forward_features
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.models.shape import params_from_config
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.train import PredictionObjective, StageIO, train

LABELS = ("negative", "positive")
#: family -> why attention scores cannot be distilled or analysed (the others: all features).
NO_ATTENTION = {"modernbert": "rotary Q/K and sliding windows"}
#: Families whose attention takes no past key/value states (prefix tuning's way in).
NO_PREFIX = ("distilbert", "mpnet", "albert", "modernbert")
#: family -> why a narrower student cannot start from its layers.
NO_NARROW = {"modernbert": "pre-norm layers, fused Wqkv and final norm are not narrowed"}


def _teacher(family: str, tmp: Path):
    return load_classifier(make_family_dir(tmp / family, family), LABELS, False)


def _data(tok, tmp: Path, n: int = 32):
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(n)]
    return encode_split(Split("train", rows, tmp), tok, 16)


def _spec(method: Method = Method.FULL, **options) -> TrainSpec:
    return TrainSpec(**{**TINY_TRAIN, "max_steps": 2, "keep_best": False, "method": method, "method_options": options})


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", list(Method))
def test_fine_tune_by_every_method(family: str, method: Method, tmp_path: Path) -> None:
    model, tok = _teacher(family, tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    options = {"virtual_tokens": 3} if method in (Method.PROMPT_TUNING, Method.PREFIX_TUNING) else {}
    io = StageIO("ft", tmp_path / "ckpt", tmp_path / "log.jsonl")
    if method is Method.PREFIX_TUNING and family in NO_PREFIX:
        with pytest.raises(ModelError, match="takes no past key/value states"):
            train(model, _data(tok, tmp_path), PredictionObjective(), spec=_spec(method, **options), io=io)
        return
    result = train(model, _data(tok, tmp_path), PredictionObjective(), spec=_spec(method, **options), io=io)
    assert result.steps == 2 and 0 < result.trainable_params <= result.total_params
    trained = result.model
    if method in (Method.PROMPT_TUNING, Method.PREFIX_TUNING):
        assert type(trained).__name__.startswith("PeftModel")
        return
    after = trained.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)
    if method not in (Method.FROZEN,):  # LoRA/IA3 merged: a plain model of the family that saves and reloads
        assert trained.config.model_type == family and set(after) >= set(before)
        loaded, _ = load_classifier(save_model(trained, tok, tmp_path / "saved"), LABELS, False)
        enc = _data(tok, tmp_path, 8)
        torch.testing.assert_close(predict_logits(loaded, enc), predict_logits(trained.eval(), enc), atol=1e-5, rtol=0)


def _kd_terms(family: str) -> dict:
    terms = {"kd_weight": 1.0, "hidden": 1.0, "embedding": 1.0, "qkv_relation": 1.0}
    if family not in NO_ATTENTION:
        terms.update(attention_scores=1.0, attention_kl=1.0, value_relation=1.0)
    return terms


@pytest.mark.parametrize("family", FAMILIES)
def test_prediction_and_layer_wise_distillation(family: str, tmp_path: Path) -> None:
    teacher, tok = _teacher(family, tmp_path)
    student = build_student(StudentSpec(teacher_layers=[0, LAYERS - 1]), teacher, arch=family)
    enc = _data(tok, tmp_path)
    objective = build_objective(ObjectiveSpec(**_kd_terms(family)), student.config, teacher.config, False)
    io = StageIO("kd", tmp_path / "ckpt", tmp_path / "log.jsonl")
    result = train(student, enc, objective, spec=_spec(), io=io, teacher_logits=predict_logits(teacher, enc),
                   teacher=teacher)
    assert result.steps == 2 and all(np.isfinite(loss) for _, loss in result.losses)


@pytest.mark.parametrize("family", sorted(NO_ATTENTION))
def test_attention_features_a_family_cannot_give_say_why(family: str, tmp_path: Path) -> None:
    teacher, tok = _teacher(family, tmp_path)
    inputs = {k: torch.tensor(v) for k, v in tok(["good movie"], return_tensors=None).items() if k != "token_type_ids"}
    feats = forward_features(teacher, inputs, ("hidden", "queries", "keys", "values"))  # these it gives
    assert len(feats.hidden) == LAYERS and feats.queries[0].shape[-1] == HIDDEN
    with pytest.raises(ModelError, match=NO_ATTENTION[family]):
        forward_features(teacher, inputs, ("attn_probs",))


@pytest.mark.parametrize("family", FAMILIES)
def test_student_from_teacher_layers(family: str, tmp_path: Path) -> None:
    teacher, tok = _teacher(family, tmp_path)
    picked = [0, LAYERS - 1]
    student = build_student(StudentSpec(teacher_layers=picked), teacher, arch=family).eval()
    assert student.config.model_type == family and len(roles.layers(student)) == student.config.num_hidden_layers == 2
    for s_layer, t_idx in zip(roles.layers(student), picked, strict=True):
        t_state = roles.layers(teacher)[t_idx].state_dict()
        assert all(torch.equal(v, t_state[k]) for k, v in s_layer.state_dict().items())
    if family == "modernbert":  # each copied layer keeps its attention type
        assert student.config.layer_types == ["full_attention", "full_attention"]
    enc = _data(tok, tmp_path, 8)
    loaded, _ = load_classifier(save_model(student, tok, tmp_path / "s"), LABELS, False)
    torch.testing.assert_close(predict_logits(loaded, enc), predict_logits(student, enc), atol=1e-6, rtol=0)
    assert sum(p.numel() for p in loaded.parameters()) == params_from_config(loaded.config)


@pytest.mark.parametrize("family", FAMILIES)
def test_narrowed_student(family: str, tmp_path: Path) -> None:
    teacher, tok = _teacher(family, tmp_path)
    shape = ShapeSpec(layers=2, hidden=24, heads=HEADS, ffn=20)  # ELECTRA, ALBERT: embeddings 16 -> 24
    spec = StudentSpec(shape=shape, teacher_layers=[0, LAYERS - 1])
    if family in NO_NARROW:
        with pytest.raises(ModelError, match=NO_NARROW[family]):
            build_student(spec, teacher, arch=family)
        return
    student = build_student(spec, teacher, arch=family).eval()
    assert student.config.hidden_size == 24
    assert roles.layer_linear(roles.layers(student)[0], "ffn_in").out_features == 20
    enc = _data(tok, tmp_path, 8)
    assert predict_logits(student, enc).shape == (8, 2)
    loaded, _ = load_classifier(save_model(student, tok, tmp_path / "s"), LABELS, False)
    torch.testing.assert_close(predict_logits(loaded, enc), predict_logits(student, enc), atol=1e-6, rtol=0)
    assert sum(p.numel() for p in loaded.parameters()) < sum(p.numel() for p in teacher.parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_predict_gives_evaluates_labels(family: str, tmp_path: Path) -> None:
    """Labels and their scores: a random model's classes sit close, so the scores are compared too."""
    folder = make_family_dir(tmp_path / family, family)
    model, tok = load_classifier(folder, LABELS, False)
    texts = [t for t, _ in tiny_sentiment_rows(24, 4)]
    split = Split("dev", [Example(t, None, 0) for t in texts], tmp_path / "dev")
    logits = predict_logits(model, encode_split(split, tok, 64))
    expected = logits_to_predictions(logits, False).tolist()
    for batch_size, grouped in ((64, False), (3, True)):
        predictor = Predictor.load(folder, batch_size=batch_size, split_by_length=grouped)
        predictions = predictor.predict([TextInput(t) for t in texts])
        assert [predictor.info.labels.index(x.label) for x in predictions] == expected, (batch_size, grouped)
        scores = torch.tensor([[x.scores[label] for label in predictor.info.labels] for x in predictions])
        torch.testing.assert_close(scores, logits.softmax(-1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_probes_and_head_analysis(family: str, tmp_path: Path) -> None:
    model, tok = _teacher(family, tmp_path)
    texts = [(f"good movie {i} fun", None) for i in range(6)]
    items = encode_items(Level.SENTENCE, texts, tok, 32)
    features = layer_features(model, items, batch_size=4)
    assert len(features) == LAYERS + 1 and all(f.shape == (6, HIDDEN) for f in features)
    if family in NO_ATTENTION:
        with pytest.raises(ModelError, match=NO_ATTENTION[family]):
            accumulate(model, items, vocabulary(tok, np.ones(len(tok))), 4)
        return
    stats, tokens = accumulate(model, items, vocabulary(tok, np.ones(len(tok))), 4)
    assert tokens > 0 and heads_per_layer(model) == [HEADS] * LAYERS
    assert all(len(per_layer) == LAYERS and all(len(row) == HEADS for row in per_layer) for per_layer in stats.values())
