"""The recipe shape a user runs (fine-tune, a student of teacher layers with hidden-state KD, prune
heads, prune FFN, trim the vocabulary, the fastest runtime) through ``tinyplm run`` on the config
variants a user found failing: DistilBERT (its sizes under ``dim``/``hidden_dim``/``n_layers``)
and DeBERTa-v2 with ``share_att_key`` absent (the model class reads False), False and True. Each
finishes; every stage reports the shape it has; the final model predicts what evaluate measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import TINY_TRAIN, make_tiny_glue, tiny_recipe
from helpers_families import tiny_tokenizer
from tinyplm.config import validate_recipe
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.run import run_or_reuse

_DEBERTA = {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "position_buckets": 8}
VARIANTS = {
    "distilbert": ("distilbert", "wordpiece", {}),
    "deberta-share-absent": ("deberta-v2", "unigram", _DEBERTA),
    "deberta-share-false": ("deberta-v2", "unigram", {**_DEBERTA, "share_att_key": False}),
    "deberta-share-true": ("deberta-v2", "bpe", {**_DEBERTA, "share_att_key": True}),
}


def _teacher_dir(path: Path, family: str, kind: str, fields: dict) -> Path:
    import transformers as tf

    tok = tiny_tokenizer(kind)
    ids = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "num_labels": 2}
    if family == "distilbert":
        config = tf.DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=3, n_heads=4, hidden_dim=37,
                                     max_position_embeddings=64, **ids, **fields)
    else:
        config = tf.DebertaV2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                    intermediate_size=37, max_position_embeddings=64, **ids, **fields)
    if "share_att_key" not in fields and hasattr(config, "share_att_key"):
        delattr(config, "share_att_key")  # as in a config.json that leaves it out
    torch.manual_seed(0)
    tf.AutoModelForSequenceClassification.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_recipe_runs_through_every_stage(tmp_path: Path, variant: str) -> None:
    family, kind, fields = VARIANTS[variant]
    teacher = _teacher_dir(tmp_path / "teacher0", family, kind, fields)
    saved = json.loads((teacher / "config.json").read_text())
    assert ("share_att_key" in saved) == ("share_att_key" in fields)
    student = {"name": "s", "teacher_layers": [0, 2], "objective": {"kd_weight": 1.0, "hidden": 1.0},
               "train": {**TINY_TRAIN, "max_steps": 3},
               "compress": [{"kind": "prune_heads", "keep": 0.5}, {"kind": "prune_ffn", "keep": 0.5},
                            {"kind": "trim_vocab"},
                            {"kind": "runtime", "runtime": "fastest", "candidates": ["onnx_dynamic_int8", "openvino"],
                             "control_examples": 32}]}
    glue = make_tiny_glue(tmp_path / "glue", n_train=48, n_dev=16)
    finetune = {**TINY_TRAIN, "max_steps": 3}
    raw = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher), "finetune": finetune},
                      students=[student])
    cfg = validate_recipe(raw, source="test")
    record = run_or_reuse(cfg)
    shapes = {s.name: s.shape for s in record.stages}
    assert list(shapes) == ["teacher", "s", "s.prune_heads", "s.prune_ffn", "s.trim_vocab", "s.runtime"]
    assert shapes["s"]["layers"] == 2
    heads = shapes["s.prune_heads"]["heads_per_layer"]
    assert sum(heads) == 4 and min(heads) >= 1  # half of 2 x 4 heads, wherever they matter least
    assert shapes["s.prune_ffn"]["ffn_per_layer"] == [round(0.5 * 37)] * 2  # per layer, as prune_ffn keeps them
    assert shapes["s.runtime"] == shapes["s.trim_vocab"]  # the runtime form says the shape it runs
    run_dir = Path(cfg.output_dir)
    student_cfg = json.loads((run_dir / "students" / "s" / "config.json").read_text())
    assert {k: student_cfg.get(k) for k in fields} == fields
    assert ("share_att_key" in student_cfg) == ("share_att_key" in fields)  # absent stays absent
    results = json.loads((run_dir / "results.json").read_text())
    stage = next(s for s in results["stages"] if s["name"] == results["info"]["final_model"])
    rows = [line.split("\t") for line in (glue / "SST-2" / "dev.tsv").read_text().splitlines()[1:]]
    labels = [p.label for p in Predictor.load(run_dir / "model").predict([TextInput(text) for text, _ in rows])]
    correct = sum(label == ("negative", "positive")[int(gold)] for label, (_, gold) in zip(labels, rows, strict=True))
    assert correct / len(rows) == pytest.approx(stage["metrics"]["accuracy"])  # predict = evaluate


def test_the_runtime_choice_is_judged_on_the_tasks_held_out_examples(tmp_path: Path) -> None:
    teacher = _teacher_dir(tmp_path / "teacher0", "distilbert", "wordpiece", {})
    student = {"name": "s", "init_from": "teacher", "stages": [],
               "compress": [{"kind": "runtime", "runtime": "fastest",
                             "candidates": ["onnx_dynamic_int8", "openvino"]}]}
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=16)
    finetune = {**TINY_TRAIN, "max_steps": 2}
    raw = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher), "finetune": finetune},
                      students=[student])
    raw["task"]["holdout"] = 24
    run_or_reuse(validate_recipe(raw, source="test"))
    results = json.loads((tmp_path / "runs" / "tiny" / "results.json").read_text())
    stage = next(s for s in results["stages"] if s["name"] == "s.runtime")
    chosen_by = stage["info"]["compress"]["details"]["chosen_by"]
    assert chosen_by["control"] == "holdout" and chosen_by["examples"] == 24
    assert not chosen_by["within_limits"]  # 24 examples cannot show a candidate within max_flip, and it says so
    assert all("more examples are needed" in c["refused"] for c in chosen_by["candidates"].values())


def test_a_tokenizer_trimming_cannot_take_is_refused_before_training(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tinyplm.errors import RecipeError
    from tinyplm.run.preflight import preflight

    teacher = _teacher_dir(tmp_path / "teacher0", "distilbert", "wordpiece", {})
    vocab = json.loads((teacher / "tokenizer.json").read_text())["model"]["vocab"]
    word_level = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="<unk>", pad_token="<pad>", cls_token="<s>",
                            sep_token="</s>", mask_token="<mask>").save_pretrained(teacher)
    student = {"name": "s", "teacher_layers": [0], "compress": [{"kind": "trim_vocab"}]}
    raw = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                      teacher={"model": str(teacher)}, students=[student])
    with pytest.raises(RecipeError, match="student s: compress step trim_vocab cannot trim the vocabulary: its "
                                          "tokenizer's model is WordLevel"):
        preflight(validate_recipe(raw, source="test"))
    assert not (tmp_path / "runs").exists()
