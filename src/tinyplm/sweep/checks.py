"""Every input of a sweep checked before Ray starts or anything is written: each trial's recipe,
the data, teacher and students it runs (``tinyplm.run.preflight``, as ``tinyplm run`` checks them),
the stage standing for a trial, and with ``--resume`` that each trial's run dir holds a run of
the same recipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tinyplm.config import load_recipe
from tinyplm.config.changes import recipe_changes, resume_blockers
from tinyplm.config.compress import step_name
from tinyplm.config.load import dump_resolved
from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import RecipeError, RunDirError, did_you_mean
from tinyplm.files import RESOLVED, RESULTS
from tinyplm.sweep.job import SweepJob, grid_plans, trials_dir
from tinyplm.sweep.space import TrialPlan, trial_plan

#: Where between a drawn key's bounds its fractional probe lies: a share no round bound lands on.
INSIDE = 0.381966

#: What a sweep folder holds once a trial has been planned there (Tune's own ``tune/`` state of an
#: attempt that ran no trial is not a sweep to continue).
SWEEP_MARKS = ("sweep.json", "trials")


def check_job(job: SweepJob, inputs: bool = True) -> list[TrialPlan] | None:
    """Every input checked before Ray starts or anything is written: the recipe with each planned
    trial's overrides (for an Optuna search, with each listed value, each bound and a value with a
    fraction between the bounds of a ``uniform``/``loguniform`` key), the space's ``stage``, every
    distinct trial recipe's preflight (data, teacher, students; not with ``inputs`` False), and the
    sweep dir (an existing one only with ``resume``, each trial's run dir then holding a run of
    the trial's recipe). Raises ``RecipeError``, ``DataError``, ``ModelError`` or ``RunDirError``."""
    from tinyplm.run import preflight
    from tinyplm.run.read_once import reading_once

    plans = grid_plans(job)
    checked: set[str] = set()
    with reading_once():
        for key, overrides in _probe_overrides(job, plans):
            cfg = _trial_recipe(job, key, overrides)
            check_stage(job, cfg)
            resolved = dump_resolved(cfg)
            if inputs and resolved not in checked:  # each distinct trial as `tinyplm run` checks it, before Ray
                preflight(cfg)
                checked.add(resolved)
    marks = [job.sweep_dir / m for m in SWEEP_MARKS if (job.sweep_dir / m).exists()]
    if marks and not job.resume:
        raise RunDirError(f"{job.sweep_dir}: a sweep is there; --resume continues it (finished trials are read "
                          "back, not run again), or choose another output_dir")
    if job.resume:
        check_trial_dirs(job, plans)
    return plans


def _trial_recipe(job: SweepJob, key: str | None, overrides: list[str]) -> RunConfig:
    try:
        return load_recipe(job.recipe, overrides)
    except RecipeError as exc:
        if key is not None and "fractional part" in str(exc):
            raise RecipeError(f"sweep {job.space.name}: {key}: uniform and loguniform draw numbers with fractions, "
                              f"which the recipe does not take there ({exc}); draw integers with randint, or "
                              "list the values with choice") from None
        raise RecipeError(f"{_param_at(job, exc)}a trial's recipe is not valid: {exc}") from None


def _param_at(job: SweepJob, exc: RecipeError) -> str:
    """Where the space sets the key an override error names (``SPACE.yaml:LINE: params.KEY: ``: a
    misspelt param key is the space file's mistake, not the recipe's), else ``sweep NAME: ``."""
    from tinyplm.config.load import line_of

    param = next((p for p in job.space.params if f"override '{p}=" in str(exc)), None)
    if param is None or job.space_file is None:
        return f"sweep {job.space.name}: "
    line = line_of(Path(job.space_file).read_text(encoding="utf-8"), ("params", str(param)))
    return f"{job.space_file}{f':{line}' if line else ''}: params.{param}: "


def stage_names(cfg: RunConfig) -> list[str]:
    """The stages a run of ``cfg`` reports: the teacher, each student, each compress step of a
    student (``STUDENT.STEP``), as ``run.pipeline`` names them."""
    names = ["teacher"]
    for spec in cfg.students:
        names.append(student_name(spec))
        names += [f"{student_name(spec)}.{step_name(step)}" for step in spec.compress]
    return names


def check_stage(job: SweepJob, cfg: RunConfig) -> None:
    """The space's ``stage`` is ``final``, ``last`` or a stage the trial's run reports; raises
    ``RecipeError`` naming the space file and the stages there are."""
    which = job.space.stage
    names = stage_names(cfg)
    if which in ("final", "last") or which in names:
        return
    where = f"{job.space_file}: " if job.space_file else ""
    raise RecipeError(f"{where}stage: {which!r} names no stage of the trials' runs{did_you_mean(which, names)} "
                      f"(expected final, last or one of: {', '.join(names)})")


def check_trial_dirs(job: SweepJob, plans: list[TrialPlan] | None) -> None:
    """With ``--resume``: each trial's run dir that holds a recipe holds the trial's recipe now (a
    changed recipe, or a sweep folder reused for another recipe, would fail every trial on Ray);
    raises ``RunDirError`` naming the trial's folder and the keys that differ. Where the run dir
    was meant to be (``output_dir``) may differ for a run not finished yet, as ``--resume`` allows,
    and for a finished one when it names the same folder, as ``run_or_reuse`` allows."""
    for plan in plans if plans is not None else _tabled_plans(job):
        run_dir = trials_dir(job) / plan.key
        stored = run_dir / RESOLVED
        if not stored.is_file():
            continue
        try:
            old = stored.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{stored}: cannot be read ({exc}); choose another output_dir for this sweep") from None
        cfg = load_recipe(job.recipe, plan.overrides)
        new = dump_resolved(cfg)
        if (run_dir / RESULTS).is_file():  # reused only as it ran: its output_dir may name the same dir otherwise
            same = _same_dir(old, cfg.name, run_dir)
            changes = [c for c in recipe_changes(old, new) if not (same and c.startswith("output_dir: "))]
        else:  # continued as `tinyplm run --resume` continues a run
            changes = resume_blockers(old, new)
        if changes:
            shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
            where = f" in {job.space_file}" if job.space_file else ""
            raise RunDirError(f"{run_dir}: trial {plan.key} ({plan.label}) ran another recipe than {job.recipe} "
                              f"gives it now ({shown}); --resume continues the same recipe: undo the change, or "
                              f"give the sweep a new output_dir{where}")


def _same_dir(text: str, name: str, run_dir: Path) -> bool:
    """Whether the stored recipe ``text``'s ``output_dir`` names ``run_dir`` (by another path, maybe)."""
    try:
        named = yaml.safe_load(text).get("output_dir")
    except (yaml.YAMLError, AttributeError):
        return False
    return isinstance(named, str) and Path(named.replace("{name}", name)).resolve() == run_dir.resolve()


def _tabled_plans(job: SweepJob) -> list[TrialPlan]:
    """The trials an earlier attempt's ``sweep.json`` lists (an Optuna search plans none ahead)."""
    try:
        data = json.loads((job.sweep_dir / "sweep.json").read_text(encoding="utf-8"))
        values = [t["values"] for t in data["trials"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [trial_plan(job.space, v, str(trials_dir(job))) for v in values
            if isinstance(v, dict) and set(v) == set(job.space.params)]


def _probe_overrides(job: SweepJob, plans: list[TrialPlan] | None) -> list[tuple[str | None, list[str]]]:
    """(the key drawn with a fraction, or None; the overrides of a trial) of each recipe to check:
    every planned trial, and for a drawn search each listed value, each bound and a value with a
    fraction between the bounds of each key (what later draws may give)."""
    space, out = job.space, []
    for key, d in space.params.items() if space.search != "grid" else ():
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
    return out + [(None, p.overrides) for p in plans or ()]


def _first(d) -> Any:
    return (d.choice or d.grid or [None])[0] if (d.choice or d.grid) else (d.uniform or d.loguniform or d.randint)[0]
