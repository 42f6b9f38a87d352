"""A run whose teacher is fine-tuned with LoRA: the merged teacher is a plain checkpoint that a
student distils from unchanged, and its cost is in results.json; a method that leaves no plain
checkpoint is refused before the run dir exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.finetune import trained_sections
from tinyplm.errors import RecipeError
from tinyplm.models import load_classifier
from tinyplm.report.tables import column_note, stage_rows, table_cells, table_header
from tinyplm.run import run


def _recipe(tmp: Path, teacher_train: dict, students: list | None = None) -> Path:
    model, glue = make_tiny_model_dir(tmp / "tiny-bert"), make_tiny_glue(tmp / "glue", n_train=64, n_dev=32)
    recipe = tiny_recipe(tmp, model, glue, students=students or [])
    recipe["teacher"]["finetune"] = {**TINY_TRAIN, "max_steps": 4, **teacher_train}
    return write_recipe(tmp / "r.yaml", recipe)


def test_a_lora_teacher_is_saved_merged_and_distilled_from(tmp_path: Path) -> None:
    student = {"name": "s", "teacher_layers": [1], "train": {**TINY_TRAIN, "max_steps": 2, "method": "bitfit"}}
    cfg = load_recipe(_recipe(tmp_path, {"method": "lora", "method_options": {"r": 2}}, [student]))
    record = run(cfg)
    teacher = next(s for s in record.stages if s.name == "teacher")
    tuned = teacher.info.training[0]
    assert tuned.finetune_method == "lora"
    assert 0 < tuned.trainable_params < tuned.total_params
    assert tuned.peak_rss_mib > 0 and tuned.train_seconds >= 0
    run_dir = tmp_path / "runs" / "tiny"
    model, _ = load_classifier(run_dir / "teacher", ("0", "1"), False)
    assert not any("lora" in name for name, _ in model.named_parameters())
    saved = json.loads((run_dir / "results.json").read_text())
    distilled = next(s for s in saved["stages"] if s["name"] == "s")
    trained = distilled["info"]["training"][0]  # results.json as written: a student's stage records its method
    assert trained["finetune_method"] == "bitfit"  # and cost too
    assert 0 < trained["trainable_params"] < trained["total_params"]
    header, cells = table_header(record), table_cells(record, stage_rows(record)[0])
    share = tuned.trainable_params / tuned.total_params
    assert "Trained (M) = parameters the stage's own training updated" in column_note(record)
    assert cells[header.index("Trained (M)")] == f"{tuned.trainable_params / 1e6:.3g} ({share:.1%})"


@pytest.mark.parametrize(("train", "form"), [({"method": "prompt_tuning"}, "method: prompt_tuning"),
                                              ({"method": "frozen", "method_options": {"features": "last4"}},
                                               "features: last4")])
def test_a_method_without_a_checkpoint_is_refused_before_anything_is_written(tmp_path: Path, train: dict,
                                                                             form: str) -> None:
    with pytest.raises(RecipeError, match=f"teacher.finetune: {form} trains a model that is not a plain checkpoint"):
        load_recipe(_recipe(tmp_path, train))  # the recipe itself is refused: `tinyplm validate` says so too
    assert not (tmp_path / "runs").exists()


def test_trained_specs_finds_every_stage_that_trains(tmp_path: Path) -> None:
    student = {"name": "s", "teacher_layers": [1], "train": {**TINY_TRAIN, "method": "bitfit"},
               "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {"train": {"method": "lora"}}}]}
    cfg = load_recipe(_recipe(tmp_path, {}, [student]))
    places = {where: spec.method.value for where, spec in trained_sections(cfg)}
    assert places["teacher.finetune"] == "full" and places["students.0.train"] == "bitfit"
    assert places["students.0.compress.0.recover.train"] == "lora"
