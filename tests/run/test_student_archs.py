"""RoBERTa- and DeBERTa-style students named in a recipe: built from scratch (optionally from the
teacher's word table) beside a BERT student of the same shape, distilled with layer-wise terms,
saved and reloaded as their own family; recipes that cannot work are refused before anything is
written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.schema import student_name
from tinyplm.distill.mlm import with_mlm_head
from tinyplm.errors import RecipeError
from tinyplm.models import load_classifier
from tinyplm.run import run

SHAPE = {"layers": 1, "hidden": 32, "heads": 2, "ffn": 64}
TRAIN = {**TINY_TRAIN, "max_steps": 3}


def _recipe(tmp: Path, students: list[dict]) -> Path:
    model, glue = make_tiny_model_dir(tmp / "tiny-bert"), make_tiny_glue(tmp / "glue", n_train=48, n_dev=24)
    recipe = tiny_recipe(tmp, model, glue, students=students)
    recipe["teacher"]["finetune"] = {**TINY_TRAIN, "max_steps": 3}
    return write_recipe(tmp / "r.yaml", recipe)


def test_students_of_each_arch_run_side_by_side(tmp_path: Path) -> None:
    objective = {"kd_weight": 1, "hidden": 1}
    students = [{"shape": SHAPE, "arch": arch, "objective": objective, "train": TRAIN,
                 **({"word_embeddings": True} if arch == "roberta" else {})} for arch in ("bert", "roberta", "deberta")]
    cfg = load_recipe(_recipe(tmp_path, students))
    assert [student_name(s) for s in cfg.students] == ["student-L1-H32", "student-roberta-L1-H32",
                                                       "student-deberta-L1-H32"]
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    for name, model_type in (("student-L1-H32", "bert"), ("student-roberta-L1-H32", "roberta"),
                             ("student-deberta-L1-H32", "deberta-v2")):
        stage = record.stage(name)
        assert stage.info.training[0].steps == 3 and stage.throughput_sent_per_s > 0
        model, _ = load_classifier(run_dir / stage.model_dir, ("0", "1"), False)
        assert model.config.model_type == model_type
    assert record.stage("student-roberta-L1-H32").info.init.startswith("roberta, random, the teacher's word table")


@pytest.mark.parametrize(("student", "message"), [
    ({"family": {"arch": "bilstm"}, "arch": "roberta"}, "'arch' and 'word_embeddings' are for transformer students"),
    ({"teacher_layers": [0], "word_embeddings": True}, "one with teacher_layers or init_from already has"),
    ({"arch": "gpt2", "shape": SHAPE}, "arch"),
])
def test_bad_student_archs_are_refused_when_loaded(tmp_path: Path, student: dict, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        load_recipe(_recipe(tmp_path, [student]))


def test_teacher_layers_across_families_are_refused_before_the_run_dir(tmp_path: Path) -> None:
    cfg = load_recipe(_recipe(tmp_path, [{"teacher_layers": [0], "arch": "roberta", "train": TRAIN}]))
    with pytest.raises(RecipeError, match="teacher_layers copies layers of the 'bert' teacher"):
        run(cfg)
    assert not (tmp_path / "runs").exists()


def test_a_roberta_student_gets_a_masked_lm_head_of_its_family(tmp_path: Path) -> None:
    from tinyplm.config.schema import StudentSpec
    from tinyplm.models.student import build_student

    teacher, _ = load_classifier(make_tiny_model_dir(tmp_path / "tiny-bert"), ("0", "1"), False)
    student = build_student(StudentSpec(shape=SHAPE, arch="roberta"), teacher, arch="roberta")
    mlm = with_mlm_head(student)
    assert type(mlm).__name__ == "RobertaForMaskedLM"
    assert mlm.roberta is student.roberta  # shared: training the head's model trains the student
