"""Every shipped recipe validates, opens with its own launch command, and (GLUE) names its task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm.config import load_recipe
from tinyplm.config.pretrain import PretrainRecipe
from tinyplm.tasks import canonical

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted((REPO / "recipes").rglob("*.yaml"))


def is_pretrain(path: Path) -> bool:
    """Recipes under recipes/pretrain/ are pre-training recipes (``tinyplm pretrain``)."""
    return path.parent.name == "pretrain"


def rel(path: Path) -> str:
    """The recipe path relative to the repository root, with forward slashes."""
    return path.relative_to(REPO).as_posix()


def test_recipes_were_found() -> None:
    assert RECIPES, f"no recipes found under {REPO / 'recipes'}"


@pytest.mark.parametrize("path", RECIPES, ids=rel)
def test_recipe_validates(path: Path) -> None:
    cfg = load_recipe(path, schema=PretrainRecipe) if is_pretrain(path) else load_recipe(path)
    assert cfg.name  # a RunConfig (or PretrainRecipe) came back


@pytest.mark.parametrize("path", RECIPES, ids=rel)
def test_recipe_opens_with_its_launch_command(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("#"), f"{rel(path)}: first line should be a comment, got {first!r}"
    command = "pretrain" if is_pretrain(path) else "run"
    assert f"tinyplm {command} {rel(path)}" in first, f"{rel(path)}: first line {first!r} should name its own path"


@pytest.mark.parametrize("path", [p for p in RECIPES if p.parent.name == "glue"], ids=rel)
def test_glue_recipe_task_matches_file_name(path: Path) -> None:
    task = load_recipe(path).task.name
    prefix = path.stem.split("_")[0]
    assert canonical(task) is not None, f"{rel(path)}: task '{task}' is not a GLUE task"
    assert canonical(task) == canonical(prefix), f"{rel(path)}: task '{task}' but file name starts '{prefix}'"
