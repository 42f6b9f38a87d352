"""A layer-wise objective the student's and the teacher's shapes cannot take is refused by validate
(and so by run) before the teacher is fine-tuned, naming the student, the stage and both shapes;
one they can take validates. The tiny teacher: 2 layers, 4 heads, hidden 32."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import assert_bad_input, cli

SHORT = {"epochs": 1, "max_steps": 2, "batch_size": 8}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("objectives")
    return make_tiny_model_dir(root / "teacher"), make_tiny_glue(root / "glue", n_train=16, n_dev=8)


@pytest.mark.parametrize(("student", "expected"), [
    ({"shape": {"layers": 1, "hidden": 24, "heads": 3, "ffn": 40}, "objective": {"attention_scores": 1.0}},
     "compares attention heads one to one, but the student has 3 heads and the teacher 4"),
    ({"teacher_layers": [1], "objective": {"hidden": 1.0, "layer_map": [[1, 5]]}},
     "layer pair (1, 5) is out of range"),
    ({"teacher_layers": [0, 1], "objective": {"qkv_relation": 1.0, "relation_heads": 3}},
     "relation_heads=3 must divide both hidden sizes (32, 32)"),
    ({"teacher_layers": [0, 1], "shape": {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37, "keep_heads": 2},
      "objective": {"attention_scores": 1.0}},
     "compares attention heads one to one, but the student has 2 heads and the teacher 4"),
    ({"teacher_layers": [0, 1], "shape": {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37, "keep_heads": 3},
      "objective": {"qkv_relation": 1.0, "relation_heads": 16}},
     "relation_heads=16 must divide the query/key/value width of student layer 1 (24: 3 heads)"),
], ids=["heads", "layer-map", "relation-heads", "kept-heads", "kept-heads-relation"])
def test_an_objective_the_shapes_cannot_take_is_refused_before_any_work(tmp_path: Path, world, student: dict,
                                                                      expected: str) -> None:
    teacher, glue = world
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[{"name": "s1", "train": SHORT, **student}])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert_bad_input(result, "student s1, stage 0: ", expected, f"teacher {teacher}: 2 layers, 4 heads, hidden 32")
    assert not (tmp_path / "runs").exists()


def test_an_objective_the_shapes_take_validates(tmp_path: Path, world) -> None:
    teacher, glue = world
    students = [{"name": "s1", "train": SHORT, "teacher_layers": [1],
                 "objective": {"attention_scores": 1.0, "hidden": 1.0, "layer_map": [[1, 2]]}},
                {"name": "s2", "train": SHORT, "init_from": "s1",
                 "objective": {"qkv_relation": 1.0, "relation_heads": 4}}]
    recipe = tiny_recipe(tmp_path, teacher, glue, students=students)
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 0, result.output


def test_a_stage_is_checked_against_its_own_teacher(tmp_path: Path, world) -> None:
    """A stage that learns from another dir (4 layers here) is checked against that teacher's
    layers, not the run's (2): a layer_map into its fourth layer validates, into a fifth is refused."""
    from transformers import BertConfig, BertForSequenceClassification

    teacher, glue = world
    deeper = make_tiny_model_dir(tmp_path / "deeper")  # its tokenizer; the model is replaced by a deeper one
    (deeper / "model.safetensors").unlink()
    BertForSequenceClassification(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                                             intermediate_size=37, max_position_embeddings=64)).save_pretrained(deeper)

    def student(pair: list[int]) -> dict:
        return {"name": "s1", "shape": {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37},
                "stages": [{"teacher": str(deeper), "objective": {"kd_weight": 0.0, "hidden": 1.0, "layer_map": [pair]},
                            "train": SHORT}]}

    ok = tiny_recipe(tmp_path, teacher, glue, students=[student([2, 4])])
    assert cli(["validate", str(write_recipe(tmp_path / "r.yaml", ok))], cwd=tmp_path).returncode == 0
    bad = tiny_recipe(tmp_path, teacher, glue, students=[student([2, 5])])
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", bad))], cwd=tmp_path),
                     "layer pair (2, 5) is out of range", f"teacher {deeper}: 4 layers")


