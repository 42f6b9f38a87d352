"""Width-pruned initialisation: a narrower student copies the teacher's most important channels."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from tinyplm.config import ShapeSpec, StudentSpec
from tinyplm.models import build_student
from tinyplm.models.narrow import head_dims, residual_channels


@pytest.fixture
def teacher(tiny_model_dir: Path):
    """The tiny random classifier (hidden 32, 4 heads of 8, FFN 37, 2 layers) with LayerNorms that
    differ by channel, so the residual choice is not a tie."""
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(torch.rand(module.weight.shape, generator=g) * 2)
                module.bias.copy_(torch.randn(module.bias.shape, generator=g) * 0.1)
    return model


def assert_same_logits(student, teacher) -> None:
    """The two classifiers give the same logits (to float rounding) on a few random sentences."""
    ids = torch.randint(5, 99, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(student(input_ids=ids, attention_mask=mask).logits,
                                   teacher(input_ids=ids, attention_mask=mask).logits, atol=1e-5, rtol=0)


def narrow(teacher, layers=(1,), hidden=16, ffn=20):
    shape = ShapeSpec(layers=len(layers), hidden=hidden, heads=4, ffn=ffn)
    spec = StudentSpec(shape=shape, teacher_layers=list(layers))
    return build_student(spec, teacher).eval()


def test_residual_channels_are_the_heaviest_layernorm_channels(teacher) -> None:
    bert = teacher.bert
    with torch.no_grad():
        for ln in [bert.embeddings.LayerNorm, bert.encoder.layer[1].attention.output.LayerNorm,
                   bert.encoder.layer[1].output.LayerNorm]:
            ln.weight.fill_(0.1)
            ln.bias.zero_()
            ln.weight[[3, 17, 30]] = 5.0
    assert residual_channels(bert, [1], 3).tolist() == [3, 17, 30]
    # Layer 0's LayerNorms are not copied, so they do not vote.
    with torch.no_grad():
        bert.encoder.layer[0].output.LayerNorm.weight[5] = 100.0
    assert residual_channels(bert, [1], 3).tolist() == [3, 17, 30]


def test_head_dims_keep_the_same_count_in_every_head() -> None:
    a = torch.ones(8, 4)
    b = torch.ones(8, 4)
    a[[1, 2, 4, 7]] *= 3  # head 0 (rows 0-3): dims 1, 2; head 1 (rows 4-7): dims 4, 7
    assert head_dims(a, b, heads=2, keep=2).tolist() == [1, 2, 4, 7]


def test_narrowed_student_is_an_index_copy_of_the_teacher(teacher) -> None:
    student = narrow(teacher)
    t, s = teacher.bert, student.bert
    keep = residual_channels(t, [1], 16)
    assert len(set(keep.tolist())) == 16
    torch.testing.assert_close(s.embeddings.word_embeddings.weight, t.embeddings.word_embeddings.weight[:, keep])
    torch.testing.assert_close(s.embeddings.LayerNorm.weight, t.embeddings.LayerNorm.weight[keep])
    tl, sl = t.encoder.layer[1], s.encoder.layer[0]
    qk = head_dims(tl.attention.self.query.weight, tl.attention.self.key.weight, 4, 4)
    assert [int(i) // 8 for i in qk] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4  # 4 of 8 dims per head
    # Queries carry sqrt(d_s/d_t), so q.k/sqrt(4) over the kept dims is the teacher's q.k/sqrt(8) there.
    scale = math.sqrt(4 / 8)
    torch.testing.assert_close(sl.attention.self.query.weight, tl.attention.self.query.weight[qk][:, keep] * scale)
    torch.testing.assert_close(sl.attention.self.key.weight, tl.attention.self.key.weight[qk][:, keep])
    torch.testing.assert_close(sl.output.LayerNorm.bias, tl.output.LayerNorm.bias[keep])
    assert student.classifier.weight.shape == (2, 16)
    torch.testing.assert_close(student.classifier.weight, teacher.classifier.weight[:, keep])
    assert student.config.intermediate_size == 20 and sl.intermediate.dense.weight.shape == (20, 16)


def test_dropping_dead_ffn_neurons_keeps_the_teachers_logits(teacher, tiny_model_dir: Path) -> None:
    """At full hidden width only the FFN narrows; neurons whose output columns are zero carry nothing,
    so dropping exactly those leaves the logits unchanged (and proves the kept ones line up)."""
    dead = [0, 5, 9, 20, 36, 11, 30]
    with torch.no_grad():
        for layer in teacher.bert.encoder.layer:
            layer.output.dense.weight[:, dead] = 0.0
    student = narrow(teacher, layers=(0, 1), hidden=32, ffn=30)
    assert_same_logits(student, teacher)


def test_narrowed_init_starts_nearer_the_teacher_than_random(teacher) -> None:
    """The point of the init: the student's last hidden states already resemble the teacher's
    kept channels far more than a random student's do."""
    ids = torch.randint(5, 99, (4, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    keep = residual_channels(teacher.bert, [0, 1], 24)
    spec = dict(shape=ShapeSpec(layers=2, hidden=24, heads=4, ffn=30))
    narrowed = build_student(StudentSpec(**spec, teacher_layers=[0, 1]), teacher).eval()
    random = build_student(StudentSpec(**spec), teacher).eval()
    with torch.no_grad():
        target = teacher.bert(input_ids=ids, attention_mask=mask).last_hidden_state[..., keep]

        def cosine(model):
            out = model.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            return torch.nn.functional.cosine_similarity(out, target, dim=-1).mean().item()

        assert cosine(narrowed) > 0.8 > cosine(random) + 0.3


def test_projections_of_a_narrowed_student_start_as_its_channel_map(teacher, tmp_path: Path) -> None:
    """The channel map is saved with the student, and the hidden/embedding projections of its
    distillation start from it: proj(x) puts x's channel i at the teacher channel it came from."""
    from tinyplm.config.schema import ObjectiveSpec
    from tinyplm.distill.objective import DistillObjective
    from tinyplm.models.narrow import TEACHER_CHANNELS

    student = narrow(teacher)
    keep = residual_channels(teacher.bert, [1], 16)
    student.save_pretrained(tmp_path / "s")
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "s")
    assert getattr(reloaded.config, TEACHER_CHANNELS) == keep.tolist()
    spec = ObjectiveSpec(kd_weight=0.0, hidden=1.0, embedding=1.0, layer_map="last")
    objective = DistillObjective(spec, reloaded.config, teacher.config, is_regression=False)
    x = torch.randn(2, 5, 16)
    for proj in (objective.hidden_proj, objective.embedding_proj):
        y = proj(x)
        torch.testing.assert_close(y[..., keep], x)
        dropped = [c for c in range(32) if c not in keep.tolist()]
        assert torch.count_nonzero(y[..., dropped]) == 0
    # A student that was not narrowed keeps TinyBERT's random W_h.
    plain = build_student(StudentSpec(shape=ShapeSpec(layers=1, hidden=16, heads=4, ffn=20)), teacher)
    rand = DistillObjective(spec, plain.config, teacher.config, is_regression=False).hidden_proj
    assert torch.count_nonzero(rand.weight) > 16 * 32 // 2


def _heads_of(model) -> list[int]:
    return [layer.attention.self.num_attention_heads for layer in model.bert.encoder.layer]


def test_keep_heads_keeps_the_strongest_and_drops_heads_that_carry_nothing(teacher) -> None:
    """Heads 1 and 3 of every teacher layer write nothing (their attention-output columns are
    zero): keeping 2 of 4 heads from the start keeps heads 0 and 2, as index copies, and the
    student's logits are the teacher's."""
    size = 8
    with torch.no_grad():
        for layer in teacher.bert.encoder.layer:
            for head in (1, 3):
                layer.attention.output.dense.weight[:, head * size:(head + 1) * size] = 0.0
    shape = ShapeSpec(layers=2, hidden=32, heads=4, ffn=37, keep_heads=2)
    student = build_student(StudentSpec(shape=shape, teacher_layers=[0, 1]), teacher).eval()
    assert _heads_of(student) == [2, 2]
    rows = torch.cat([torch.arange(0, 8), torch.arange(16, 24)])
    for s, t in zip(student.bert.encoder.layer, teacher.bert.encoder.layer, strict=True):
        torch.testing.assert_close(s.attention.self.value.weight, t.attention.self.value.weight[rows])
        torch.testing.assert_close(s.attention.output.dense.weight, t.attention.output.dense.weight[:, rows])
    assert_same_logits(student, teacher)


def test_strongest_heads_follow_the_weights(teacher) -> None:
    """A head whose query/key and value/output weights are scaled up ranks first, layer by layer."""
    from tinyplm.models.narrow import strongest_heads

    layer = teacher.bert.encoder.layer[1]
    with torch.no_grad():
        for lin in (layer.attention.self.query, layer.attention.self.key, layer.attention.self.value):
            lin.weight[24:32] *= 10  # head 3
        layer.attention.output.dense.weight[:, 24:32] *= 10
    assert 3 in strongest_heads(layer, 1, 8)
    assert strongest_heads(layer, 4, 8) == [0, 1, 2, 3]


def test_keep_heads_on_a_narrowed_student_runs_and_saves(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Narrowed (hidden 16: four heads of 4) and cut to 3 heads a layer from the start; it reloads
    with that shape and the same logits."""
    from transformers import AutoTokenizer

    from tinyplm.models.io import save_model
    from tinyplm.models.loading import load_classifier

    shape = ShapeSpec(layers=2, hidden=16, heads=4, ffn=20, keep_heads=3)
    student = build_student(StudentSpec(shape=shape, teacher_layers=[0, 1]), teacher).eval()
    assert _heads_of(student) == [3, 3]
    ids = torch.randint(5, 99, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = student(input_ids=ids).logits
    out = save_model(student, AutoTokenizer.from_pretrained(tiny_model_dir), tmp_path / "s")
    loaded, _ = load_classifier(out, ("negative", "positive"), False)
    assert _heads_of(loaded) == [3, 3]
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(input_ids=ids).logits, before)


@pytest.mark.parametrize(("shape", "layers", "said"), [
    ({"layers": 2, "hidden": 32, "heads": 4, "ffn": 37, "keep_heads": 5}, [0, 1], "cannot exceed heads (4)"),
    ({"layers": 2, "hidden": 32, "heads": 4, "ffn": 37, "keep_heads": 2}, None, "it needs teacher_layers"),
])
def test_keep_heads_is_checked_with_the_recipe(shape, layers, said) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=re.escape(said)):
        StudentSpec(shape=shape, teacher_layers=layers)
