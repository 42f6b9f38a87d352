"""Checkpoints people bring, with their config quirks: each works, or is refused in one line naming
the file and key before any work (``validate`` for a run; ``predict`` and ``evaluate`` before a row)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import WORDS, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import assert_bad_input, cli
from helpers_families import make_family_dir


def _set(folder: Path, **keys) -> Path:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **keys}))
    return folder


def test_positions_after_the_padding_id_bound_predict_and_evaluate(tmp_path: Path) -> None:
    """XLM-RoBERTa's table of 66 rows holds 64 usable positions (they start after its padding id 1): a
    long text is cut there by default, and a longer --max-length is refused naming both numbers."""
    model = make_family_dir(tmp_path / "xlmr", "xlm-roberta")
    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=16)
    (tmp_path / "long.txt").write_text(" ".join(WORDS * 8) + "\nshort one\n", encoding="utf-8")
    result = cli(["predict", str(model), "-i", "long.txt", "-o", "out.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert "max length 64" in result.stderr and "cut to the model's 64 positions" in result.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2
    assert_bad_input(cli(["predict", str(model), "-i", "long.txt", "--max-length", "66"], cwd=tmp_path),
                     "--max-length 66 is longer than the 64 positions")
    result = cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue)], cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert_bad_input(cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue), "--max-length", "128"],
                         cwd=tmp_path), "--max-length 128 is longer than the 64 positions")


def test_predict_refuses_a_checkpoint_without_a_task_head(tmp_path: Path) -> None:
    """A bare encoder (``BertModel``) would answer from a classifier initialised at random."""
    from transformers import BertModel

    model = make_tiny_model_dir(tmp_path / "bare")
    BertModel.from_pretrained(str(model)).save_pretrained(model)
    (tmp_path / "in.txt").write_text("good film\n", encoding="utf-8")
    assert_bad_input(cli(["predict", str(model), "-i", "in.txt"], cwd=tmp_path),
                     f"{model / 'config.json'}: architectures ['BertModel'] hold no task head", "tinyplm finetune")


def test_a_family_outside_the_role_table_is_refused_by_every_command(tmp_path: Path) -> None:
    """GPT-2 loads in transformers, but tinyplm gives every model segment ids, which GPT-2 adds to its
    inputs as tokens: predict would answer otherwise than the model; validate's run would fine-tune it
    and only then fail measuring its shape. Both are refused before any work, naming the family."""
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    gpt2 = _set(make_tiny_model_dir(tmp_path / "gpt2"), model_type="gpt2")
    (tmp_path / "in.txt").write_text("a film\n", encoding="utf-8")
    expected = f"{gpt2 / 'config.json'}: model_type 'gpt2' is not a family tinyplm reads"
    assert_bad_input(cli(["predict", str(gpt2), "-i", "in.txt"], cwd=tmp_path), expected)
    recipe = tiny_recipe(tmp_path, gpt2, glue, students=[])
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path), expected)


def test_validate_refuses_what_the_run_would_refuse_later(tmp_path: Path) -> None:
    """An unknown model_type (with and without a student of the teacher's layers) and a classifier
    trained for another number of labels: refused by validate, nothing written."""
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    unknown = _set(make_tiny_model_dir(tmp_path / "unknown"), model_type="fancybert")
    for students in ([], [{"name": "s", "teacher_layers": [0]}]):
        recipe = tiny_recipe(tmp_path, unknown, glue, students=students)
        assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path),
                         f"{unknown / 'config.json'}: model_type 'fancybert' is not a family tinyplm reads")
    three = make_tiny_model_dir(tmp_path / "three", num_labels=3)
    recipe = tiny_recipe(tmp_path, three, glue, teacher={"model": str(three)})  # used as it is: no fine-tune
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path),
                     f"{three}: its classifier has 3 outputs but the task needs 2")
    assert not (tmp_path / "runs").exists()


def test_a_head_of_other_labels_is_replaced_where_the_run_trains_it(tmp_path: Path) -> None:
    """An MNLI-style 3-class classifier brought as the teacher of SST-2 with teacher.finetune, and as
    a student's init_from: both train on the task next, so the head is replaced by a new one of the
    task's 2 labels (validate and the run say so, the report records it), not refused after work."""
    from conftest import TINY_TRAIN
    from tinyplm.config import validate_recipe
    from tinyplm.models import load_classifier
    from tinyplm.run import run

    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    three = _set(make_tiny_model_dir(tmp_path / "three", num_labels=3),
                 id2label={"0": "contradiction", "1": "neutral", "2": "entailment"})
    student = {"name": "s", "init_from": str(three), "train": {**TINY_TRAIN, "epochs": 1}}
    recipe = tiny_recipe(tmp_path, three, glue, students=[student])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert f"note: {three}: its classifier has 3 outputs but the task needs 2" in result.stdout
    assert "teacher.finetune trains a new sequence head" in result.stdout
    record = run(validate_recipe(recipe, source="test"))
    teacher = next(s for s in record.stages if s.name == "teacher")
    assert "3 outputs but the task needs 2" in teacher.info.init
    assert next(s for s in record.stages if s.name == "s").info.init == f"from {three}"
    for name in ("teacher", "s"):
        folder = tmp_path / "runs" / "tiny" / ("students/s" if name == "s" else name)
        model, _ = load_classifier(folder, ("negative", "positive"), False)
        assert model.config.id2label == {0: "negative", 1: "positive"}
        assert tuple(model.classifier.weight.shape) == (2, 32)



def test_a_replaced_head_of_the_tasks_shape_keeps_none_of_its_weights(tmp_path: Path) -> None:
    """A 2-output multi-label head on a 2-label task has the task's shape: loading dropped only tensors
    of another shape, so the 'new' head was the old one."""
    import torch
    from safetensors.torch import load_file

    from tinyplm.models import load_classifier

    multi = _set(make_tiny_model_dir(tmp_path / "multi"), problem_type="multi_label_classification")
    saved = load_file(str(multi / "model.safetensors"))["classifier.weight"]
    model, _ = load_classifier(multi, ("negative", "positive"), False, replace_head=True)
    assert model.classifier.weight.shape == saved.shape and not torch.equal(model.classifier.weight, saved)
    kept = load_file(str(multi / "model.safetensors"))["bert.encoder.layer.0.output.dense.weight"]
    assert torch.equal(model.bert.encoder.layer[0].output.dense.weight, kept)  # the encoder is the checkpoint's


def test_evaluate_and_bench_refuse_a_checkpoint_without_the_tasks_head(tmp_path: Path) -> None:
    """A question-answering checkpoint (or a bare encoder) read for SST-2 had a classifier drawn at
    random put on it: evaluate and bench printed accuracies that changed from run to run."""
    from transformers import BertForQuestionAnswering, BertModel

    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=8)
    for name, cls in (("qa", BertForQuestionAnswering), ("bare", BertModel)):
        model = make_tiny_model_dir(tmp_path / name)
        cls.from_pretrained(str(model)).save_pretrained(model)
        expected = f"{model / 'config.json'}: architectures ['{cls.__name__}'] hold no sequence head"
        assert_bad_input(cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue)], cwd=tmp_path),
                         expected, "tinyplm finetune")
    assert_bad_input(cli(["bench", str(tmp_path / "qa"), "--task", "sst2", "--data-dir", str(glue)], cwd=tmp_path),
                     "['BertForQuestionAnswering'] hold no sequence head")