@pytest.mark.parametrize(("method", "objective", "expected"), [
    ("ulmfit", {"kd_weight": 0.0, "hidden": 1.0, "attention_scores": 1.0},
     "stage 0: method ulmfit trains the task head first, but its objective (hidden, attention_scores) never "
     "reads it"),
    ("frozen", {"kd_weight": 0.0, "hidden": 1.0}, "stage 1: method frozen trains the task head alone"),
    ("recover", {"kd_weight": 0.0, "hidden": 1.0},
     "the recovery of compress step prune_heads: method ulmfit trains the task head first, but its objective"),
], ids=["ulmfit", "frozen", "recover"])
def test_a_method_that_starts_at_the_head_needs_a_term_that_reads_it(tmp_path: Path, world, method: str,
                                                                     objective: dict, expected: str) -> None:
    """ULMFiT trains only the head (and what sits above the layers) in its first steps, frozen only the
    head: with layer-wise terms alone no weight that trains is in the loss, which the loop met at its
    first step as a traceback, after the teacher's fine-tune. Validate refuses it; with a KD term it runs."""
    teacher, glue = world
    stages = [{"objective": {"kd_weight": 1.0}, "train": SHORT},
              {"objective": objective, "train": {**SHORT, "method": method}}]
    stages = stages[1:] if method == "ulmfit" else stages
    spec = {"name": "s1", "teacher_layers": [0, 1], "stages": stages}
    if method == "recover":  # a compress step's recovery (a traceback after the student's training)
        stages[-1]["train"] = SHORT
        spec["compress"] = [{"kind": "prune_heads", "keep": 0.5,
                             "recover": {"objective": objective, "train": {**SHORT, "method": "ulmfit"}}}]
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[spec])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert_bad_input(result, "student s1, ", expected, "use method full")
    (spec["compress"][0]["recover"] if method == "recover" else stages[-1])["objective"] = {**objective,
                                                                                           "kd_weight": 1.0}
    assert cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path).returncode == 0


def test_a_ulmfit_stage_whose_terms_learn_a_projection_is_let_through(tmp_path: Path, world) -> None:
    """A student narrower than its teacher learns TinyBERT's projection from ULMFiT's first step, then
    its layers as they unfreeze: such a stage ran before the head-first check and must still validate."""
    teacher, glue = world
    student = {"name": "s1", "teacher_layers": [0], "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
               "objective": {"kd_weight": 0.0, "hidden": 1.0},
               "train": {**SHORT, "method": "ulmfit", "method_options": {"unfreeze_every": 1}}}
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[student])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 0, result.output


def test_adapter_targets_naming_part_of_a_fused_linear_are_refused_before_any_work(tmp_path: Path, world) -> None:
    from helpers_families import make_family_dir

    _, glue = world
    teacher = make_family_dir(tmp_path / "modernbert", "modernbert")
    recipe = tiny_recipe(tmp_path, teacher, glue)
    recipe["teacher"]["finetune"] |= {"method": "lora", "method_options": {"targets": ["query", "value"]}}
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert_bad_input(result, "teacher.finetune.method_options.targets: query, value is one Linear (attn.Wqkv) with key "
                             "in modernbert", "name query, key, value together")
    recipe["teacher"]["finetune"]["method_options"] = {"targets": ["query", "key", "value"]}
    assert cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(("where", "expected"), [
    ("teacher", "teacher.finetune.method_options.r = 32 is not below the teacher's hidden size 32"),
    ("student", "students.0.train.method_options.r = 16 is not below student s1's hidden size 16"),
])
def test_a_lora_rank_not_below_the_hidden_size_is_refused_before_any_work(tmp_path: Path, world, where: str,
                                                                         expected: str) -> None:
    teacher, glue = world
    lora = {"method": "lora", "method_options": {"r": 32 if where == "teacher" else 16}}
    student = {"name": "s1", "teacher_layers": [0], "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
               "train": {**SHORT, **(lora if where == "student" else {})}}
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[student])
    recipe["teacher"]["finetune"] |= lora if where == "teacher" else {}
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path), expected,
                     "use r < ")


