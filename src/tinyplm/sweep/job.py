"""One sweep as a job (its recipe, space, folder and how it runs) and the trials it plans."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinyplm.config.sweep import SweepSpace
from tinyplm.sweep.space import TrialPlan, planned_values, trial_plan


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
    space_file: Path | None = None  # the space's YAML file, named in messages (None: made in code)


def sweep_dir_of(space: SweepSpace) -> Path:
    """The sweep's folder."""
    return Path(space.output_dir.replace("{name}", space.name))


def trials_dir(job: SweepJob) -> Path:
    """The folder of the trials' run dirs (absolute: a trial runs in a Ray worker's own folder)."""
    return (job.sweep_dir / "trials").resolve()


def grid_plans(job: SweepJob) -> list[TrialPlan] | None:
    """Every trial of a grid or random sweep, each once (a random search's draws are made here,
    seeded, and a draw that repeats an earlier one is the same trial); None for Optuna, whose
    trials are known as they are proposed."""
    values = planned_values(job.space)
    if values is None:
        return None
    return [trial_plan(job.space, v, str(trials_dir(job))) for v in values.distinct]
