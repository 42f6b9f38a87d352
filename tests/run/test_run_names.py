"""finetune and distill name a run after its --out folder: a folder name a run name cannot be (a
space, an accent) was refused as 'name: String should match pattern', for a name the user never gave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import make_tiny_glue
from helpers_cli import assert_bad_input, cli
from tinyplm.config.changes import folder_run_name
from tinyplm.config.schema import NAME_PATTERN


@pytest.mark.parametrize(("folder", "name"), [
    ("rte-teacher", "rte-teacher"), ("my run ü☃", "my-run"), ("_x y.", "x-y."), ("☃", "run"), ("a  b", "a-b")])
def test_a_folder_name_becomes_a_run_name(folder: str, name: str) -> None:
    assert folder_run_name(folder) == name


@given(st.text(max_size=30))
def test_any_folder_name_becomes_a_name_the_recipe_accepts(folder: str) -> None:
    """'_-x' gave '-x' and '.-a' gave '-a': names the recipe schema refuses."""
    assert re.fullmatch(NAME_PATTERN, folder_run_name(folder))


@pytest.mark.parametrize("command", ["finetune", "distill"])
def test_an_out_folder_with_a_space_is_not_refused_for_its_name(tmp_path: Path, command: str) -> None:
    """The run goes on to its own checks (here: the model dir that is not there)."""
    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=4)
    model = ["--model"] if command == "finetune" else ["--teacher-layers", "0", "--teacher"]
    result = cli([command, "--task", "sst2", *model, tmp_path / "no-model", "--out", tmp_path / "my run ü",
                  "--data-dir", glue], cwd=tmp_path)
    assert "name:" not in result.stderr
    assert_bad_input(result, "no-model")