@pytest.mark.parametrize("student", ["init_from", "arch", "recovery"])
def test_adapter_settings_of_students_of_any_origin_are_refused_before_any_work(tmp_path: Path, world,
                                                                                student: str) -> None:
    """Targets and rank are checked against the model each section trains, not only against the
    teacher's layers: a student started from a checkpoint of another family, a student of another
    ``arch`` built from a shape, and a compress step's recovery training (once refused only when
    their stage started, after the teacher's fine-tune)."""
    from helpers_families import make_family_dir

    teacher, glue = world
    fused = {"method": "lora", "method_options": {"targets": ["query", "value"]}}
    if student == "init_from":
        spec = {"name": "s1", "init_from": str(make_family_dir(tmp_path / "modernbert", "modernbert")),
                "train": {**SHORT, **fused}}
        expected = ("students.0.train.method_options.targets: query, value is one Linear (attn.Wqkv) with key in "
                    "modernbert")
    elif student == "arch":  # a RoBERTa student built from a shape beside the BERT teacher
        spec = {"name": "s1", "arch": "roberta", "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
                "train": {**SHORT, "method": "lora", "method_options": {"r": 16}}}
        expected = "students.0.train.method_options.r = 16 is not below student s1's hidden size 16"
    else:
        lora = {"method": "lora", "method_options": {"r": 16}}
        spec = {"name": "s1", "teacher_layers": [0], "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
                "train": SHORT,
                "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {"train": {**SHORT, **lora}}}]}
        expected = "students.0.compress.0.recover.train.method_options.r = 16 is not below student s1's hidden size 16"
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[spec])
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path), expected)



def test_a_soft_target_term_below_temperature_1_is_said_before_the_run(tmp_path: Path, world) -> None:
    """Below 1 the soft targets are sharpened and the T^2 scale shrinks their gradients: no error,
    but the preflight's notes (validate prints them) say it for each section that does it (a stage,
    a compress step's recovery), and nothing for T >= 1 or a KD term that is off."""
    from tinyplm.config import load_recipe
    from tinyplm.run import preflight

    teacher, glue = world
    cold = {"temperature": 0.25, "kd_weight": 1.0}
    stages = [{"objective": cold, "train": SHORT},
              {"objective": {**cold, "kd_weight": 0.0, "hard_weight": 1.0}, "train": SHORT},
              {"objective": {"temperature": 2.0}, "train": SHORT}]
    spec = {"name": "s1", "teacher_layers": [0], "stages": stages,
            "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {"objective": cold, "train": SHORT}}]}
    path = write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, teacher, glue, students=[spec]))
    notes = [n for n in preflight(load_recipe(path)).notes if "temperature" in n]
    assert [n.split(":")[0] for n in notes] == ["student s1, stages.0", "student s1, compress.0.recover"]
    assert all("objective.temperature 0.25 is below 1: kd_weight then sharpen" in n and "about 0.25 times" in n
               for n in notes)


@pytest.mark.parametrize("arch", ["distilbert", "albert"])
def test_a_student_arch_its_teacher_cannot_give_is_refused_before_the_teachers_fine_tune(
        tmp_path: Path, world, arch: str) -> None:
    """A shape of another family than the teacher's is built from the teacher's config, which only
    bert, roberta and deberta can be built beside: the run said so after the teacher's fine-tune."""
    teacher, glue = world
    spec = {"name": "s1", "arch": arch, "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20}, "train": SHORT}
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[spec])
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path),
                     f"student s1: arch {arch} builds a", "this teacher is 'bert'", "bert, roberta, deberta")
    spec["arch"] = "roberta"  # one of those: built beside the teacher's config
    assert cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("native", [False, True])
def test_bf16_training_on_a_cpu_without_native_bf16_is_said_before_the_run(
        tmp_path: Path, world, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    """precision: bf16 is emulated (slow) where the CPU has no native bf16: the notes name where it is
    asked for; on a CPU that has it, nothing. The CPU is set here, so the test reads alike on every kind."""
    from tinyplm.config import load_recipe
    from tinyplm.run import preflight, preflight_precision

    monkeypatch.setattr(preflight_precision, "cpu_supports_bf16", lambda: native)
    teacher, glue = world
    spec = {"name": "s1", "teacher_layers": [0], "train": {**SHORT, "precision": "bf16"}}
    recipe = tiny_recipe(tmp_path, teacher, glue, students=[spec])
    recipe["teacher"]["finetune"]["precision"] = "bf16"
    notes = [n for n in preflight(load_recipe(write_recipe(tmp_path / "r.yaml", recipe))).notes if "bf16" in n]
    if native:
        assert notes == []
        return
    assert len(notes) == 1 and notes[0].startswith("precision: bf16 in teacher.finetune, students.0.train: this CPU "
                                                   "has no native bf16")
