"""What a sweep refuses before Ray starts (a resume over another recipe's trials, a grid value given
twice, a stage no trial has, a student value a trial's teacher cannot take, too many CPUs per trial,
a tracking store that does not answer, a space file that is not one) and what it keeps (a table
with finished trials, the cause of a trial's error): no Ray needed (a stand-in where one is asked)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import cli
from tinyplm.cluster import ClusterError
from tinyplm.config import load_recipe
from tinyplm.config.load import dump_resolved
from tinyplm.config.sweep import SweepSpace, load_space
from tinyplm.errors import RecipeError, RunDirError, TinyplmError
from tinyplm.files import RESOLVED
from tinyplm.sweep.job import SweepJob, trials_dir
from tinyplm.sweep.space import planned_values
from tinyplm.sweep.table import LATEST, TrialRow, rows_of, summary_markdown, write_table
from tinyplm.sweep.trial import TrialResult
from tinyplm.sweep.tuner import check_job

SEEDS = {"name": "s1", "stage": "last", "params": {"students.0.train.seed": {"grid": [1, 2]}}}


def _space(path: Path, body: dict) -> SweepSpace:
    return load_recipe(write_recipe(path, body), schema=SweepSpace)


def _recipe(tmp_path: Path, **student) -> Path:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    spec = {"name": "st", "teacher_layers": [0], "train": {"epochs": 1}, **student}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8), students=[spec])
    recipe["teacher"]["finetune"] = None
    return write_recipe(tmp_path / "r.yaml", recipe)


def _job(tmp_path: Path, body: dict = SEEDS, **kw) -> SweepJob:
    space_file = write_recipe(tmp_path / "space.yaml", body)
    recipe = kw.pop("recipe", None) or _recipe(tmp_path)
    return SweepJob(recipe, load_space(space_file), tmp_path / "sweep", space_file=space_file, **kw)


def test_resume_refuses_trials_of_another_recipe_before_ray(tmp_path: Path) -> None:
    """A trial dir holding the run of the recipe as it was (measure.rounds changed since): every
    trial would fail on Ray and the table be rewritten as failed; refused naming trial and key."""
    job = _job(tmp_path)
    plans = check_job(job)
    first = trials_dir(job) / plans[0].key
    first.mkdir(parents=True)
    before = load_recipe(job.recipe, [*plans[0].overrides, "measure.rounds=7"])
    (first / RESOLVED).write_text(dump_resolved(before), encoding="utf-8")
    resumed = SweepJob(**{**job.__dict__, "resume": True})
    with pytest.raises(RunDirError, match=rf"{first}: trial {plans[0].key} .*ran another recipe.*measure.rounds: "
                                          r"7 -> .*new output_dir in .*space.yaml"):
        check_job(resumed)
    (first / RESOLVED).write_text(dump_resolved(load_recipe(job.recipe, plans[0].overrides)), encoding="utf-8")
    assert check_job(resumed) == plans  # the same recipe: resumed


def _result(key: str) -> TrialResult:
    return TrialResult(key, "st", 0.8, 100.0, 1.0, 10, 10, 0.9, f"/r/{key}", 1.0)


def test_a_table_with_finished_trials_is_never_replaced_by_one_with_fewer(tmp_path: Path) -> None:
    job = _job(tmp_path)
    plans = check_job(job, inputs=False)
    done = rows_of(plans, {p.key: _result(p.key) for p in plans}, {}, job.space.objectives)
    path = write_table(job.space, done, tmp_path / "sweep", "accuracy")
    kept = path.read_text()
    failed = rows_of(plans, {}, {p.key: "RunDirError: another recipe" for p in plans}, job.space.objectives)
    again = write_table(job.space, failed, tmp_path / "sweep", "accuracy")
    assert path.read_text() == kept and "2 of 2 trials finished" in (path.parent / "summary.md").read_text()
    assert again == tmp_path / "sweep" / LATEST / "sweep.json"
    assert "0 of 2 trials finished; 2 failed" in (again.parent / "summary.md").read_text()
    assert write_table(job.space, done, tmp_path / "sweep", "accuracy") == path  # as many finished: replaced


def test_a_grid_value_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    body = {"name": "s1", "params": {"students.0.train.lr": {"grid": [1e-4]},
                                     "students.0.train.seed": {"grid": [1, 1]}}}
    with pytest.raises(RecipeError, match=r"s.yaml:6: params.students.0.train.seed: grid: the value 1 is given twice"):
        _space(tmp_path / "s.yaml", body)


def test_repeated_draws_of_a_random_search_run_once_and_the_table_says_so(tmp_path: Path) -> None:
    from tinyplm.sweep.tuner import repeats_note

    body = {"name": "r", "search": "random", "num_samples": 4, "params": {"students.0.train.seed": {"choice": [1, 2]}}}
    job = _job(tmp_path, body)
    planned = planned_values(job.space)
    assert planned.drawn == 4 and sorted(v["students.0.train.seed"] for v in planned.distinct) == [1, 2]
    plans = check_job(job, inputs=False)
    assert len({p.key for p in plans}) == len(plans) == 2  # two run dirs, each claimed by one Tune trial
    note = repeats_note(job, 2, 2)
    assert note == "4 draws gave 2 distinct trials: 2 repeated the values of an earlier trial, which ran once"
    rows = rows_of(plans, {p.key: _result(p.key) for p in plans}, {}, job.space.objectives)
    assert f"2 of 2 trials finished; 0 failed; 0 not run.\n{note}." in summary_markdown(job.space, rows, "acc", note)
    assert repeats_note(_job(tmp_path, SEEDS), 2, 2) is None
    from tinyplm.sweep.space import tune_samples, tune_space

    # Tune runs the planned trials once: its num_samples would repeat the grid of indices that often
    assert tune_samples(job.space) == 1 and tune_space(job.space)["trial"] == {"grid_search": [0, 1]}


def test_each_distinct_trial_is_checked_as_run_checks_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second trial's teacher_layers name a layer the 2-layer teacher lacks: refused before Ray
    (the data and teacher read once), not on Ray after the first trial ran."""
    body = {"name": "s1", "params": {"students.0.teacher_layers": {"grid": [[0], [0, 5]]}}}
    from importlib import import_module

    job, read = _job(tmp_path, body), []
    module = import_module("tinyplm.run.preflight")
    original = module.load_task
    monkeypatch.setattr(module, "load_task", lambda *a, **k: read.append(a) or original(*a, **k))
    with pytest.raises(TinyplmError, match=r"student st: teacher_layers \[5\] out of range: the teacher has layers "
                                           r"0..1"):
        check_job(job)
    assert len(read) == 1  # the task read once for both trials


