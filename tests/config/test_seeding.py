"""A recipe's one ``seed`` (config/seeding.py): written into every training section and augment,
the held-out draw left alone, absent from the resolved recipe when unset."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.config import dump_resolved, load_recipe
from tinyplm.config.load import validate_recipe
from tinyplm.config.seeding import spread_seed
from tinyplm.errors import RecipeError

RECIPE = {
    "name": "seeded",
    "task": {"name": "mrpc", "holdout": 50, "holdout_seed": 5},
    "teacher": {"model": "minilm-l6", "finetune": {"epochs": 1, "seed": 3}},
    "augment": {"mlm": "runs/minilm-mlm", "copies": 2},
    "students": [
        {"name": "plain", "teacher_layers": [0, 2], "train": {"lr": 1e-4}},
        {"name": "staged", "teacher_layers": [0], "stages": [
            {"name": "one", "data": "augmented", "train": {"epochs": 1}},
            {"name": "two", "objective": {"kd_weight": 1.0}}]},
        {"name": "pruned", "init_from": "plain", "stages": [], "compress": [
            {"kind": "prune_ffn", "keep": 0.5, "recover": {"objective": {"kd_weight": 1.0}}},
            {"kind": "trim_vocab"}]},
    ],
}


def _seeds(cfg) -> list[int]:
    """Every seed the seed key sets, in the recipe's order."""
    seeds = [cfg.teacher.finetune.seed, cfg.augment.seed, cfg.students[0].train.seed]
    seeds += [stage.train.seed for stage in cfg.students[1].stages]
    seeds += [cfg.students[2].compress[0].recover.train.seed]
    return seeds


def _write(tmp_path: Path, recipe: dict) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def test_one_seed_reaches_every_training_section(tmp_path: Path) -> None:
    path = _write(tmp_path, RECIPE)
    before = load_recipe(path)
    assert before.seed is None and _seeds(before) == [3, 42, 42, 42, 42, 42]
    cfg = load_recipe(path, ["seed=7"])
    assert cfg.seed == 7 and _seeds(cfg) == [7] * 6
    assert cfg.task.holdout_seed == 5  # every repeat is judged on the same held-out examples
    assert cfg.students[1].stages[0].train.epochs == 1 and cfg.students[0].train.lr == 1e-4  # the rest is kept


def test_an_unset_seed_leaves_the_resolved_recipe_as_it_was(tmp_path: Path) -> None:
    cfg = load_recipe(_write(tmp_path, RECIPE))
    assert "seed" not in yaml.safe_load(dump_resolved(cfg))
    assert yaml.safe_load(dump_resolved(load_recipe(_write(tmp_path, RECIPE), ["seed=2"])))["seed"] == 2


def test_a_wrong_seed_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="seed"):
        load_recipe(_write(tmp_path, RECIPE), ["seed=two"])


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_the_resolved_recipe_reloads_to_the_same_seeds(seed: int) -> None:
    cfg = validate_recipe({**RECIPE, "seed": seed})
    assert _seeds(cfg) == [seed] * 6
    again = validate_recipe(yaml.safe_load(dump_resolved(cfg)))
    assert again == cfg


@given(st.one_of(st.none(), st.text(max_size=5), st.lists(st.integers(), max_size=2)))
def test_anything_but_a_recipe_with_a_seed_is_left_alone(data) -> None:
    assert spread_seed(data) == data
    assert spread_seed({"name": "x", "seed": None}) == {"name": "x", "seed": None}
