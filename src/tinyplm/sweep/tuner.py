"""Run a sweep on Ray Tune: every trial an ordinary tinyplm run (``sweep.trial``), on this machine's
Ray (started here) or an existing cluster (``address``), then one table across the trials.

Ray is imported here only, when a sweep starts. A trial is a Tune function trainable that runs in
a Ray worker: a worker that dies (killed, out of memory) fails its trial, which Tune retries
``max_failures`` times; the retry's run continues from the checkpoints the dead one left. An
interrupted sweep started again with ``--resume`` runs the same trials (the same keys, the same
run dirs); the finished ones are read back from their run dirs, never run again, and when every
trial is finished the table is made from their runs without starting or reaching Ray.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyplm.cluster import ClusterError, cluster_cpus, connect, node_cpus
from tinyplm.sweep.checks import check_job
from tinyplm.sweep.job import SweepJob, grid_plans, sweep_dir_of, trials_dir
from tinyplm.sweep.space import (
    TrialPlan,
    planned_values,
    search_alg,
    trial_plan,
    trial_values,
    tune_samples,
    tune_space,
)
from tinyplm.sweep.table import TrialRow, rows_of, write_table
from tinyplm.sweep.trial import TrialResult, read_back, run_trial

__all__ = ["ClusterError", "SweepJob", "check_job", "grid_plans", "run_sweep", "sweep_dir_of", "trials_dir"]

log = logging.getLogger(__name__)


def _unique(plans: list[TrialPlan]) -> list[TrialPlan]:
    seen: set[str] = set()
    return [p for p in plans if not (p.key in seen or seen.add(p.key))]


def make_trainable(job: SweepJob, parent_run_id: str | None) -> Callable[[dict[str, Any]], None]:
    """The Tune function trainable of this sweep: one trial's run, its result reported once."""
    recipe, space, cwd, out = job.recipe.resolve(), job.space, Path.cwd(), str(trials_dir(job))
    threads, tracking = job.cpus_per_trial, trial_tracking(job)

    def trainable(config: dict[str, Any]) -> None:
        import torch
        from ray import tune

        os.chdir(cwd)  # Tune starts a trial in its own folder; the recipe's relative paths are the caller's
        if threads:
            torch.set_num_threads(max(1, int(threads)))
        plan = trial_plan(space, trial_values(space, config), out)
        tune.report(run_trial(recipe, space, plan, parent_run_id, tracking).metrics())

    return trainable


def trial_tracking(job: SweepJob) -> list[str]:
    """The overrides that track each trial's run in the sweep's MLflow store (none when untracked)."""
    return [f"tracking.mlflow={job.mlflow}"] if job.mlflow else []


