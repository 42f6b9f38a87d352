"""RoBERTa- and DeBERTa-style students and teachers: the role table finds their parts, students of
each architecture share the teacher's tokenizer, count their parameters from the config, save and
reload with identical logits, lose heads physically, and load as teachers."""

from __future__ import annotations

import pytest
import torch
from tests.conftest import make_tiny_model_dir
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    DebertaV2ForSequenceClassification,
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaForSequenceClassification,
    RobertaModel,
)

from tinyplm.config.schema import ShapeSpec, StudentSpec
from tinyplm.errors import ModelError
from tinyplm.models import load_classifier, roles, save_model
from tinyplm.models.shape import keep_heads, params_from_config
from tinyplm.models.student import (
    ARCHS,
    DEBERTA_ATTENTION,
    build_student,
    head_class,
    model_type_of,
    student_config,
)
from tinyplm.tasks.heads import Head

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64)
SHAPE = ShapeSpec(layers=2, hidden=16, heads=2, ffn=24)


def bert_teacher() -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(**TINY)).eval()


def roberta(cls=RobertaForSequenceClassification, **over):
    torch.manual_seed(0)
    return cls(RobertaConfig(**{**TINY, "max_position_embeddings": 66, **over}, type_vocab_size=2)).eval()


def roberta_for_bert_pieces():
    """A RoBERTa read with BERT's WordPiece tokenizer: its padding id is the tokenizer's (0), as a
    student of another family made by tinyplm has it (positions count from it)."""
    return roberta(pad_token_id=0)


def deberta(cls=DebertaV2ForSequenceClassification, **over):
    torch.manual_seed(0)
    attention = {**DEBERTA_ATTENTION, "position_buckets": 8, **over}
    return cls(DebertaV2Config(**TINY, type_vocab_size=2, **attention)).eval()


def ids() -> dict[str, torch.Tensor]:
    """Two sentences of the teacher's vocabulary, the second padded (pad id 0)."""
    input_ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 20, 21, 3, 0, 0]])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}


# -- the role table ------------------------------------------------------------------------------


@pytest.mark.parametrize("make, paths", [
    (roberta, {"query": "attention.self.query", "ffn_out": "output.dense"}),
    (deberta, {"query": "attention.self.query_proj", "key": "attention.self.key_proj",
               "value": "attention.self.value_proj", "attn_out": "attention.output.dense"}),
])
def test_roles_name_the_modules_of_each_family(make, paths):
    model = make()
    base = roles.base_model(model)
    assert base is getattr(model, roles.roles_of(model).base)
    layer = roles.layers(model)[1]
    for role, path in paths.items():
        assert roles.layer_linear(layer, role) is layer.get_submodule(path)
    assert roles.word_embeddings(model) is base.embeddings.word_embeddings
    assert roles.self_attention(layer).num_attention_heads == 4
    assert "classifier" in roles.task_heads(model)


def test_deberta_pooler_is_a_task_head_and_mlm_heads_are_found():
    model = deberta()
    assert roles.pooler(model) is None  # DeBERTa's bare encoder has none: the classifier's is a head
    assert roles.task_heads(model)["pooler"] is model.pooler
    mlm = roberta(RobertaForMaskedLM)
    assert roles.mlm_predictions(mlm) is mlm.lm_head
    dmlm = deberta(DebertaV2ForMaskedLM)
    assert roles.mlm_predictions(dmlm) is dmlm.cls.predictions
    with pytest.raises(ModelError, match="no pair_head"):
        roles.pair_head(mlm)


def test_set_layer_linear_changes_the_roberta_forward():
    model = roberta(RobertaModel)
    before = model(**ids()).last_hidden_state
    layer = roles.layers(model)[0]
    torch.nn.init.zeros_(roles.layer_linear(layer, "ffn_out").weight)
    assert not torch.allclose(before, model(**ids()).last_hidden_state)


def test_task_class_per_family():
    assert roles.task_class("roberta", "ForTokenClassification").__name__ == "RobertaForTokenClassification"
    assert head_class(Head.SPAN, "deberta-v2").__name__ == "DebertaV2ForQuestionAnswering"
    with pytest.raises(ModelError, match="supported model types"):
        roles.task_class("gpt2", "ForSequenceClassification")


