"""DistilBERT general distillation: MLM soft targets + MLM hard loss + cosine, through the loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizerFast

from conftest import (
    TINY_TRAIN,
    make_tiny_glue,
    make_tiny_mlm_dir,
    make_tiny_model_dir,
    tiny_recipe,
    tiny_vocab,
    write_recipe,
    write_tiny_corpus,
)
from tinyplm.config import load_recipe
from tinyplm.config.schema import ObjectiveSpec, StageSpec
from tinyplm.distill.mlm import is_masked_lm, mlm_forward, mlm_hard_loss, mlm_soft_kd, with_mlm_head
from tinyplm.distill.objective import build_objective
from tinyplm.errors import ModelError
from tinyplm.pretrain.mlm_head import has_mlm_head
from tinyplm.train.masking import IGNORE

CFG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
           max_position_embeddings=64)


def _tok() -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)


def test_with_mlm_head_shares_the_encoder_and_copies_the_teacher_head() -> None:
    torch.manual_seed(0)
    teacher = BertForMaskedLM(BertConfig(**CFG))
    student = BertForSequenceClassification(BertConfig(**{**CFG, "num_hidden_layers": 1}))
    mlm = with_mlm_head(student, teacher)
    assert is_masked_lm(mlm) and not is_masked_lm(student)
    assert mlm.bert is student.bert
    assert mlm.cls.predictions.decoder.weight is student.bert.embeddings.word_embeddings.weight
    assert torch.equal(mlm.cls.predictions.transform.dense.weight, teacher.cls.predictions.transform.dense.weight)
    before = student.bert.encoder.layer[0].output.dense.weight.detach().clone()
    ids = torch.randint(5, 99, (2, 10))
    mlm(input_ids=ids, labels=ids).loss.backward()
    torch.optim.SGD(mlm.parameters(), lr=0.1).step()
    assert not torch.equal(before, student.bert.encoder.layer[0].output.dense.weight)  # the student trained


def test_with_mlm_head_of_a_narrower_student_is_new() -> None:
    teacher = BertForMaskedLM(BertConfig(**CFG))
    student = BertForSequenceClassification(BertConfig(**{**CFG, "hidden_size": 16}))
    mlm = with_mlm_head(student, teacher)
    assert mlm.cls.predictions.transform.dense.weight.shape == (16, 16)


def test_mlm_forward_scores_only_masked_positions() -> None:
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(**CFG)).eval()
    ids = torch.randint(5, 99, (3, 12))
    attn = torch.ones_like(ids)
    labels = torch.full_like(ids, IGNORE)
    labels[0, 3], labels[2, 7] = 11, 12
    feats = mlm_forward(model, {"input_ids": ids, "attention_mask": attn}, (), labels)
    full = model(input_ids=ids, attention_mask=attn).logits
    assert feats.logits.shape == (2, 99)
    assert torch.allclose(feats.logits, full[labels != IGNORE], atol=1e-5)
    assert feats.hidden is None  # not asked for: dropped


def test_mlm_losses_on_known_values() -> None:
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    labels = torch.tensor([[IGNORE, 0], [2, IGNORE]])
    assert mlm_hard_loss(logits, labels).item() == pytest.approx(F.cross_entropy(logits, torch.tensor([0, 2])).item())
    assert mlm_soft_kd(logits, logits, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    teacher = torch.tensor([[0.0, 2.0, 0.0], [1.0, 1.0, 1.0]])
    p = F.softmax(teacher / 2, -1)
    expected = 4 * (p * (p.log() - F.log_softmax(logits / 2, -1))).sum(-1).mean()
    assert mlm_soft_kd(logits, teacher, 2.0).item() == pytest.approx(expected.item(), rel=1e-5)
    empty = torch.zeros(0, 3, requires_grad=True)
    assert mlm_soft_kd(empty, empty, 1.0).item() == 0.0
    assert mlm_hard_loss(empty, torch.full((2, 2), IGNORE)).item() == 0.0


def test_objective_masks_and_sums_its_terms() -> None:
    torch.manual_seed(0)
    teacher = BertForMaskedLM(BertConfig(**CFG)).eval()
    student = with_mlm_head(BertForSequenceClassification(BertConfig(**{**CFG, "num_hidden_layers": 1})), teacher)
    spec = ObjectiveSpec(kd_weight=0, mlm_soft=5, mlm_hard=2, cosine=1, temperature=2, layer_map="last", mask_rate=0.5)
    obj = build_objective(spec, student.config, teacher.config, False, _tok())
    ids = torch.randint(5, 99, (4, 16))
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP] in the tiny vocabulary
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    torch.manual_seed(3)
    masked, labels = obj.mask(inputs)
    assert (labels != IGNORE).any() and not torch.equal(masked["input_ids"], ids)
    assert (labels[:, 0] == IGNORE).all() and (labels[:, -1] == IGNORE).all()
    s = mlm_forward(student, masked, obj.wants, labels)
    with torch.no_grad():
        t = mlm_forward(teacher, masked, obj.wants, labels)
    total, parts = obj.terms(s, t, labels, None)
    assert set(parts) == {"mlm_soft", "mlm_hard", "cosine"}
    assert total.item() == pytest.approx(5 * parts["mlm_soft"] + 2 * parts["mlm_hard"] + parts["cosine"], rel=1e-5)
    total.backward()
    assert student.cls.predictions.transform.dense.weight.grad is not None


def test_recipe_rules_for_mlm_terms() -> None:
    with pytest.raises(ValidationError, match="set kd_weight, hard_weight, logit_mse and the vector terms to 0"):
        ObjectiveSpec(mlm_soft=1.0)  # kd_weight defaults to 1
    with pytest.raises(ValidationError, match="masked-LM head"):
        StageSpec(data="corpus", objective=ObjectiveSpec(kd_weight=0, mlm_hard=1))  # teacher: finetuned
    with pytest.raises(ValidationError, match="task logits"):
        StageSpec(teacher="some/dir", objective=ObjectiveSpec(kd_weight=1))
    StageSpec(data="corpus", teacher="base", objective=ObjectiveSpec(kd_weight=0, mlm_soft=5, mlm_hard=2, cosine=1))


def _recipe(tmp_path: Path, teacher_dir: Path, stage_teacher: str) -> dict:
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    corpus = write_tiny_corpus(tmp_path / "corpus", paragraphs=60, words=10)
    short = {**TINY_TRAIN, "max_steps": 4}
    student = {
        "name": "distil",
        "teacher_layers": [1],
        "stages": [
            {"name": "general", "data": "corpus", "teacher": stage_teacher,
             "objective": {"kd_weight": 0, "mlm_soft": 5, "mlm_hard": 2, "cosine": 1, "temperature": 2,
                           "layer_map": "last"}, "train": short},
            {"name": "task", "objective": {"kd_weight": 1}, "train": short},
        ],
    }
    recipe = tiny_recipe(tmp_path, teacher_dir, glue, students=[student])
    recipe["corpus"] = {"paths": [str(corpus)], "max_length": 32}
    return recipe


@pytest.mark.slow
def test_distilbert_general_then_task(tmp_path: Path) -> None:
    teacher = make_tiny_mlm_dir(tmp_path / "mlm-teacher")  # fine-tuned here for the task; 'base' keeps its MLM head
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path, teacher, "base")))
    from tinyplm.run import run

    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    general = run_dir / "students" / "distil.stage-0"
    assert has_mlm_head(general)  # a reusable general student, with its MLM head
    saved = BertForMaskedLM.from_pretrained(general)
    base = BertForMaskedLM.from_pretrained(teacher)
    assert saved.config.num_hidden_layers == 1
    # DistilBERT init from the base teacher's layer 1, then trained: close to it but not equal
    assert not torch.equal(saved.bert.encoder.layer[0].output.dense.weight,
                           base.bert.encoder.layer[1].output.dense.weight)
    stage = next(s for s in record.stages if s.name == "distil")
    assert "base teacher" in stage.info.init
    infos = stage.info.training
    assert infos[0].steps == 4 and set(infos[0].objective) >= {"mlm_soft", "mlm_hard", "cosine", "mask_rate"}
    assert "mask_rate" not in infos[1].objective
    assert 0.0 <= stage.metrics["accuracy"] <= 1.0
    losses = [json.loads(line) for line in (run_dir / "logs" / "train.jsonl").read_text().splitlines()]
    assert any(e["stage"] == "distil/general" and e.get("event") == "train" and e["loss"] > 0 for e in losses)


def test_mlm_stage_teacher_without_head_is_refused_before_writing(tmp_path: Path) -> None:
    from tinyplm.run import preflight

    plain = make_tiny_model_dir(tmp_path / "plain")  # a classifier: no MLM head
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path, plain, "base")))
    with pytest.raises(ModelError, match="fit-mlm-head"):
        preflight(cfg)
    assert not Path(cfg.output_dir).exists()


class _Killed(Exception):
    pass


def test_a_run_stopped_after_its_masked_lm_stage_resumes_as_one_that_ran_through(tmp_path: Path, monkeypatch) -> None:
    """The general stage is saved with its masked-LM head and no task head. A run stopped after
    saving it reloaded that dir for the task stage as a classifier, which refused it ('holds no
    sequence head'): the run could not resume. Its encoder now goes back into the student, which keeps
    its task head, and the resumed run ends on the weights of a run that was never stopped."""
    from tinyplm.run import run, students

    teacher = make_tiny_mlm_dir(tmp_path / "mlm-teacher")
    recipe = _recipe(tmp_path, teacher, "base")
    straight = load_recipe(write_recipe(tmp_path / "a.yaml", {**recipe, "output_dir": str(tmp_path / "a")}))
    run(straight)
    stopped = load_recipe(write_recipe(tmp_path / "b.yaml", {**recipe, "output_dir": str(tmp_path / "b")}))
    real, calls = students.train_stage, []

    def stop_at_the_task_stage(*args, **kwargs):
        calls.append(args[1].name)
        if args[1].name == "task":
            raise _Killed()
        return real(*args, **kwargs)

    monkeypatch.setattr(students, "train_stage", stop_at_the_task_stage)
    with pytest.raises(_Killed):
        run(stopped)
    assert (tmp_path / "b" / "students" / "distil.stage-0").is_dir()
    monkeypatch.setattr(students, "train_stage", real)
    run(stopped, resume=True)
    a = load_file(str(tmp_path / "a" / "students" / "distil" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "students" / "distil" / "model.safetensors"))
    assert set(a) == set(b)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
