"""Recipes: loading, errors that name key + line + nearest key, overrides, defaults, round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tinyplm.config import (
    ObjectiveSpec,
    RunConfig,
    ShapeSpec,
    StudentSpec,
    TrainSpec,
    apply_override,
    dump_resolved,
    load_recipe,
    student_name,
    validate_recipe,
)
from tinyplm.errors import RecipeError

# Line numbers below are referred to by the tests; keep them in sync.
VALID = """\
name: demo
task:
  name: sst2
  max_length: 64
teacher:
  model: some/dir
students:
  - name: small
    shape: {layers: 2, hidden: 64, heads: 4, ffn: 128}
    train:
      epochs: 1
      lr: 1.0e-4
  - teacher_layers: [0, 2]
    objective: {temperature: 2.0, kd_weight: 1.0, hard_weight: 0.5}
measure:
  rounds: 2
"""


def write(tmp_path: Path, text: str, name: str = "recipe.yaml") -> Path:
    """Write ``text`` to a recipe file and return its path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def replace_line(text: str, lineno: int, new: str) -> str:
    """``text`` with its 1-based line ``lineno`` replaced by ``new``."""
    lines = text.splitlines()
    lines[lineno - 1] = new
    return "\n".join(lines) + "\n"


def test_valid_recipe_loads(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID))
    assert isinstance(cfg, RunConfig)
    assert (cfg.name, cfg.task.name, cfg.task.max_length, cfg.teacher.model) == ("demo", "sst2", 64, "some/dir")
    assert cfg.teacher.finetune is None
    small, picked = cfg.students
    assert small.shape == ShapeSpec(layers=2, hidden=64, heads=4, ffn=128)
    assert (small.train.epochs, small.train.lr) == (1.0, 1e-4)
    assert picked.teacher_layers == [0, 2] and picked.shape is None
    assert picked.objective == ObjectiveSpec(temperature=2.0, kd_weight=1.0, hard_weight=0.5)
    assert cfg.measure.rounds == 2
    with pytest.raises(ValidationError):  # frozen
        cfg.task.max_length = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("lineno", "new_line", "key", "nearest"),
    [
        (15, "measure_:", "measure_", "measure"),  # top level
        (7, "studnets:", "studnets", "students"),  # top level, holding a list
        (4, "  max_lenght: 64", "task.max_lenght", "max_length"),  # nested in task
        (11, "      epochz: 1", "students[0].train.epochz", "epochs"),  # in students[0].train
        (14, "    objectve: {temperature: 2.0}", "students[1].objectve", "objective"),
    ],
)
def test_misspelled_key_names_key_line_and_nearest(
    tmp_path: Path, lineno: int, new_line: str, key: str, nearest: str
) -> None:
    path = write(tmp_path, replace_line(VALID, lineno, new_line))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{lineno}: unknown key '{key}'"), msg
    assert f"did you mean '{nearest}'?" in msg


def test_unknown_key_lists_the_valid_keys_of_its_section(tmp_path: Path) -> None:
    path = write(tmp_path, replace_line(VALID, 6, "  modle: some/dir"))
    keys = "finetune, logits_from, logits_precision, model"
    with pytest.raises(RecipeError, match=rf"did you mean 'model'\? Valid keys here: {keys}"):
        load_recipe(path)


def test_unknown_key_with_nothing_close(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "zzzzqqq: 1\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert f"{path}:17: unknown key 'zzzzqqq'" in str(info.value)
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize(
    ("lineno", "new_line", "key"),
    [
        (4, "  max_length: long", "task.max_length"),
        (12, "      lr: fast", "students[0].train.lr"),
        (16, "  rounds: [1, 2]", "measure.rounds"),
    ],
)
def test_wrong_type_names_key_and_line(tmp_path: Path, lineno: int, new_line: str, key: str) -> None:
    path = write(tmp_path, replace_line(VALID, lineno, new_line))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}:{lineno}: {key}: "), str(info.value)


def test_out_of_range_value_names_key(tmp_path: Path) -> None:
    path = write(tmp_path, replace_line(VALID, 4, "  max_length: 4"))
    with pytest.raises(RecipeError, match=r":4: task\.max_length: .*greater than or equal to 8"):
        load_recipe(path)


def test_override_nested_key(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["task.max_length=32", "name=other"])
    assert cfg.task.max_length == 32 and cfg.name == "other"


def test_override_list_index(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["students.0.train.lr=1e-4", "students.1.train.lr=2.5e-3"])
    assert cfg.students[0].train.lr == pytest.approx(1e-4)
    assert cfg.students[1].train.lr == pytest.approx(2.5e-3)


def test_override_wildcard_sets_every_student(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["students.*.train.epochs=2"])
    assert [s.train.epochs for s in cfg.students] == [2.0, 2.0]
    assert cfg.students[0].train.lr == 1e-4  # siblings untouched


def test_override_creates_missing_section(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["teacher.finetune.lr=3e-5"])
    assert cfg.teacher.finetune == TrainSpec(lr=3e-5)


