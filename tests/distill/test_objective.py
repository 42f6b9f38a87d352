"""The stage objective: which features it asks for, its checks, and training with projections."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from conftest import TINY_TRAIN, tiny_sentiment_rows
from tinyplm.config import ObjectiveSpec, TrainSpec
from tinyplm.distill.objective import build_objective
from tinyplm.errors import RecipeError
from tinyplm.models import load_classifier
from tinyplm.models.features import forward_features
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs
from tinyplm.train import StageIO, train


def _student(hidden: int = 16, heads: int = 2, layers: int = 1) -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=99, hidden_size=hidden, num_hidden_layers=layers,
                                                    num_attention_heads=heads, intermediate_size=20,
                                                    max_position_embeddings=64))


def test_objective_asks_only_for_the_features_its_terms_need(tiny_model_dir: Path) -> None:
    teacher, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    s = _student(hidden=32, heads=4, layers=2)
    spec = ObjectiveSpec(kd_weight=0, hidden=1, attention_scores=1)
    obj = build_objective(spec, s.config, teacher.config, False)
    assert obj.wants == {"hidden", "attn_scores"}
    assert obj.hidden_proj is None  # equal widths need no projection
    assert obj.layer_map.pairs == ((1, 1), (2, 2))
    mini = build_objective(ObjectiveSpec(kd_weight=0, qkv_relation=1, layer_map="last"), _student().config,
                           teacher.config, False)
    assert mini.wants == {"queries", "keys", "values"} and mini.layer_map.pairs == ((1, 2),)


def test_head_by_head_terms_refuse_different_head_counts(tiny_model_dir: Path) -> None:
    teacher, _ = load_classifier(tiny_model_dir, ("0", "1"), False)  # 4 heads
    with pytest.raises(RecipeError, match="student has 2 heads and the teacher 4"):
        build_objective(ObjectiveSpec(attention_kl=1), _student(heads=2).config, teacher.config, False)
    with pytest.raises(RecipeError, match="relation_heads=3 must divide"):
        build_objective(ObjectiveSpec(qkv_relation=1, relation_heads=3), _student().config, teacher.config, False)


def test_loss_is_the_weighted_sum_of_its_parts(tiny_model_dir: Path) -> None:
    teacher, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    s = _student()
    spec = ObjectiveSpec(kd_weight=0.5, hard_weight=0.25, hidden=2.0, embedding=1.0, qkv_relation=3.0,
                         relation_heads=2, temperature=2.0)
    obj = build_objective(spec, s.config, teacher.config, False)
    enc = encode_split(Split("x", [Example(t, None, y) for t, y in tiny_sentiment_rows(6, 0)], Path("x")), tok, 32)
    batch = collate(enc, range(6))
    sf = forward_features(s, model_inputs(batch), obj.wants)
    tf = forward_features(teacher, model_inputs(batch), obj.wants)
    loss, parts = obj.terms(sf, tf, batch["labels"], tf.logits.detach())
    expected = (0.5 * parts["kd"] + 0.25 * parts["hard"] + 2 * parts["hidden"] + parts["embedding"]
                + 3 * parts["qkv_relation"])
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert obj.hidden_proj.weight.grad is not None and obj.hidden_proj.weight.grad.abs().sum() > 0
    assert obj.embedding_proj.weight.grad.abs().sum() > 0


def test_layerwise_training_moves_student_and_projection(tiny_model_dir: Path, tmp_path: Path) -> None:
    teacher, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    s = _student()
    obj = build_objective(ObjectiveSpec(kd_weight=0, hidden=1, embedding=1), s.config, teacher.config, False)
    enc = encode_split(Split("x", [Example(t, None, y) for t, y in tiny_sentiment_rows(64, 0)], Path("x")), tok, 32)
    batch = collate(enc, range(64))

    def hidden_loss() -> float:
        with torch.no_grad():
            sf = forward_features(s, model_inputs(batch), obj.wants)
            tf = forward_features(teacher, model_inputs(batch), obj.wants)
            return float(obj.terms(sf, tf, batch["labels"], None)[0])

    before, proj_before = hidden_loss(), obj.hidden_proj.weight.detach().clone()
    spec = TrainSpec(**{**TINY_TRAIN, "epochs": 10, "lr": 1e-2, "keep_best": False})
    with pytest.raises(ValueError, match="need the teacher model"):
        train(s, enc, obj, spec=spec, io=StageIO("x", tmp_path / "c0", tmp_path / "l.jsonl"))
    result = train(s, enc, obj, spec=spec, io=StageIO("x", tmp_path / "c", tmp_path / "l.jsonl"), teacher=teacher)
    assert result.model is s
    assert hidden_loss() < 0.7 * before
    assert not torch.equal(obj.hidden_proj.weight, proj_before)


def test_layer_maps_that_mix_embeddings_and_layers_are_refused(tiny_model_dir: Path) -> None:
    teacher, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    with pytest.raises(RecipeError, match="match the embeddings"):
        build_objective(ObjectiveSpec(kd_weight=0, hidden=1, layer_map=[[1, 0]]), _student().config, teacher.config,
                        False)
    with pytest.raises(RecipeError, match="needs at least one"):
        build_objective(ObjectiveSpec(kd_weight=0, hidden=1, layer_map=[[0, 0]]), _student().config, teacher.config,
                        False)


def test_prediction_only_objective_ignores_depths(tiny_model_dir: Path) -> None:
    """A KD-only student may be deeper than its teacher: no layers are matched."""
    teacher, _ = load_classifier(tiny_model_dir, ("0", "1"), False)  # 2 layers
    obj = build_objective(ObjectiveSpec(kd_weight=1), _student(layers=4).config, teacher.config, False)
    assert obj.layer_map.pairs == () and obj.wants == frozenset()


@pytest.mark.parametrize(("terms", "expected"), [
    ({"value_relation": 1}, "objective.value_relation compares attention heads one to one, but the student has 2 heads "
                            "and the teacher 4"),
    ({"qkv_relation": 1, "relation_heads": 32}, "relation_heads=32 must divide the query/key/value width of student "
                                                "layer 1 \\(16: 2 heads\\)"),
])
def test_a_student_that_kept_fewer_heads_is_checked_by_the_heads_it_has(tiny_model_dir: Path, terms: dict,
                                                                        expected: str) -> None:
    """A student of the teacher's layers that kept 2 of its 4 heads (shape.keep_heads) still says 4 in
    ``num_attention_heads``: the objective reads the heads its layers have, so a term comparing heads
    one to one is refused when built, not after the teacher's fine-tune (or, for value_relation,
    computed silently over four made-up heads of the two real ones)."""
    from tinyplm.distill.objective import stage_objective
    from tinyplm.models.narrow import keep_strongest_heads

    teacher, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    student, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    keep_strongest_heads(student, 2)
    assert student.config.num_attention_heads == 4
    with pytest.raises(RecipeError, match=expected):
        stage_objective(ObjectiveSpec(kd_weight=0, **terms), student, teacher, False)
    stage_objective(ObjectiveSpec(kd_weight=0, qkv_relation=1, hidden=1), student, teacher, False)  # it takes these


def test_an_albert_student_trains_its_shared_layer_group_as_one(tmp_path: Path) -> None:
    """Reading an ALBERT's features (3 layer steps, one shared group) leaves it shared: the stage
    trains that group and saves one. Reading them through the layer list expanded the group at the
    first step, after the optimiser had its parameters, so the copies of steps 2 and 3 never moved
    and the student was saved three layers wide."""
    from helpers_families import make_family_dir
    from tinyplm.distill.objective import stage_objective

    folder = make_family_dir(tmp_path / "albert", "albert")
    teacher, tok = load_classifier(folder, ("0", "1"), False)
    student, _ = load_classifier(folder, ("0", "1"), False)
    size, before = sum(p.numel() for p in student.parameters()), {k: v.clone() for k, v in student.state_dict().items()}
    objective = stage_objective(ObjectiveSpec(kd_weight=0, hard_weight=1, hidden=1, qkv_relation=1), student, teacher,
                                False)
    enc = encode_split(Split("x", [Example(t, None, y) for t, y in tiny_sentiment_rows(32, 0)], Path("x")), tok, 32)
    spec = TrainSpec(**{**TINY_TRAIN, "max_steps": 3, "keep_best": False})
    result = train(student, enc, objective, spec=spec, io=StageIO("a", tmp_path / "c", None), teacher=teacher)
    assert result.model.config.num_hidden_groups == 1 and teacher.config.num_hidden_groups == 1
    assert sum(p.numel() for p in result.model.parameters()) == size
    shared = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"
    assert not torch.equal(result.model.state_dict()[shared], before[shared])


def test_a_teacher_without_pytorch_layers_teaches_a_prediction_only_objective() -> None:
    """An ONNX/OpenVINO teacher form has a config and logits but no encoder modules: reading its
    per-layer shape (needed by layer-wise terms only) must not stop a logits-only stage."""
    from tinyplm.distill.objective import STAGE_OBJECTIVES
    from tinyplm.tasks.heads import Head

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    student = BertForSequenceClassification(cfg)

    class LayerlessTeacher(torch.nn.Module):  # what the runtime forms look like to the objective
        config = cfg

    objective = STAGE_OBJECTIVES[Head.SEQUENCE](ObjectiveSpec(kd_weight=1.0), student, LayerlessTeacher(), False,
                                                None, Head.SEQUENCE, None)
    assert objective.spec.kd_weight == 1.0 and not objective.spec.layerwise
