"""``tinyplm evaluate`` and ``bench`` with ``--task custom``: the command line has no flags for a
custom task's files and columns, so they come from the recipe of the run the model was trained in;
a model in no such run is refused saying how to score it. Before, both said only that
``task.train_file`` and ``task.dev_file`` were needed, keys the commands cannot take."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import make_tiny_model_dir
from helpers_cli import assert_bad_input, cli


def _custom_run(root: Path, dev: str | None = None) -> Path:
    """A finished-looking run of a custom pair task (columns q, a, y; labels no, yes) with its teacher;
    ``dev``: a regression task's dev file instead (scores 1 to 4 in train)."""
    (root / "data").mkdir(parents=True)
    rows = "q,a,y\nthe movie,was good,yes\nthe plot,was bad,no\nthe actor,was fun,yes\nthe film,was dull,no\n"
    if dev is not None:
        rows = rows.replace("yes", "1").replace("no", "4")
    for split in ("train", "dev"):
        (root / "data" / f"{split}.csv").write_text(dev if dev and split == "dev" else rows, encoding="utf-8")
    data = root / "data"
    task = {"name": "custom", "train_file": str(data / "train.csv"), "dev_file": str(data / "dev.csv"),
            "text_column": "q", "text_pair_column": "a", "label_column": "y", "max_length": 16,
            "regression": dev is not None}
    (root / "run").mkdir()
    (root / "run" / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "c", "task": task}), encoding="utf-8")
    return make_tiny_model_dir(root / "run" / "teacher", num_labels=1 if dev is not None else 2)


def test_evaluate_and_bench_read_a_custom_task_from_the_models_run(tmp_path: Path) -> None:
    teacher = _custom_run(tmp_path)
    result = cli(["evaluate", str(teacher), "--task", "custom", "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    said = json.loads(result.stdout)
    assert set(said["metrics"]) == {"accuracy", "f1_macro"} and said["labels"] == ["no", "yes"], said
    bench = cli(["bench", str(teacher), "--task", "custom", "--rounds", "1"], cwd=tmp_path)
    assert bench.returncode == 0, bench.output
    assert "accuracy" in bench.stdout


def test_evaluate_custom_of_a_model_in_no_custom_run_says_how_to_score_it(tmp_path: Path) -> None:
    bare = make_tiny_model_dir(tmp_path / "bare")
    assert_bad_input(cli(["evaluate", str(bare), "--task", "custom"], cwd=tmp_path),
                     "--task custom: a custom task's files and columns are read from the recipe of the run",
                     "no run's config.resolved.yaml is beside it", "tinyplm run")


def test_a_metric_the_dev_labels_leave_undefined_is_said_so_not_printed_as_a_number(tmp_path: Path) -> None:
    """A regression dev file of one score: Pearson is undefined whatever the model predicts, and
    evaluate printed 'pearson: 0.0000' as if the model were uncorrelated."""
    teacher = _custom_run(tmp_path, dev="q,a,y\nthe movie,was good,3\nthe plot,was bad,3\n")
    text = cli(["evaluate", str(teacher), "--task", "custom"], cwd=tmp_path)
    assert text.returncode == 0, text.output
    assert "pearson: undefined on the dev split: every example has the score 3" in text.stdout
    said = json.loads(cli(["evaluate", str(teacher), "--task", "custom", "--json"], cwd=tmp_path).stdout)
    assert said["metrics"]["pearson"] is None and "every example has the score 3" in said["undefined"]["pearson"]


def test_a_run_of_relative_files_is_scored_from_another_folder(tmp_path: Path) -> None:
    """A run started in ``project/`` with ``task.dev_file: data/dev.csv`` was scored by ``evaluate
    --task custom`` only from ``project/``: elsewhere the relative path was read from the current
    folder and not found. The folder the run was started in is its run dir less its output_dir."""
    project = tmp_path / "project"
    teacher = _custom_run(project)
    recipe = project / "run" / "config.resolved.yaml"
    raw = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    raw["output_dir"] = "run"  # as `tinyplm run` in project/ wrote it
    raw["task"].update(train_file="data/train.csv", dev_file="data/dev.csv")
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = cli(["evaluate", str(teacher), "--task", "custom", "--json"], cwd=elsewhere)
    assert result.returncode == 0, result.output
    assert json.loads(result.stdout)["labels"] == ["no", "yes"]
    assert cli(["evaluate", "run/teacher", "--task", "custom", "--json"], cwd=project).returncode == 0
    (project / "data" / "dev.csv").unlink()  # found nowhere: both places named
    assert_bad_input(cli(["evaluate", str(teacher), "--task", "custom"], cwd=elsewhere),
                     "names task.dev_file data/dev.csv, a path relative to the folder the run was started in",
                     f"not found from here ({elsewhere}) nor from {project}, where the run was started")