# -- students ------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", list(ARCHS))
def test_student_of_each_arch_uses_the_teachers_tokenizer(arch):
    teacher = bert_teacher()
    student = build_student(StudentSpec(shape=SHAPE), teacher, seed=1, arch=arch).eval()
    assert student.config.model_type == model_type_of(arch)
    assert type(student).__name__.endswith("ForSequenceClassification")
    assert student.config.vocab_size == teacher.config.vocab_size
    assert student.config.num_hidden_layers == 2 and student.config.hidden_size == 16
    longest = torch.randint(5, 99, (1, teacher.config.max_position_embeddings))  # the teacher's longest input
    assert student(input_ids=longest).logits.shape == (1, 2)
    assert sum(p.numel() for p in student.parameters()) == params_from_config(student.config)


def test_deberta_student_has_disentangled_relative_attention():
    student = build_student(StudentSpec(shape=SHAPE), bert_teacher(), arch="deberta")
    attention = roles.self_attention(roles.layers(student)[0])
    assert attention.relative_attention and set(attention.pos_att_type) == {"c2p", "p2c"}
    assert student.deberta.embeddings.position_embeddings is None  # positions are relative only


def test_students_repeat_with_their_seed():
    teacher = bert_teacher()
    a = build_student(StudentSpec(shape=SHAPE), teacher, seed=3, arch="roberta")
    b = build_student(StudentSpec(shape=SHAPE), teacher, seed=3, arch="roberta")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_unknown_arch_and_cross_arch_layer_copy_are_refused():
    with pytest.raises(ModelError, match="unknown student arch 'gpt'"):
        build_student(StudentSpec(shape=SHAPE), bert_teacher(), arch="gpt")
    with pytest.raises(ModelError, match="own architecture"):
        build_student(StudentSpec(teacher_layers=[1]), bert_teacher(), arch="roberta")
    narrow = ShapeSpec(layers=1, hidden=16, heads=4, ffn=20)
    with pytest.raises(ModelError, match="narrower student.*not possible for a deberta-v2 model: its relative"):
        build_student(StudentSpec(shape=narrow, teacher_layers=[1]), deberta(), arch="deberta")
    narrowed = build_student(StudentSpec(shape=narrow, teacher_layers=[1]), roberta(), arch="roberta")
    assert narrowed.config.model_type == "roberta" and narrowed.config.hidden_size == 16  # RoBERTa narrows now


@pytest.mark.parametrize("make, arch", [(roberta, "roberta"), (deberta, "deberta")])
def test_teacher_layer_copy_within_a_family(make, arch):
    teacher = make()
    student = build_student(StudentSpec(teacher_layers=[1]), teacher, arch=arch).eval()
    t_layer, s_layer = roles.layers(teacher)[1], roles.layers(student)[0]
    assert all(torch.equal(a, b) for a, b in zip(t_layer.state_dict().values(), s_layer.state_dict().values(),
                                                 strict=True))
    t_cls, s_cls = roles.task_heads(teacher)["classifier"], roles.task_heads(student)["classifier"]
    assert all(torch.equal(a, b) for a, b in zip(t_cls.state_dict().values(), s_cls.state_dict().values(),
                                                 strict=True))
    if arch == "deberta":  # the relative-position table lives on the encoder, outside the layers
        assert torch.equal(student.deberta.encoder.rel_embeddings.weight, teacher.deberta.encoder.rel_embeddings.weight)


def test_roberta_positions_start_after_the_padding_id():
    teacher = bert_teacher()
    cfg = student_config(SHAPE, teacher.config, arch="roberta")
    assert cfg.max_position_embeddings == teacher.config.max_position_embeddings + cfg.pad_token_id + 1


@pytest.mark.parametrize("over", [{}, {"share_att_key": False}])
def test_params_from_config_counts_deberta(over):
    model = deberta(**over)
    assert sum(p.numel() for p in model.parameters()) == params_from_config(model.config)


# -- pruning, saving, loading as teachers --------------------------------------------------------


