"""The sweep's space file, its trials as runs (keys, overrides), the checks before Ray starts, and
the table across trials: no Ray needed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.sweep import Objective, SweepSpace
from tinyplm.errors import RecipeError, RunDirError
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.run_info import RunInfo
from tinyplm.sweep.space import trial_plan
from tinyplm.sweep.table import dominated, rows_of, settings_of, summary_markdown, write_table
from tinyplm.sweep.trial import TrialResult, result_of, trial_stage
from tinyplm.sweep.tuner import SweepJob, check_job, grid_plans

GRID = {"name": "s", "params": {"students.0.train.lr": {"grid": [1e-4, 3e-4]},
                                "students.0.compress": {"grid": [[], [{"kind": "trim_vocab"}]]}}}


def _space(path: Path, body: dict) -> SweepSpace:
    return load_recipe(write_recipe(path, body), schema=SweepSpace)


def test_a_space_file_is_checked_with_the_key_and_what_was_expected(tmp_path: Path) -> None:
    space = _space(tmp_path / "s.yaml", GRID)
    assert space.trial_count() == 4 and space.search == "grid"
    bad = {"name": "s", "params": {"students.0.train.lr": {"grid": [1e-4], "choice": [1e-3]}}}
    with pytest.raises(RecipeError, match="exactly one of grid, choice"):
        _space(tmp_path / "b.yaml", bad)
    with pytest.raises(RecipeError, match=r"s2.yaml:\d+: unknown key 'parms'"):
        _space(tmp_path / "s2.yaml", {"name": "s", "parms": {}})
    with pytest.raises(RecipeError, match="grid takes only grid keys; students.0.train.lr is loguniform"):
        _space(tmp_path / "b.yaml", {"name": "s", "params": {"students.0.train.lr": {"loguniform": [1e-5, 1e-3]}}})
    with pytest.raises(RecipeError, match="low < high"):
        _space(tmp_path / "b.yaml", {"name": "s", "search": "random",
                                    "params": {"students.0.train.lr": {"uniform": [1e-3, 1e-5]}}})
    with pytest.raises(RecipeError, match="the sweep's to choose"):
        _space(tmp_path / "b.yaml", {"name": "s", "params": {"output_dir": {"grid": ["a"]}}})
    with pytest.raises(RecipeError, match="num_samples: a grid runs each combination once"):
        _space(tmp_path / "b.yaml", {**GRID, "num_samples": 2})


def test_a_trial_is_a_run_named_by_its_values(tmp_path: Path) -> None:
    space = _space(tmp_path / "s.yaml", {**GRID, "fixed": {"teacher.finetune.epochs": 1}})
    a = trial_plan(space, {"students.0.compress": [{"kind": "trim_vocab"}], "students.0.train.lr": 1e-4}, "T")
    b = trial_plan(space, {"students.0.train.lr": 1e-4, "students.0.compress": [{"kind": "trim_vocab"}]}, "T")
    assert a.key == b.key and a.key.startswith("t-")  # the values' order does not matter
    assert a.overrides == ["teacher.finetune.epochs=1", "students.0.train.lr=0.0001",
                           "students.0.compress=[{kind: trim_vocab}]", f"name=s-{a.key}", f"output_dir=T/{a.key}"]
    other = trial_plan(space, {"students.0.train.lr": 3e-4, "students.0.compress": [{"kind": "trim_vocab"}]}, "T")
    assert other.key != a.key
    refixed = _space(tmp_path / "s2.yaml", {**GRID, "fixed": {"teacher.finetune.epochs": 2}})
    assert trial_plan(refixed, a.values, "T").key != a.key  # other fixed keys: another run
    assert a.label == "students.0.train.lr=0.0001, students.0.compress=[{kind: trim_vocab}]"
    steps = [{"kind": "prune_ffn", "keep": 0.5, "recover": {"train": {"budget_minutes": 2}}}, {"kind": "trim_vocab"}]
    long = trial_plan(space, {"students.0.train.lr": 1e-4, "students.0.compress": steps}, "T")
    assert long.label.endswith("...") and len(long.label.split(", ", 1)[1]) == len("students.0.compress=") + 48
    assert "budget_minutes: 2" in long.overrides[2]  # the override keeps the whole value
    student = trial_plan(_space(tmp_path / "s3.yaml", {"name": "s", "params": {"students.0": {"grid": [{}]}}}),
                         {"students.0": {"name": "student-ov", "compress": steps}}, "T")
    assert student.label == "students.0=student-ov"


def _tiny_job(tmp_path: Path, space: SweepSpace, **kw) -> SweepJob:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    student = {"name": "st", "teacher_layers": [0], "train": {"epochs": 1}}
    recipe = write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue"),
                                                           students=[student]))
    return SweepJob(recipe, space, tmp_path / "sweep", **kw)


def test_every_trial_recipe_is_checked_before_anything_runs(tmp_path: Path) -> None:
    job = _tiny_job(tmp_path, _space(tmp_path / "s.yaml", GRID))
    plans = check_job(job)
    assert [p.values for p in plans] == [dict(zip(GRID["params"], c, strict=True)) for c in
                                         [(1e-4, []), (1e-4, [{"kind": "trim_vocab"}]), (3e-4, []),
                                          (3e-4, [{"kind": "trim_vocab"}])]]
    bad = {"name": "s", "params": {"students.0.train.lr": {"grid": [1e-4, -1.0]}}}
    with pytest.raises(RecipeError, match="a trial's recipe is not valid: override 'students.0.train.lr=-1.0'"):
        check_job(_tiny_job(tmp_path, _space(tmp_path / "b.yaml", bad)))
    drawn = {"name": "s", "search": "random", "num_samples": 3,
             "params": {"students.0.train.lr": {"loguniform": [1e-5, 1e-3]},
                        "students.0.train.batch_size": {"choice": [8, 0]}}}
    with pytest.raises(RecipeError, match="students.0.train.batch_size=0"):
        check_job(_tiny_job(tmp_path, _space(tmp_path / "d.yaml", drawn)))
    lone = {**drawn, "params": {"students.0.train.lr": {"loguniform": [1e-5, 1e-3]}}}
    assert len(grid_plans(_tiny_job(tmp_path, _space(tmp_path / "d.yaml", lone)))) == 3  # drawn here, seeded
    assert grid_plans(_tiny_job(tmp_path, _space(tmp_path / "o.yaml", {**lone, "search": "optuna"}))) is None
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    with pytest.raises(RunDirError, match="--resume continues it"):
        check_job(job)
    assert check_job(SweepJob(job.recipe, job.space, job.sweep_dir, resume=True))


def test_a_drawn_fraction_for_an_integer_key_and_missing_data_are_refused_before_ray(tmp_path: Path) -> None:
    """uniform over batch_size: its bounds are whole numbers and pass, its draws are not; a trial
    recipe whose data file is gone: each trial would fail inside Ray. Both refused by check_job."""
    from tinyplm.errors import DataError

    drawn = {"name": "s", "search": "random", "num_samples": 2,
             "params": {"students.0.train.batch_size": {"uniform": [4, 16]}}}
    job = _tiny_job(tmp_path, _space(tmp_path / "d.yaml", drawn))
    with pytest.raises(RecipeError, match=r"students.0.train.batch_size: uniform and loguniform draw numbers with "
                                          r"fractions.*randint"):
        check_job(job)
    ok = {**drawn, "params": {"students.0.train.batch_size": {"randint": [4, 16]}}}
    drawn_plans = check_job(SweepJob(job.recipe, _space(tmp_path / "ok.yaml", ok), job.sweep_dir))
    assert 1 <= len(drawn_plans) <= 2 and all(4 <= p.values["students.0.train.batch_size"] < 16 for p in drawn_plans)
    dev = tmp_path / "glue" / "SST-2" / "dev.tsv"
    dev.unlink()
    with pytest.raises(DataError, match=rf"{dev}: file not found"):
        check_job(SweepJob(job.recipe, _space(tmp_path / "ok.yaml", ok), job.sweep_dir))
    assert not job.sweep_dir.exists()


def _result(key: str, primary: float, throughput: float, size: int) -> TrialResult:
    return TrialResult(key, "st", primary, throughput, 1.0, size, 10, primary / 0.9, f"/r/{key}", throughput / 100)


def test_the_front_and_the_table_keep_every_planned_trial(tmp_path: Path) -> None:
    space = _space(tmp_path / "s.yaml", GRID)
    plans = grid_plans(SweepJob(tmp_path / "r.yaml", space, tmp_path / "sw"))
    objectives = [Objective(metric="primary", mode="max"), Objective(metric="throughput", mode="max")]
    fast, accurate, worse = _result("a", 0.80, 900.0, 5), _result("b", 0.88, 300.0, 9), _result("c", 0.79, 800.0, 5)
    assert dominated(worse, fast, objectives) and not dominated(fast, accurate, objectives)
    assert not dominated(fast, fast, objectives)
    results = {plans[0].key: fast, plans[1].key: accurate, plans[2].key: worse}
    rows = rows_of(plans, results, {plans[3].key: "RayActorError: the worker died"}, objectives)
    assert [r.status for r in rows] == ["finished", "finished", "finished", "failed"]
    assert [r.pareto for r in rows] == [True, True, False, False]
    text = summary_markdown(space, rows, "accuracy")
    assert "3 of 4 trials finished; 1 failed; 0 not run." in text and "the worker died" in text
    assert "| x teacher |" in text and "| 9.00x |" in text  # fast: 900 sent/s, its teacher 100
    assert rows_of(plans, {}, {}, objectives)[0].status == "not run"
    path = write_table(space, rows, tmp_path / "sw", "accuracy")
    assert path.name == "sweep.json" and (tmp_path / "sw" / "pareto_throughput.png").stat().st_size > 0
    assert (tmp_path / "sw" / "pareto_size.png").is_file()


def test_repeats_are_averaged_per_setting(tmp_path: Path) -> None:
    body = {"name": "s", "repeats": ["students.0.train.seed"],
            "params": {"students.0.train.lr": {"grid": [1e-4, 3e-4]}, "students.0.train.seed": {"grid": [1, 2, 3]}}}
    space = _space(tmp_path / "s.yaml", body)
    plans = grid_plans(SweepJob(tmp_path / "r.yaml", space, tmp_path / "sw"))
    lr1 = [p for p in plans if p.values["students.0.train.lr"] == 1e-4]
    lr3 = [p for p in plans if p.values["students.0.train.lr"] == 3e-4]
    results = {lr1[0].key: _result("a", 0.80, 100.0, 5), lr1[1].key: _result("b", 0.84, 300.0, 5),
               lr1[2].key: _result("c", 0.82, 200.0, 5), lr3[0].key: _result("d", 0.70, 100.0, 5)}
    objectives = [Objective(metric="primary", mode="max")]
    rows = rows_of(plans, results, {lr3[1].key: "died"}, objectives)
    first, second = settings_of(rows, space.repeats)
    assert (first.label, first.planned, first.finished) == ("students.0.train.lr=0.0001", 3, 3)
    assert math.isclose(first.primary_mean, 0.82) and math.isclose(first.primary_std, 0.02)
    assert math.isclose(first.throughput_mean, 200.0) and math.isclose(first.speedup_mean, 2.0)
    assert (second.finished, second.primary_mean, second.primary_std) == (1, 0.70, 0.0)
    text = summary_markdown(space, rows, "accuracy")
    assert "## By setting, over students.0.train.seed" in text and "| 0.8200 ± 0.0200 |" in text
    assert "| students.0.train.lr=0.0003 | 1 of 3 |" in text
    data = json.loads(write_table(space, rows, tmp_path / "sw", "accuracy").read_text())
    assert [st["finished"] for st in data["settings"]] == [3, 1]
    with pytest.raises(RecipeError, match="repeats: students.0.seed is not one of the params"):
        _space(tmp_path / "bad.yaml", {**body, "repeats": ["students.0.seed"]})


SEEDS = {"name": "s", "repeats": ["seed"],
         "params": {"seed": {"grid": [1, 2, 3]}, "task.name": {"grid": ["cola", "sst2", "mrpc"]}}}


def test_exclude_leaves_combinations_out_of_a_grid_in_its_order(tmp_path: Path) -> None:
    """Seeds repeated on the small tasks only: the big task's other seeds are not planned; the
    trials run with the first key slowest (seed 1 of every task first)."""
    body = {**SEEDS, "exclude": [{"task.name": "sst2", "seed": 2}, {"task.name": "sst2", "seed": 3}]}
    space = _space(tmp_path / "s.yaml", body)
    assert space.trial_count() == 7
    plans = grid_plans(SweepJob(tmp_path / "r.yaml", space, tmp_path / "sw"))
    assert [(p.values["seed"], p.values["task.name"]) for p in plans] == [
        (1, "cola"), (1, "sst2"), (1, "mrpc"), (2, "cola"), (2, "mrpc"), (3, "cola"), (3, "mrpc")]
    full = grid_plans(SweepJob(tmp_path / "r.yaml", _space(tmp_path / "f.yaml", SEEDS), tmp_path / "sw"))
    assert {p.key for p in plans} < {p.key for p in full}  # the same trials keep their keys (and run dirs)
    one_key = _space(tmp_path / "k.yaml", {**SEEDS, "exclude": [{"seed": 3}]})
    assert one_key.trial_count() == 6 and all(v["seed"] != 3 for v in one_key.grid_values())
    for bad, said in (([{"task.name": "qqp"}], r"exclude.0: task.name='qqp' is not one of its grid values"),
                      ([{"lr": 1}], "exclude.0: lr is not one of the params"),
                      ([{}], "exclude.0: empty"),
                      ([{"seed": 1}, {"seed": 2}, {"seed": 3}], "exclude: leaves no trial to run")):
        with pytest.raises(RecipeError, match=said):
            _space(tmp_path / "bad.yaml", {**SEEDS, "exclude": bad})
    with pytest.raises(RecipeError, match="exclude: leaves combinations out of a grid; search is random"):
        _space(tmp_path / "bad.yaml", {"name": "s", "search": "random", "num_samples": 2, "exclude": [{"seed": 1}],
                                       "params": {"seed": {"choice": [1, 2]}}})


def test_tune_runs_a_grid_by_the_index_of_each_planned_trial(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the cluster extra (ray[tune]) is not installed")
    from tinyplm.sweep.space import GRID_INDEX, planned_values, trial_values, tune_space

    space = _space(tmp_path / "s.yaml", {**SEEDS, "exclude": [{"task.name": "mrpc"}]})
    assert tune_space(space) == {GRID_INDEX: {"grid_search": list(range(6))}}
    assert [trial_values(space, {GRID_INDEX: i}) for i in range(6)] == space.grid_values()
    drawn = _space(tmp_path / "d.yaml", {"name": "d", "search": "random", "num_samples": 2,
                                         "params": {"seed": {"grid": [1, 2]}, "lr": {"choice": [0.1, 0.2]}}})
    planned = planned_values(drawn)  # two rounds, each crossing the grid key with one draw
    assert planned.drawn == 4 and {v["seed"] for v in planned.distinct} == {1, 2}
    assert tune_space(drawn) == {GRID_INDEX: {"grid_search": list(range(len(planned.distinct)))}}
    assert [trial_values(drawn, {GRID_INDEX: i}) for i in range(len(planned.distinct))] == planned.distinct
    assert planned_values(drawn) == planned  # the same draws in every process (seeded)
    optuna = _space(tmp_path / "o.yaml", {"name": "o", "search": "optuna", "num_samples": 2,
                                          "params": {"lr": {"choice": [0.1, 0.2]}}})
    assert set(tune_space(optuna)) == {"lr"} and trial_values(optuna, {"lr": 0.2, "other": 0}) == {"lr": 0.2}
    from tinyplm.sweep.space import tune_samples

    assert (tune_samples(drawn), tune_samples(optuna)) == (1, 2)  # planned trials once; Optuna's proposals


def test_the_stage_that_stands_for_a_trial(tmp_path: Path) -> None:
    record = RunRecord(task="sst2", metric="accuracy", stages=[
        StageRecord("teacher", {"accuracy": 0.9}, disk_bytes=100, throughput_sent_per_s=10.0, kind=StageKind.TEACHER),
        StageRecord("st", {"accuracy": 0.85}, disk_bytes=20, throughput_sent_per_s=50.0),
        StageRecord("st.trim_vocab", {"accuracy": 0.84}, disk_bytes=10, throughput_sent_per_s=55.0)],
        info=RunInfo(final_model="st"))
    assert trial_stage(record, "final").name == "st" and trial_stage(record, "last").name == "st.trim_vocab"
    with pytest.raises(RecipeError, match="names no stage of the trial's run \\(stages: teacher, st, st.trim_vocab\\)"):
        trial_stage(record, "nope")
    space = _space(tmp_path / "s.yaml", GRID)
    plan = grid_plans(SweepJob(tmp_path / "r.yaml", space, tmp_path / "sw"))[0]
    res = result_of(record, plan, "last", tmp_path)
    assert (res.primary, res.throughput, res.disk_bytes) == (0.84, 55.0, 10)
    assert math.isclose(res.retention, 0.84 / 0.9)
    assert math.isclose(res.speedup, 55.0 / 10.0)  # against the teacher timed in the same run


SWEEPS = sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_every_shipped_space_opens_with_its_command_and_its_trials_validate(path: Path) -> None:
    """The first line is the launch command; the space loads; the recipe it names loads with every
    trial's overrides (every grid trial; for a drawn search, each listed value and bound). Their data
    and teachers (earlier runs) are not here: those are read by the sweep itself, before Ray."""
    repo = path.parents[1]
    words = path.read_text(encoding="utf-8").splitlines()[0].split()
    assert words[:3] == ["#", "tinyplm", "sweep"] and words[4:6] == ["--space", f"sweeps/{path.name}"], words
    space = load_recipe(path, schema=SweepSpace)
    plans = check_job(SweepJob(repo / words[3], space, path.parent / "no-such-sweep-dir"), inputs=False)
    assert plans is None or len(plans) == space.trial_count() or space.search == "random"


def test_a_failed_trial_is_said_by_its_error_not_a_traceback_fragment() -> None:
    from tinyplm.errors import DataError
    from tinyplm.sweep.tuner import error_text

    class Wrapped(Exception):  # as Ray wraps a trial's exception: its text the remote traceback
        def __init__(self, cause: BaseException | None, text: str) -> None:
            super().__init__(text)
            self.cause = cause

    trace = 'Traceback (most recent call last):\n  File "x.py", line 3, in f\n    ^^^^\n'
    cause = DataError("/data/train.csv: file not found")
    assert error_text(Wrapped(cause, trace + "DataError: ...")) == "/data/train.csv: file not found"
    assert error_text(Wrapped(None, trace + "tinyplm.errors.DataError: /d: file not found\n")) == (
        "tinyplm.errors.DataError: /d: file not found")
    assert error_text(None) == "no result reported"
