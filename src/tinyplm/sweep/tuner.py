"""Run a sweep on Ray Tune: every trial an ordinary tinyplm run (``sweep.trial``), on this machine's
Ray (started here) or an existing cluster (``address``), then one table across the trials.

Ray is imported here only, when a sweep starts. A trial is a Tune function trainable that runs in
a Ray worker: a worker that dies (killed, out of memory) fails its trial, which Tune retries
``max_failures`` times; the retry's run continues from the checkpoints the dead one left. An
interrupted sweep started again with ``--resume`` runs the same trials (the same keys, the same
run dirs); the finished ones are read back from their run dirs, never run again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyplm.cluster import cluster_cpus, connect
from tinyplm.config import load_recipe
from tinyplm.config.sweep import SweepSpace
from tinyplm.errors import RecipeError, RunDirError
from tinyplm.sweep.space import TrialPlan, search_alg, trial_plan, trial_values, tune_space
from tinyplm.sweep.table import TrialRow, rows_of, write_table
from tinyplm.sweep.trial import TrialResult, run_trial


@dataclass(frozen=True)
class SweepJob:
    """One sweep: the recipe every trial runs, its space, where it goes and how it runs."""

    recipe: Path
    space: SweepSpace
    sweep_dir: Path
    address: str | None = None  # an existing Ray cluster ("auto", "ray://host:10001", "host:6379"); None: local
    max_concurrent: int = 1
    cpus_per_trial: float | None = None  # default: this machine's cores / max_concurrent
    resume: bool = False
    mlflow: str | None = None  # tracking URI (or folder) of the sweep's parent run and its trials; None: off


def sweep_dir_of(space: SweepSpace) -> Path:
    """The sweep's folder."""
    return Path(space.output_dir.replace("{name}", space.name))


def grid_plans(job: SweepJob) -> list[TrialPlan] | None:
    """Every trial of a grid sweep (None for random and Optuna searches, whose trials are known
    as they are drawn)."""
    space = job.space
    if space.search != "grid":
        return None
    return [trial_plan(space, values, str(trials_dir(job))) for values in space.grid_values()]


def _unique(plans: list[TrialPlan]) -> list[TrialPlan]:
    seen: set[str] = set()
    return [p for p in plans if not (p.key in seen or seen.add(p.key))]


#: Where between a drawn key's bounds its fractional probe lies: a share no round bound lands on.
INSIDE = 0.381966


def trials_dir(job: SweepJob) -> Path:
    return (job.sweep_dir / "trials").resolve()


def check_job(job: SweepJob, inputs: bool = True) -> list[TrialPlan] | None:
    """Every input checked before Ray starts or anything is written: the recipe with each grid
    trial's overrides (or, for a drawn search, with each listed value, each bound and a value with
    a fraction between the bounds of a ``uniform``/``loguniform`` key), the data and teacher of each
    distinct task the trials read (``tinyplm.run.preflight``; not with ``inputs`` False), and the sweep
    dir (an existing one only with ``resume``). Raises ``RecipeError``, ``DataError``, ``ModelError``
    or ``RunDirError``."""
    from tinyplm.run import preflight

    plans = grid_plans(job)
    read: set[str] = set()
    for key, overrides in _probe_overrides(job, plans):
        try:
            cfg = load_recipe(job.recipe, overrides)
        except RecipeError as exc:
            if key is not None and "fractional part" in str(exc):
                raise RecipeError(f"sweep {job.space.name}: {key}: uniform and loguniform draw numbers with fractions, "
                                  f"which the recipe does not take there ({exc}); draw integers with randint, or "
                                  "list the values with choice") from None
            raise RecipeError(f"sweep {job.space.name}: a trial's recipe is not valid: {exc}") from None
        task = repr((cfg.task, cfg.teacher.model, cfg.corpus))
        if inputs and task not in read:  # each task's data and teacher, read as a trial would, before Ray starts
            preflight(cfg)
            read.add(task)
    if job.sweep_dir.exists() and any(job.sweep_dir.iterdir()) and not job.resume:
        raise RunDirError(f"{job.sweep_dir}: a sweep is there; --resume continues it (finished trials are read "
                          "back, not run again), or choose another output_dir")
    return plans


def _probe_overrides(job: SweepJob, plans: list[TrialPlan] | None) -> list[tuple[str | None, list[str]]]:
    """(the key drawn with a fraction, or None; the overrides of a trial) of each recipe to check."""
    if plans is not None:
        return [(None, p.overrides) for p in plans]
    space, out = job.space, []
    for key, d in space.params.items():
        values = d.choice or [*(d.uniform or ()), *(d.loguniform or ()), *((d.randint[0], d.randint[1] - 1)
                                                                            if d.randint else ())]
        probes = [(None, v) for v in values]
        bounds = d.uniform or d.loguniform
        if bounds:  # a value with a fraction, as a draw would give, between the bounds
            lo, hi = bounds
            inside = lo + (hi - lo) * INSIDE
            probes.append((key, inside if inside % 1 else lo + 0.5))
        for drawn, v in probes:
            probe = {k: _first(p) for k, p in space.params.items()} | {key: v}
            out.append((drawn, trial_plan(space, probe, str(trials_dir(job))).overrides))
    return out


def _first(d) -> Any:
    return (d.choice or d.grid or [None])[0] if (d.choice or d.grid) else (d.uniform or d.loguniform or d.randint)[0]