def test_a_stage_no_trial_reports_is_refused_before_ray(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"space.yaml: stage: 'studnet' names no stage of the trials' runs.*"
                                          r"expected final, last or one of: teacher, st, st.trim_vocab"):
        check_job(_job(tmp_path, {**SEEDS, "stage": "studnet", "fixed": {
            "students.0.compress": [{"kind": "trim_vocab"}]}}), inputs=False)
    assert check_job(_job(tmp_path, {**SEEDS, "stage": "st"}), inputs=False)


class _Ray:
    """Stand-in for a connected ``ray`` with one node of ``cpus``."""

    def __init__(self, cpus: float) -> None:
        self.cpus, self.shut = cpus, False

    def cluster_resources(self) -> dict:
        return {"CPU": self.cpus}

    def nodes(self) -> list[dict]:
        return [{"Alive": True, "Resources": {"CPU": self.cpus}}]

    def shutdown(self) -> None:
        self.shut = True


def test_more_cpus_per_trial_than_the_cluster_has_is_refused_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyplm.sweep import tuner

    ray = _Ray(2.0)
    monkeypatch.setattr(tuner, "connect", lambda *a: (ray, True))
    job = _job(tmp_path, cpus_per_trial=8.0)
    with pytest.raises(ClusterError, match=r"--cpus-per-trial 8: the Ray started on this machine has 2 CPUs.*"
                                           r"at most 2"):
        tuner.run_sweep(job)
    assert ray.shut and not job.sweep_dir.exists()
    assert tuner._cpus(SweepJob(**{**job.__dict__, "cpus_per_trial": None, "max_concurrent": 2}), ray) == 1.0
    (job.sweep_dir / "tune").mkdir(parents=True)  # Tune's state of an attempt that ran no trial
    assert check_job(job, inputs=False)  # is no sweep to --resume


