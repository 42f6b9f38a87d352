"""task.holdout: training examples held out of training choose each stage's kept checkpoint and the
final model; dev is only measured and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.schema import TaskSpec
from tinyplm.errors import RecipeError
from tinyplm.run import run
from tinyplm.tasks import load_task
from tinyplm.tasks.holdout import HOLDOUT, selection_evals, selection_metric


def test_held_out_examples_leave_training_and_become_the_split_that_chooses(tmp_path: Path) -> None:
    glue = make_tiny_glue(tmp_path / "glue", n_train=100, n_dev=20)
    whole = load_task(TaskSpec(name="sst2", data_dir=str(glue)))
    data = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=30, holdout_seed=5))
    held = data.evals[HOLDOUT].examples
    assert len(held) == 30 and len(data.train) == 70 and list(data.evals) == ["dev", HOLDOUT]
    assert sorted(held + data.train.examples, key=lambda e: e.line) == whole.train.examples
    assert not {e.line for e in held} & {e.line for e in data.train.examples}
    kept_lines = [e.line for e in data.train.examples]
    assert kept_lines == sorted(kept_lines)  # training keeps the file's order
    again = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=30, holdout_seed=5))
    other = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=30, holdout_seed=6))
    assert again.evals[HOLDOUT].examples == held != other.evals[HOLDOUT].examples
    assert data.evals["dev"].examples == whole.evals["dev"].examples
    assert selection_metric(data) == "accuracy_holdout" and selection_metric(whole) == "accuracy"
    assert list(selection_evals(data, {"dev": 1, HOLDOUT: 2})) == [HOLDOUT]
    assert list(selection_evals(whole, {"dev": 1})) == ["dev"]  # without held-out examples: dev, as before


def test_a_minimum_length_draws_only_long_examples_and_zero_draws_as_before(tmp_path: Path) -> None:
    from tinyplm.tasks.holdout import words

    glue = make_tiny_glue(tmp_path / "glue", n_train=100, n_dev=20)
    whole = load_task(TaskSpec(name="sst2", data_dir=str(glue)))
    lengths = [words(e) for e in whole.train.examples]
    floor = min(v for v in set(lengths) if sum(n >= v for n in lengths) < 50)  # under the half a draw may take
    long_enough = [e for e in whole.train.examples if words(e) >= floor]
    assert 11 <= len(long_enough) < 50
    data = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=10, holdout_seed=3, holdout_min_words=floor))
    held = data.evals[HOLDOUT].examples
    assert len(held) == 10 and all(words(e) >= floor for e in held) and len(data.train) == 90
    assert not {e.line for e in held} & {e.line for e in data.train.examples}
    assert f"among those of {floor}+ words" in data.info["holdout"]
    plain = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=10, holdout_seed=3))
    zero = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=10, holdout_seed=3, holdout_min_words=0))
    assert zero.evals[HOLDOUT].examples == plain.evals[HOLDOUT].examples  # the draw made before the option
    with pytest.raises(RecipeError, match=rf"task.holdout_min_words: only {len(long_enough)} of sst2's training "
                                          rf"examples .*have {floor} words or more, fewer than task.holdout 50"):
        load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=50, holdout_min_words=floor))
    with pytest.raises(ValueError, match="holdout_min_words 5 shapes a held-out draw, but task.holdout is not set"):
        TaskSpec(name="sst2", holdout_min_words=5)


def test_holding_out_more_than_half_names_the_key_and_the_most_allowed(tmp_path: Path) -> None:
    glue = make_tiny_glue(tmp_path / "glue", n_train=40, n_dev=10)
    with pytest.raises(RecipeError, match=r"task.holdout: 21 .* 40 training examples .*at most 20"):
        load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=21))


@pytest.mark.slow
def test_a_run_chooses_on_the_held_out_examples_and_reports_dev(tmp_path: Path) -> None:
    glue = make_tiny_glue(tmp_path / "glue", n_train=96, n_dev=24)
    train = {**TINY_TRAIN, "max_steps": 6, "eval_every": 2}
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "tiny-bert"), glue,
                         students=[{"name": "small", "teacher_layers": [1], "train": train}],
                         teacher={"model": str(tmp_path / "tiny-bert"), "finetune": train})
    recipe["task"]["holdout"] = 32
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    record = run(cfg)
    root = Path(cfg.output_dir)
    evals = [json.loads(line) for line in (root / "logs" / "train.jsonl").read_text().splitlines()
             if '"event": "eval"' in line]
    assert {e["stage"] for e in evals} == {"teacher", "small"}
    assert all(set(e["metrics"]) == {"accuracy_holdout"} for e in evals)  # dev is not looked at in training
    for stage in record.stages:  # every stage measured on both: dev reported, held-out chosen on
        assert {"accuracy", "accuracy_holdout"} <= set(stage.metrics)
    results = json.loads((root / "results.json").read_text())
    assert results["info"]["selection_metric"] == "accuracy_holdout" and results["info"]["holdout"] == 32
    assert "on 32 held-out training examples" in results["info"]["final_rule"]
    small = record.stage("small")
    assert small.info.training[0].examples == 64  # 96 - 32 held out
    history = small.info.training[0].history
    kept = next(h for h in history if h["step"] == small.info.training[0].best_step)
    assert kept["accuracy_holdout"] == max(h["accuracy_holdout"] for h in history)