def make_trainable(job: SweepJob, parent_run_id: str | None) -> Callable[[dict[str, Any]], None]:
    """The Tune function trainable of this sweep: one trial's run, its result reported once."""
    recipe, space, cwd, out = job.recipe.resolve(), job.space, Path.cwd(), str(trials_dir(job))
    threads = job.cpus_per_trial
    tracking = [f"tracking.mlflow={job.mlflow}"] if job.mlflow else []

    def trainable(config: dict[str, Any]) -> None:
        import torch
        from ray import tune

        os.chdir(cwd)  # Tune starts a trial in its own folder; the recipe's relative paths are the caller's
        if threads:
            torch.set_num_threads(max(1, int(threads)))
        plan = trial_plan(space, trial_values(space, config), out)
        tune.report(run_trial(recipe, space, plan, parent_run_id, tracking).metrics())

    return trainable


def _cpus(job: SweepJob, ray) -> float:
    """CPUs one trial asks Ray for: ``cpus_per_trial``, else the cluster's CPUs shared by the
    concurrent trials."""
    if job.cpus_per_trial:
        return job.cpus_per_trial
    return max(1.0, cluster_cpus(ray) // job.max_concurrent)


def _tuner(job: SweepJob, ray, parent_run_id: str | None):
    from ray import tune

    space, cpus = job.space, _cpus(job, ray)
    trainable = make_trainable(SweepJob(**{**job.__dict__, "cpus_per_trial": cpus}), parent_run_id)
    return tune.Tuner(
        tune.with_resources(trainable, {"cpu": cpus}),
        param_space=tune_space(space),
        tune_config=tune.TuneConfig(
            search_alg=search_alg(space, job.max_concurrent),
            num_samples=1 if space.search == "grid" else space.num_samples,
            max_concurrent_trials=job.max_concurrent if space.search == "optuna" else None,
            time_budget_s=space.budget_minutes * 60 if space.budget_minutes else None,
            trial_dirname_creator=lambda trial: trial.trial_id),
        run_config=tune.RunConfig(name="tune", storage_path=str(job.sweep_dir.resolve()), verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=job.space.max_failures)),
    )


def _outcomes(job: SweepJob, grid) -> tuple[list[TrialPlan], dict[str, TrialResult], dict[str, str]]:
    """The trials Tune ran (in its order), the results of the finished ones, the last error of
    the others."""
    from dataclasses import fields

    names = [f.name for f in fields(TrialResult)]
    optional = ("retention", "speedup")  # None without a teacher: a metric Tune may leave out
    plans, results, errors = [], {}, {}
    for r in grid:
        plan = trial_plan(job.space, trial_values(job.space, r.config), str(trials_dir(job)))
        plans.append(plan)
        if r.error is None and r.metrics and all(n in r.metrics for n in names if n not in optional):
            results[plan.key] = TrialResult(**{n: r.metrics.get(n) for n in names})
        else:
            errors[plan.key] = error_text(r.error)
    return _unique(plans), results, errors


def error_text(error: BaseException | None, limit: int = 400) -> str:
    """What failed a trial, in one line: the message of the error that started it (Ray wraps a
    trial's exception in its own, whose text is the whole remote traceback: its last line is the
    error), not a fragment of the traceback."""
    if error is None:
        return "no result reported"
    for _ in range(8):  # Ray's RayTaskError keeps the trial's exception as .cause
        cause = getattr(error, "cause", None) or error.__cause__
        if not isinstance(cause, BaseException):
            break
        error = cause
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join((lines[-1] if lines else type(error).__name__).split())[:limit]


def run_sweep(job: SweepJob) -> tuple[list[TrialRow], Path]:
    """Check, run every trial on Ray, write the table; returns its rows and ``sweep.json``'s path.
    Raises ``RecipeError``/``RunDirError`` before anything runs, ``ClusterError`` when Ray cannot."""
    planned = check_job(job)
    ray, ours = connect(job.address, "ray.tune", "tinyplm sweep")
    try:
        return _sweep(job, ray, planned)
    finally:
        if ours:
            ray.shutdown()  # this process connected (or started) Ray: let go of it, trials' workers included


def _sweep(job: SweepJob, ray, planned: list[TrialPlan] | None) -> tuple[list[TrialRow], Path]:
    job.sweep_dir.mkdir(parents=True, exist_ok=True)
    parent = _open_parent(job)
    status = "FAILED"
    try:
        info = parent.info.get("mlflow", {}) if parent else {}
        ran, results, errors = _outcomes(job, _tuner(job, ray, info.get("run_id")).fit())
        plans = planned if planned is not None else ran
        rows = rows_of(plans, results, errors, job.space.objectives)
        metric = _metric_of(job, results)
        path = write_table(job.space, rows, job.sweep_dir, metric)
        if parent is not None:
            from tinyplm.track import Artifact

            names = ("sweep.json", "summary.md", "pareto_throughput.png", "pareto_size.png")
            parent.log_files([Artifact(job.sweep_dir / n, n) for n in names])
        status = "FINISHED"
        return rows, path
    finally:
        if parent is not None:
            from tinyplm.track import RunStatus

            parent.close(RunStatus[status])


def _metric_of(job: SweepJob, results: dict[str, TrialResult]) -> str:
    """The primary metric's name, read from a finished trial's run (``primary`` without one)."""
    from tinyplm.report import RunRecord

    for res in results.values():
        path = Path(res.run_dir) / "results.json"
        if path.is_file():
            return RunRecord.load(path).metric
    return "primary"


def _open_parent(job: SweepJob):
    """The sweep's MLflow parent run (its trials are its children), or None when not tracked."""
    if not job.mlflow:
        return None
    from tinyplm.config.tracking import TrackingSpec
    from tinyplm.track import check_available, flatten_params, open_tracker

    spec = TrackingSpec(mlflow=job.mlflow)
    check_available(spec)
    params = flatten_params({"recipe": str(job.recipe), **job.space.model_dump(mode="json")})
    return open_tracker(spec, job.sweep_dir, run_name=job.space.name, params=params, resume=job.resume)