def test_override_values_are_yaml(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["students.1.teacher_layers=[1, 3]", "task.regression=true"])
    assert cfg.students[1].teacher_layers == [1, 3] and cfg.task.regression is True


@pytest.mark.parametrize("item", ["task.max_length", "=3", "students.5.train.lr=1", "students.x.lr=1",
                                  "task.name.inner=1"])
def test_malformed_override_raises(tmp_path: Path, item: str) -> None:
    with pytest.raises(RecipeError, match="override"):
        load_recipe(write(tmp_path, VALID), [item])


def test_override_with_unknown_key_names_it(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"unknown key 'task\.max_len'; did you mean 'max_length'\?"):
        load_recipe(write(tmp_path, VALID), ["task.max_len=3"])


def test_apply_override_in_place() -> None:
    raw: dict = {"students": [{"train": {}}, {"train": {"lr": 1}}]}
    apply_override(raw, "students.*.train.epochs=2")
    apply_override(raw, "teacher.finetune.lr=3e-5")
    assert raw["students"] == [{"train": {"epochs": 2}}, {"train": {"lr": 1, "epochs": 2}}]
    assert raw["teacher"] == {"finetune": {"lr": "3e-5"}}  # YAML 1.1: no dot, so a string pydantic converts


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, replace_line(VALID, 3, "\tname: sst2"))  # a tab cannot start a token
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}:3: not valid YAML"), str(info.value)