def test_a_padding_id_that_leaves_no_positions_is_refused_by_name(tmp_path: Path) -> None:
    """RoBERTa (here XLM-R) numbers positions from pad_token_id + 1: a pad id past the table crashed predict with
    an OverflowError and let validate speak of "at most -42 positions"; MPNet, whose code fixes its
    padding id at 1, is not bound by its config's pad_token_id and works."""
    (tmp_path / "t.txt").write_text("a good film\n", encoding="utf-8")
    roberta = _set(make_family_dir(tmp_path / "xlmr", "xlm-roberta"), pad_token_id=107)
    assert_bad_input(cli(["predict", str(roberta), "-i", "t.txt"], cwd=tmp_path),
                     "config.json: pad_token_id 107 is outside the word table")
    roberta = _set(roberta, pad_token_id=45, max_position_embeddings=40)  # in the table, but past the positions
    assert_bad_input(cli(["predict", str(roberta), "-i", "t.txt"], cwd=tmp_path),
                     "config.json: pad_token_id 45", "xlm-roberta model", "expected a pad_token_id below")
    mpnet = _set(make_family_dir(tmp_path / "mpnet", "mpnet"), pad_token_id=90)
    result = cli(["predict", str(mpnet), "-i", "t.txt", "-o", "m.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output


def test_a_run_dir_named_as_a_model_is_told_where_its_models_are(tmp_path: Path) -> None:
    from tinyplm.errors import ModelError
    from tinyplm.models import check_model_dir

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.resolved.yaml").write_text("name: x\n", encoding="utf-8")
    import re

    import pytest

    said = f"no config.json (expected a Hugging Face checkpoint directory); it is a tinyplm run dir: name one of " \
           f"its models ({run / 'model'}"
    with pytest.raises(ModelError, match=re.escape(said)):
        check_model_dir(run)


def test_a_padding_id_other_than_the_tokenizers_is_refused_where_positions_count_from_it(tmp_path: Path) -> None:
    """XLM-R's config naming pad_token_id 0 (its tokenizer's <s>; the tokenizer pads with 1) ran
    and predicted without a word: every position shifted and <s> read as padding. BERT, whose
    positions do not depend on it, is left alone."""
    from tinyplm.errors import ModelError
    from tinyplm.models import load_classifier

    (tmp_path / "t.txt").write_text("a good film\n", encoding="utf-8")
    roberta = _set(make_family_dir(tmp_path / "xlmr", "xlm-roberta"), pad_token_id=0)
    assert_bad_input(cli(["predict", str(roberta), "-i", "t.txt"], cwd=tmp_path),
                     "config.json: pad_token_id 0, but the tokenizer pads with id 1")
    with pytest.raises(ModelError, match="a xlm-roberta model counts positions from its padding id"):
        load_classifier(roberta, ("a", "b"), False)
    recipe = write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, roberta, make_tiny_glue(tmp_path / "glue")))
    assert_bad_input(cli(["validate", str(recipe)], cwd=tmp_path), "pad_token_id 0, but the tokenizer pads with id 1")
    bert = _set(make_tiny_model_dir(tmp_path / "bert"), pad_token_id=3)
    assert load_classifier(bert, ("a", "b"), False)[0].config.pad_token_id == 3