def _cpus(job: SweepJob, ray) -> float:
    """CPUs one trial asks Ray for: ``cpus_per_trial``, else the cluster's CPUs shared by the
    concurrent trials (at most a node's: a trial runs on one). Raises ``ClusterError`` when
    ``cpus_per_trial`` is more than any node of a Ray started here has (no trial could start);
    on an existing cluster, which may grow on demand, says so on the log and goes on."""
    node, total = node_cpus(ray), cluster_cpus(ray)
    if not job.cpus_per_trial:
        return max(1.0, min(node, total // job.max_concurrent))
    if job.cpus_per_trial > node:
        where = f"the Ray cluster at {job.address}" if job.address else "the Ray started on this machine"
        size = f"{total:g} CPUs" if total == node else f"{total:g} CPUs, {node:g} on its largest node"
        said = f"--cpus-per-trial {job.cpus_per_trial:g}: {where} has {size}, and a trial runs on one node"
        if not job.address:
            raise ClusterError(f"{said}; no trial could start: ask for at most {node:g}")
        log.warning("%s; no trial starts until a node that large joins (a cluster that grows on demand); "
                    "stop with Ctrl-C and ask for at most %g otherwise", said, node)
    return job.cpus_per_trial


def _tuner(job: SweepJob, ray, parent_run_id: str | None):
    """The Tuner of the sweep; ``job.cpus_per_trial`` is set (``_cpus``)."""
    from ray import tune

    space, cpus = job.space, job.cpus_per_trial
    trainable = make_trainable(job, parent_run_id)
    return tune.Tuner(
        tune.with_resources(trainable, {"cpu": cpus}),
        param_space=tune_space(space),
        tune_config=tune.TuneConfig(
            search_alg=search_alg(space, job.max_concurrent),
            num_samples=tune_samples(space),
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
    A resumed sweep whose trials are all finished is read back without Ray (:func:`read_back_all`).
    Raises ``RecipeError``/``RunDirError``/``TrackingError`` before Ray starts, ``ClusterError``
    when Ray cannot run the sweep (before any trial starts); ``KeyboardInterrupt`` on Ctrl-C (the
    trials' run dirs keep their checkpoints for ``--resume``)."""
    planned = check_job(job)
    check_tracking(job)
    finished = read_back_all(job, planned)
    if finished is not None:  # nothing left to run: the table is made here, without Ray
        log.info("every trial of %s is finished: its table is made from their runs, without Ray", job.sweep_dir)
        return _sweep(job, planned, lambda _job, _parent: Outcomes(planned, finished, {}, len(planned)))
    ray, ours = connect(job.address, "ray.tune", "tinyplm sweep")
    try:
        cpus = _cpus(job, ray)
        return _sweep(SweepJob(**{**job.__dict__, "cpus_per_trial": cpus}), planned, _on_ray(ray))
    finally:
        if ours:
            ray.shutdown()  # this process connected (or started) Ray: let go of it, trials' workers included


def read_back_all(job: SweepJob, planned: list[TrialPlan] | None) -> dict[str, TrialResult] | None:
    """With ``--resume``, each planned trial's result read back from its finished run (trial key ->
    result); None when a trial's run is not finished, or the trials are not known before the search
    runs (Optuna). A finished sweep resumed needs no Ray: a Ray worker per trial only to read back
    what the sweep's folder holds took the most of its time, and the cluster may be gone."""
    if not job.resume or planned is None:
        return None
    results: dict[str, TrialResult] = {}
    for plan in planned:
        result = read_back(job.recipe.resolve(), job.space, plan, trial_tracking(job))
        if result is None:
            return None
        results[plan.key] = result
    return results


@dataclass(frozen=True)
class Outcomes:
    """What the trials gave: the trials that ran (in order), the results of the finished ones by
    key, the last error of the others, and how many trials the search made (repeats included)."""

    ran: list[TrialPlan]
    results: dict[str, TrialResult]
    errors: dict[str, str]
    made: int


def _on_ray(ray) -> Callable[[SweepJob, str | None], Outcomes]:
    """The outcomes of the sweep's trials run by Tune on ``ray``."""

    def outcomes(job: SweepJob, parent_run_id: str | None) -> Outcomes:
        with _own_sigint():
            grid = _tuner(job, ray, parent_run_id).fit()
        return Outcomes(*_outcomes(job, grid), len(grid))

    return outcomes


def _sweep(job: SweepJob, planned: list[TrialPlan] | None,
           outcomes: Callable[[SweepJob, str | None], Outcomes]) -> tuple[list[TrialRow], Path]:
    """The table of the sweep's trials, their ``outcomes`` got with the sweep's MLflow parent run
    open (when tracked), which then holds the table."""
    job.sweep_dir.mkdir(parents=True, exist_ok=True)
    parent = _open_parent(job)
    status = "FAILED"
    try:
        info = parent.info.get("mlflow", {}) if parent else {}
        got = outcomes(job, info.get("run_id"))
        ran, results, errors = got.ran, got.results, got.errors
        plans = planned if planned is not None else ran
        rows = rows_of(plans, results, errors, job.space.objectives)
        path = write_table(job.space, rows, job.sweep_dir, _metric_of(job, results),
                           note=repeats_note(job, got.made, len(ran)))
        if parent is not None:
            from tinyplm.track import Artifact

            names = ("sweep.json", "summary.md", "pareto_throughput.png", "pareto_size.png")
            parent.log_files([Artifact(path.parent / n, n) for n in names])
        status = "FINISHED"
        return rows, path
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if parent is not None:
            from tinyplm.track import RunStatus

            parent.close(RunStatus[status])


@contextmanager
def _own_sigint() -> Iterator[None]:
    """Ctrl-C stops the sweep as ``KeyboardInterrupt`` (tinyplm says how to go on: ``--resume``),
    not Tune's own handler, which ends the trials as failed and offers ``Tuner.restore``."""
    before = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = before


def repeats_note(job: SweepJob, tune_trials: int, distinct: int) -> str | None:
    """What the table says when draws repeated a trial's values (each such trial ran once): a
    random search's planned draws, an Optuna search's proposals; None when none repeated."""
    planned = planned_values(job.space)
    drawn, kept = (planned.drawn, len(planned.distinct)) if planned is not None else (tune_trials, distinct)
    if drawn == kept or job.space.search == "grid":
        return None
    what = "draws" if job.space.search == "random" else "proposals"
    return (f"{drawn} {what} gave {kept} distinct trials: {drawn - kept} repeated the values of an earlier "
            "trial, which ran once")


def _metric_of(job: SweepJob, results: dict[str, TrialResult]) -> str:
    """The primary metric's name, read from a finished trial's run (``primary`` without one)."""
    from tinyplm.report import RunRecord

    for res in results.values():
        path = Path(res.run_dir) / "results.json"
        if path.is_file():
            return RunRecord.load(path).metric
    return "primary"


def check_tracking(job: SweepJob) -> None:
    """With ``--track``: mlflow importable and its store answering (within a few seconds), before
    Ray starts; raises ``TrackingError`` naming ``--track`` and ``MLFLOW_TRACKING_URI`` when that
    chose the store."""
    if not job.mlflow:
        return
    from tinyplm.config.tracking import TrackingSpec
    from tinyplm.track import TrackingError, check_available, mlflow_problem

    check_available(TrackingSpec(mlflow=job.mlflow))
    problem = mlflow_problem(job.mlflow)
    if problem is None:
        return
    if os.environ.get("MLFLOW_TRACKING_URI") == job.mlflow:
        raise TrackingError(f"--track: MLFLOW_TRACKING_URI names the store: {problem}; start it, set "
                            "MLFLOW_TRACKING_URI to one that answers, or unset it to track in a folder beside "
                            "the sweep")
    raise TrackingError(f"--track: {problem}")


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

