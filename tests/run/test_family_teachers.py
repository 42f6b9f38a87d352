"""A recipe over a teacher of any role-table family: a student of its layers is of its family unless
the recipe names another arch, and a whole run (fine-tune, student, measure) works for it."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, tiny_recipe
from helpers_families import make_family_dir
from tinyplm.config import validate_recipe
from tinyplm.config.schema import StudentArch
from tinyplm.errors import RecipeError
from tinyplm.models.roles import ROLES
from tinyplm.run import run_or_reuse
from tinyplm.run.preflight import preflight


def test_every_role_table_family_is_a_recipe_arch() -> None:
    named = set(typing.get_args(StudentArch))
    assert {"deberta" if t == "deberta-v2" else t for t in ROLES} == named


@pytest.mark.parametrize("family", ["distilbert", "mpnet", "modernbert"])
def test_a_student_of_teacher_layers_is_of_the_teachers_family(tmp_path: Path, family: str) -> None:
    teacher = make_family_dir(tmp_path / family, family)
    student = {"name": "s", "teacher_layers": [0, 2], "objective": {"kd_weight": 1.0},
               "train": {**TINY_TRAIN, "max_steps": 4}}
    raw = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=32, n_dev=16),
                      teacher={"model": str(teacher), "finetune": {**TINY_TRAIN, "max_steps": 4}},
                      students=[student])
    cfg = validate_recipe(raw, source="test")
    record = run_or_reuse(cfg)
    saved = json.loads((Path(cfg.output_dir) / "students" / "s" / "config.json").read_text())
    assert saved["model_type"] == family
    assert record.stage("s").shape["layers"] == 2
    assert record.stage("s").info.init.startswith(family)


def test_naming_another_arch_for_teacher_layers_is_refused(tmp_path: Path) -> None:
    teacher = make_family_dir(tmp_path / "distilbert", "distilbert")
    raw = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                      students=[{"name": "s", "teacher_layers": [0], "arch": "bert"}])
    with pytest.raises(RecipeError, match="copies layers of the 'distilbert' teacher"):
        preflight(validate_recipe(raw, source="test"))


@pytest.mark.parametrize("family", ["electra", "albert"])
def test_narrowing_to_the_embedding_width_is_refused_before_the_teacher_trains(tmp_path: Path, family: str) -> None:
    """An ELECTRA student narrowed to exactly the teacher's embedding_size (ELECTRA-small's 128 of
    256 is a natural choice) is built without the projection to copy: said by narrowing after the
    teacher's fine-tune; now by validate. ALBERT keeps its projection at any width: it passes."""
    from helpers_families import EMBED, HEADS

    teacher = make_family_dir(tmp_path / family, family)
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)

    def recipe(hidden: int) -> dict:
        shape = {"layers": 2, "hidden": hidden, "heads": HEADS, "ffn": 20}
        return tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher), "finetune": {**TINY_TRAIN}},
                           students=[{"name": "s", "teacher_layers": [0, 2], "shape": shape}])

    if family == "electra":
        with pytest.raises(RecipeError, match=f"student s: the teacher projects its {EMBED}-wide embeddings .*choose "
                                              f"a hidden width other than {EMBED}"):
            preflight(validate_recipe(recipe(EMBED), source="test"))
    else:
        preflight(validate_recipe(recipe(EMBED), source="test"))
    preflight(validate_recipe(recipe(EMBED + HEADS), source="test"))
