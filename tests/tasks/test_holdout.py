"""task.holdout: training examples held out of training choose each stage's kept checkpoint and the
final model; dev is only measured and reported."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.schema import TaskSpec
from tinyplm.errors import RecipeError
from tinyplm.run import run
from tinyplm.tasks import load_task
from tinyplm.tasks.base import Example
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


def test_dropping_parts_leaves_out_the_phrases_of_held_out_sentences_and_draws_the_same(tmp_path: Path) -> None:
    """SST-2's training set holds its sentences' phrases as examples of their own: with
    holdout_drop_parts, no training example is a run of a held-out example's words."""
    from tinyplm.tasks.holdout import hold_out, parts_of

    sentences = [f"the {a} film is {b} and {c}" for a, b, c in
                 zip(["odd", "new", "long", "slow", "bright", "dark"], ["fun", "dull", "warm", "cold", "wise", "flat"],
                     ["short", "loud", "kind", "sad", "true", "vain"], strict=True)]
    rows = [(s, i % 2) for i, s in enumerate(sentences)]
    rows += [(" ".join(s.split()[1:4]).upper(), 0) for s in sentences]  # a phrase of each, cased otherwise
    rows += [("film", 1), ("and", 0), ("fun and short", 1), ("film is", 0), ("short and fun", 1)]
    folder = tmp_path / "glue" / "SST-2"
    folder.mkdir(parents=True)
    dev = "sentence\tlabel\nok\t1\n"
    (folder / "dev.tsv").write_text(dev, encoding="utf-8")
    (folder / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
    spec = {"name": "sst2", "data_dir": str(tmp_path / "glue"), "holdout": 2, "holdout_seed": 1,
            "holdout_min_words": 7}
    plain = load_task(TaskSpec(**spec))
    data = load_task(TaskSpec(**spec, holdout_drop_parts=True))
    held = data.evals[HOLDOUT].examples
    assert held == plain.evals[HOLDOUT].examples and all(e.text in sentences for e in held)  # the same draw
    words = [tuple(e.text.lower().split()) for e in held]

    def inside(text: str) -> bool:
        w = tuple(text.lower().split())
        return any(h[i:i + len(w)] == w for h in words for i in range(len(h)))

    gone = {e.text for e in plain.train.examples} - {e.text for e in data.train.examples}
    assert gone and all(inside(t) for t in gone)  # "film", "and", "film is" and the held sentences' phrases
    assert not any(inside(e.text) for e in data.train.examples)
    assert ({"short and fun", "film is"} & {e.text for e in data.train.examples}) == {"short and fun"}  # runs, in order
    assert f"({len(gone)} training examples that are parts of them not trained on either)" in data.info["holdout"]
    pairs = [Example("a b c", "d e", 1), Example("a b", "d", 0), Example("a b", "x", 0), Example("b c", None, 1)]
    assert parts_of(pairs[:1], pairs[1:]) == {0}  # a pair is a part where both its texts are runs
    with pytest.raises(RecipeError, match="task.holdout_drop_parts: every training example"):
        hold_out(replace(data, train=replace(data.train, examples=held + [Example("the", None, 0)] * 2)), 2,
                 seed=1, min_words=7, drop_parts=True)
    with pytest.raises(ValueError, match="holdout_drop_parts leaves out .*task.holdout is not set"):
        TaskSpec(name="sst2", holdout_drop_parts=True)


@pytest.mark.parametrize("share, held", [(0.1, 10), (0.25, 25), (0.004, 1), (0.499, 50)])
def test_a_share_holds_out_that_part_of_the_training_set(tmp_path: Path, share: float, held: int) -> None:
    glue = make_tiny_glue(tmp_path / "glue", n_train=100, n_dev=20)
    data = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=share, holdout_seed=2))
    assert len(data.evals[HOLDOUT]) == held and len(data.train) == 100 - held
    assert data.info["holdout"].startswith(f"{held} training examples drawn with seed 2")
    count = load_task(TaskSpec(name="sst2", data_dir=str(glue), holdout=held, holdout_seed=2))
    assert count.evals[HOLDOUT].examples == data.evals[HOLDOUT].examples  # a share draws as its count does


@pytest.mark.parametrize("value", [0, -3, 0.5, 0.0, 0.75, 1.5, -0.1, True])
def test_a_holdout_that_is_neither_a_count_nor_a_share_under_half_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=rf"holdout {value!r}: give a count of training examples .*under 0.5"):
        TaskSpec(name="sst2", holdout=value)
    assert TaskSpec(name="sst2", holdout=1000.0).holdout == 1000 and isinstance(TaskSpec(holdout=7.0).holdout, int)


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