@pytest.mark.parametrize("make", [roberta, lambda: deberta(share_att_key=False), deberta])
def test_keep_heads_shrinks_every_per_head_projection(make):
    model = make()
    layer = roles.layers(model)[0]
    keep_heads(layer, [0, 2], size=8)
    assert roles.layer_linear(layer, "query").out_features == 16
    assert all(m.out_features == 16 for m in roles.head_linears(layer).values())
    assert roles.self_attention(layer).num_attention_heads == 2
    assert model(**ids()).logits.shape == (2, 2)


@pytest.mark.parametrize("make", [roberta_for_bert_pieces, lambda: deberta(share_att_key=False)])
def test_pruned_student_saves_and_reloads_in_its_family(tmp_path, make):
    tok_dir = make_tiny_model_dir(tmp_path / "bert")
    _, tok = load_classifier(tok_dir, ("0", "1"), False)
    model = make()
    keep_heads(roles.layers(model)[1], [1], size=8)
    save_model(model, tok, tmp_path / "pruned")
    again, _ = load_classifier(tmp_path / "pruned", ("0", "1"), False)
    assert type(again) is type(model)
    assert torch.allclose(model(**ids()).logits, again(**ids()).logits, atol=1e-6)
    assert sum(p.numel() for p in again.parameters()) == params_from_config(again.config)


@pytest.mark.parametrize("make", [roberta_for_bert_pieces, deberta])
def test_family_checkpoint_loads_as_a_teacher_and_teaches_a_bert_student(tmp_path, make):
    tok_dir = make_tiny_model_dir(tmp_path / "bert")
    _, tok = load_classifier(tok_dir, ("0", "1"), False)
    model = make()
    save_model(model, tok, tmp_path / "teacher")
    teacher, tok2 = load_classifier(tmp_path / "teacher", ("0", "1"), False)
    assert type(teacher) is type(model) and tok2.vocab_size == tok.vocab_size
    assert torch.allclose(model(**ids()).logits, teacher(**ids()).logits, atol=1e-6)
    student = build_student(StudentSpec(shape=SHAPE), teacher, arch="bert")
    assert student.config.model_type == "bert" and student.config.vocab_size == 99


@pytest.mark.parametrize("make", [roberta, deberta, lambda: deberta(share_att_key=False)])
def test_onnx_export_matches_at_other_lengths(tmp_path, make):
    """The traced graph follows the sequence length (DeBERTa's relative positions included)."""
    from tinyplm.models.onnx import OrtClassifier, export_onnx

    model = make()
    ort = OrtClassifier(export_onnx(model, tmp_path / "model.onnx"), model.config)
    for length in (5, 30):  # 30 > the test's 8 position buckets: log-bucketed distances too
        ids = torch.randint(5, 99, (2, length))
        mask = torch.ones_like(ids)
        mask[1, length // 2:] = 0
        types = torch.zeros_like(ids)
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        assert torch.allclose(ort(ids, mask, types).logits, ref, atol=1e-5)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_word_embedding_init_from_the_teacher(arch):
    from tinyplm.models.student import init_word_embeddings

    teacher = bert_teacher()
    same = build_student(StudentSpec(shape=ShapeSpec(layers=1, hidden=32, heads=4, ffn=20)), teacher,
                         arch=arch, word_embeddings=True)
    assert torch.equal(roles.word_embeddings(same).weight, roles.word_embeddings(teacher).weight)
    narrow = build_student(StudentSpec(shape=SHAPE), teacher, arch=arch)
    kept = init_word_embeddings(narrow, teacher)
    table = roles.word_embeddings(teacher).weight
    centred = table - table.mean(0)
    ours = roles.word_embeddings(narrow).weight
    # a projection on orthonormal directions: pairwise inner products of the centred table are kept
    # up to the dropped variance, and the share of variance kept is reported
    assert ours.shape == (99, 16) and 0.5 < kept < 1.0
    assert torch.allclose((ours ** 2).sum(), kept * (centred ** 2).sum(), rtol=1e-4)


def test_word_embedding_init_refuses_another_vocabulary():
    from tinyplm.models.student import init_word_embeddings

    other = BertForSequenceClassification(BertConfig(**{**TINY, "vocab_size": 50}))
    with pytest.raises(ModelError, match="vocabulary"):
        init_word_embeddings(other, bert_teacher())