def test_a_key_given_twice_is_refused_at_its_line_and_merges_still_override(tmp_path: Path) -> None:
    """Plain YAML keeps the last of two equal keys silently (a recipe read max_length 64 where its
    author saw 16 first); a merge's keys may still be overridden."""
    twice = tmp_path / "twice.yaml"
    twice.write_text("task:\n  name: sst2\n  max_length: 16\n  max_length: 64\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=rf"{twice}:4: not valid YAML \(key 'max_length' is given twice"):
        load_recipe(twice)
    merged = tmp_path / "merged.yaml"
    merged.write_text("defaults: &d {name: sst2, max_length: 16}\ntask:\n  <<: *d\n  max_length: 32\n",
                      encoding="utf-8")
    from tinyplm.config.load import _parse_yaml

    assert _parse_yaml(merged, merged.read_text(encoding="utf-8"))["task"] == {"name": "sst2", "max_length": 32}


def test_a_list_as_a_key_is_refused_at_its_line(tmp_path: Path) -> None:
    listed = tmp_path / "listed.yaml"
    listed.write_text("name: x\n? [a, b]\n: 1\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=rf"{listed}:2: not valid YAML"):
        load_recipe(listed)


def test_an_empty_recipe_is_said_to_be_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=rf"{empty}: the recipe is empty"):
        load_recipe(empty)


def test_missing_file_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="recipe file not found"):
        load_recipe(tmp_path / "nope.yaml")
    with pytest.raises(RecipeError, match="mapping"):
        load_recipe(write(tmp_path, "- a\n- b\n"))


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_recipe_gives_defaults(tmp_path: Path, text: str) -> None:
    """An empty file alone is refused (test_an_empty_recipe_is_said_to_be_empty); with overrides it
    is the defaults they change."""
    cfg = load_recipe(write(tmp_path, text), ["name=run"])
    assert cfg == RunConfig()
    assert (cfg.name, cfg.task.name, cfg.task.max_length, cfg.teacher.model) == ("run", "sst2", 128, "minilm-l6")
    assert cfg.students == [] and cfg.measure.rounds == 3 and cfg.cache_dir is None


def test_dump_resolved_round_trips(tmp_path: Path) -> None:
    cfg = load_recipe(write(tmp_path, VALID), ["teacher.finetune.lr=3e-5"])
    text = dump_resolved(cfg)
    assert "warmup_ratio" in text  # defaults are written out
    again = load_recipe(write(tmp_path, text, "resolved.yaml"))
    assert again == cfg
    assert dump_resolved(again) == text


RUN_RECIPES = sorted(p for p in (Path(__file__).parents[2] / "recipes").rglob("*.yaml") if p.parent.name != "pretrain")


@pytest.mark.parametrize("recipe", RUN_RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_recipe_resolved_loads_back(tmp_path: Path, recipe: Path) -> None:
    """``export``, ``bench`` and resume read a run's config.resolved.yaml, where every default is
    written out: options of another arch or method, at their defaults, must not be refused."""
    text = dump_resolved(load_recipe(recipe))
    again = load_recipe(write(tmp_path, text, "resolved.yaml"))
    assert dump_resolved(again) == text


def test_student_name_defaults() -> None:
    shape = ShapeSpec(layers=2, hidden=64, heads=4, ffn=128)
    assert student_name(StudentSpec(name="mine", shape=shape)) == "mine"
    assert student_name(StudentSpec(shape=shape)) == "student-L2-H64"
    assert student_name(StudentSpec(teacher_layers=[0, 2])) == "student-L2-layers-0-2"


def test_shape_rejects_hidden_not_divisible_by_heads() -> None:
    with pytest.raises(ValidationError, match=r"hidden \(30\) must be divisible by heads \(4\)"):
        ShapeSpec(layers=1, hidden=30, heads=4, ffn=8)
    ShapeSpec(layers=1, hidden=32, heads=4, ffn=8)  # divisible: accepted


def test_shape_error_in_recipe_names_student(tmp_path: Path) -> None:
    path = write(tmp_path, replace_line(VALID, 9, "    shape: {layers: 2, hidden: 66, heads: 4, ffn: 128}"))
    with pytest.raises(RecipeError, match=r":9: students\[0\]\.shape: hidden \(66\) must be divisible"):
        load_recipe(path)


def test_student_needs_shape_or_layers() -> None:
    with pytest.raises(ValidationError, match="give a student 'shape', 'teacher_layers' or 'init_from'"):
        StudentSpec(name="x")
    with pytest.raises(ValidationError, match="'teacher_layers' or 'init_from'"):
        StudentSpec(teacher_layers=[])


def test_student_layers_must_match_shape() -> None:
    with pytest.raises(ValidationError, match="teacher_layers lists 2 layers but shape.layers is 3"):
        StudentSpec(shape=ShapeSpec(layers=3, hidden=32, heads=4, ffn=8), teacher_layers=[0, 1])


def test_duplicate_student_names_rejected() -> None:
    raw = {"students": [{"name": "a", "teacher_layers": [0]}, {"name": "a", "teacher_layers": [1]}]}
    with pytest.raises(RecipeError, match=r"student names must be unique; repeated: \['a'\]"):
        validate_recipe(raw)
    shape = {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128}
    same_default = {"students": [{"shape": shape}, {"shape": shape, "train": {"lr": 1e-4}}]}
    with pytest.raises(RecipeError, match="student-L2-H64"):
        validate_recipe(same_default)


def test_student_named_teacher_rejected() -> None:
    with pytest.raises(RecipeError, match="cannot be named 'teacher'"):
        validate_recipe({"students": [{"name": "teacher", "teacher_layers": [0]}]})


def test_objective_with_both_weights_zero_rejected() -> None:
    with pytest.raises(ValidationError, match="every loss weight is 0"):
        ObjectiveSpec(kd_weight=0, hard_weight=0)
    assert ObjectiveSpec(kd_weight=0, hard_weight=1).hard_weight == 1


def test_keep_start_needs_a_vector_term_and_a_share_below_one() -> None:
    with pytest.raises(ValidationError, match="keep_start = 0.5 blends the targets"):
        ObjectiveSpec(kd_weight=1.0, keep_start=0.5)
    with pytest.raises(ValidationError, match="keep_start"):
        ObjectiveSpec(kd_weight=0, similarity_kd=1.0, keep_start=1.0)
    assert ObjectiveSpec(kd_weight=0, similarity_kd=1.0, keep_start=0.5).keep_start == 0.5


def test_misspelled_required_key_is_named_as_unknown(tmp_path: Path) -> None:
    path = write(tmp_path, replace_line(VALID, 9, "    shape: {layrs: 2, hidden: 64, heads: 4, ffn: 128}"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:9: unknown key 'students[0].shape.layrs'"), msg
    assert "did you mean 'layers'?" in msg


def test_word2vec_neighbours_need_text_to_train_on() -> None:
    from tinyplm.config.schema import RunConfig

    student = {"name": "s", "shape": {"layers": 1, "hidden": 16, "heads": 2, "ffn": 32},
               "stages": [{"data": "augmented", "objective": {"kd_weight": 1}}]}
    augment = {"mlm": "some/dir", "neighbours_from": "word2vec"}
    with pytest.raises(ValidationError, match="word2vec_corpus"):
        RunConfig.model_validate({"students": [student], "augment": augment})
    ok = RunConfig.model_validate({"students": [student], "augment": {**augment, "word2vec_corpus": ["texts/"]}})
    assert ok.augment.neighbours_from == "word2vec"
    RunConfig.model_validate({"students": [student], "augment": augment, "corpus": {"paths": ["texts/"]}})


def test_task_labels_given_as_integers_are_read_as_the_file_writes_them() -> None:
    task = validate_recipe({"task": {"name": "custom", "labels": [0, 1], "train_file": "a.csv",
                                     "dev_file": "b.csv"}}).task
    assert task.labels == ["0", "1"]
    with pytest.raises(RecipeError, match=r"task.labels\[0\]: Input should be a valid string"):
        validate_recipe({"task": {"name": "custom", "labels": [0.5, 1], "train_file": "a.csv", "dev_file": "b.csv"}})


def test_labels_beside_regression_are_refused() -> None:
    with pytest.raises(RecipeError, match="labels name classes, and regression: true reads a score"):
        validate_recipe({"task": {"name": "custom", "labels": ["a", "b"], "regression": True, "train_file": "a.csv",
                                  "dev_file": "b.csv"}})