def test_a_tracking_store_that_does_not_answer_is_refused_before_ray_in_seconds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from tinyplm.sweep import tuner
    from tinyplm.track import TrackingError

    monkeypatch.setattr(tuner, "connect", lambda *a: pytest.fail("Ray was started"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    job = _job(tmp_path, mlflow="http://127.0.0.1:1")
    started = time.monotonic()
    with pytest.raises(TrackingError, match=r"--track: MLFLOW_TRACKING_URI names the store: nothing answers at "
                                            r"http://127.0.0.1:1"):
        tuner.run_sweep(job)
    assert time.monotonic() - started < 30 and not job.sweep_dir.exists()
    (tmp_path / "afile").write_text("x")
    bad = (tmp_path / "afile" / "mlruns").as_uri()
    with pytest.raises(TrackingError, match=rf"^--track: cannot open {bad}"):
        tuner.run_sweep(SweepJob(**{**job.__dict__, "mlflow": bad}))


def test_space_files_are_named_as_space_files(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"--space .*nope.yaml: space file not found"):
        load_space(tmp_path / "nope.yaml")
    (tmp_path / "adir").mkdir()
    with pytest.raises(RecipeError, match=r"--space .*adir: is a folder, not a space file"):
        load_space(tmp_path / "adir")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    with pytest.raises(RecipeError, match="the space file is empty; a space file names at least its name and params"):
        load_space(tmp_path / "empty.yaml")
    recipe = _recipe(tmp_path)
    with pytest.raises(RecipeError, match=r"r.yaml: is a run recipe .* not a space file; the command is: tinyplm "
                                          r"sweep RECIPE --space SPACE"):
        load_space(recipe)
    typo = write_recipe(tmp_path / "t.yaml", {"name": "s1", "params": {"students.0.train.seed": {"grid": [1, 2],
                                                                                                "gird": 3}}})
    with pytest.raises(RecipeError, match=r"t.yaml:7: unknown key 'params.students.0.train.seed.gird'; did you mean "
                                          r"'grid'\? Valid keys here: grid, choice, uniform, loguniform, randint"):
        load_space(typo)
    space = write_recipe(tmp_path / "space.yaml", SEEDS)
    swapped = cli(["sweep", space, "--space", recipe], cwd=tmp_path)
    assert swapped.returncode == 2 and "space.yaml: is a space file (it has params), not a run recipe" in swapped.stderr


def test_the_table_keeps_the_cause_of_a_trial_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from tinyplm.cli import sweep as cli_sweep

    console = Console(record=True, width=400)
    monkeypatch.setattr(cli_sweep, "out", console)
    cause = "RunDirError: /runs/s1/trials/t-1/config.resolved.yaml: a finished run of another recipe is in " + "x" * 200
    cli_sweep.print_sweep([TrialRow("t-1", "seed=1", {}, "failed", error=cause)], Path("sweep.json"))
    assert "failed: RunDirError: /runs/s1/trials/t-1/config.resolved.yaml" in console.export_text()


def test_ctrl_c_says_how_to_continue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tinyplm.sweep as sweep_pkg

    def interrupted(job):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_pkg, "run_sweep", interrupted)
    space = write_recipe(tmp_path / "space.yaml", SEEDS)
    done = cli(["sweep", _recipe(tmp_path), "--space", space], cwd=tmp_path)
    assert done.returncode == 130, done.stderr
    assert "interrupted; continue with `tinyplm sweep" in done.stderr and "--resume`" in done.stderr
    assert "Tuner.restore" not in done.stderr


def test_a_finished_sweep_resumed_is_read_back_without_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--resume`` of a sweep whose trials all finished started Ray and a worker per trial only to
    read their runs back (most of the time of the cluster sweep test); now no Ray is reached, and a
    trial left unfinished still goes to Ray."""
    from tinyplm.sweep import tuner
    from tinyplm.sweep.trial import run_trial

    job = SweepJob(**{**_job(tmp_path).__dict__, "resume": True})
    plans = check_job(SweepJob(**{**job.__dict__, "resume": False}))
    ran = {p.key: run_trial(job.recipe.resolve(), job.space, p) for p in plans}  # what the trials' workers do

    def no_ray(*args):
        raise ClusterError("Ray was reached")

    monkeypatch.setattr(tuner, "connect", no_ray)
    rows, path = tuner.run_sweep(job)
    assert path == job.sweep_dir / "sweep.json" and path.is_file()
    assert [(r.key, r.status) for r in rows] == [(p.key, "finished") for p in plans]
    assert {r.key: r.result for r in rows} == ran  # read back as the trials reported them
    (trials_dir(job) / plans[1].key / "results.json").unlink()
    with pytest.raises(ClusterError, match="Ray was reached"):  # an unfinished trial runs on Ray
        tuner.run_sweep(job)


def test_a_misspelt_param_key_is_named_at_its_line_of_the_space_file(tmp_path: Path) -> None:
    """A space whose param key is misspelt was refused naming only the override it made
    ('task.nmae=cola'), not the space file's line where the user wrote it."""
    space = {"name": "s1", "stage": "last", "params": {"students.0.train.seed": {"grid": [1, 2]},
                                                      "task.nmae": {"grid": ["sst2"]}}}
    job = _job(tmp_path, space)
    with pytest.raises(RecipeError, match=re.escape(f"{tmp_path / 'space.yaml'}:") + r"\d+: params.task.nmae: "
                       r"a trial's recipe is not valid: override 'task.nmae=sst2': unknown key") as info:
        check_job(job, inputs=False)
    line = int(str(info.value).split(":")[1])
    assert (tmp_path / "space.yaml").read_text().splitlines()[line - 1].strip().startswith("task.nmae")
