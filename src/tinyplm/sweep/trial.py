"""One sweep trial: an ordinary run of the recipe with the trial's overrides, in its own run dir,
under the reuse rule of ``run.pipeline.run_or_reuse`` (a finished run of the same recipe is read
back, an unfinished one continues from its checkpoints); what it reports is one stage's numbers."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tinyplm.config import load_recipe
from tinyplm.config.sweep import SweepSpace
from tinyplm.errors import RecipeError
from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.tables import primary, stage_row
from tinyplm.sweep.space import TrialPlan


@dataclass(frozen=True)
class TrialResult:
    """What one trial reports: the stage standing for it and its numbers (``TRIAL_METRICS``)."""

    key: str
    stage: str
    primary: float
    throughput: float
    latency_ms: float
    disk_bytes: int
    params: int
    retention: float | None  # share (0-1) of the teacher's primary metric; None without a teacher
    run_dir: str
    # x the throughput of the trial's own teacher, timed in the same run; None without one. Concurrent
    # trials share the machine, so this ratio compares across trials better than ``throughput`` does
    speedup: float | None = None

    def metrics(self) -> dict[str, Any]:
        """The numbers as Tune's reported metrics (every key, so any objective can name it)."""
        return asdict(self)


def trial_stage(record: RunRecord, which: str) -> StageRecord:
    """The stage of a finished trial's run that stands for the trial: ``final`` (the run's final
    model), ``last`` (its last stage) or a stage by name; raises ``RecipeError`` naming the
    stages there are when ``which`` names none."""
    if which == "last":
        return record.stages[-1]
    name = record.info.final_model if which == "final" else which
    stage = record.stage(name) if name else None
    if stage is None:
        have = ", ".join(s.name for s in record.stages)
        raise RecipeError(f"stage: {which!r} names no stage of the trial's run (stages: {have})")
    return stage


def result_of(record: RunRecord, plan: TrialPlan, which: str, run_dir: Path) -> TrialResult:
    """The trial's :class:`TrialResult` from its run's record."""
    stage = trial_stage(record, which)
    row = stage_row(record, stage)
    value = primary(record, stage)
    return TrialResult(
        key=plan.key, stage=stage.name, primary=float(value) if value is not None else float("nan"),
        throughput=stage.throughput_sent_per_s, latency_ms=stage.latency_ms_p50_b1, disk_bytes=stage.disk_bytes,
        params=stage.params, retention=row.retention / 100 if row.retention is not None else None,
        run_dir=str(run_dir), speedup=row.speedup,
    )


def run_trial(recipe: Path, space: SweepSpace, plan: TrialPlan, parent_run_id: str | None = None,
              tracking: list[str] | None = None) -> TrialResult:
    """Run (or read back, or continue) the trial's run, tracked as ``tracking``'s overrides say
    (as a child of the sweep's ``parent_run_id``); with ``space.trial_budget_minutes`` its
    training stops at a checkpoint once the budget is spent (``Interrupted``: the trial fails, and
    the next attempt or ``--resume`` continues it)."""
    from tinyplm.run.pipeline import run_dir_of, run_or_reuse
    from tinyplm.train.signals import deadline

    cfg = load_recipe(recipe, plan.overrides + (tracking or []))
    budget = space.trial_budget_minutes * 60 if space.trial_budget_minutes else None
    with deadline(budget):
        record = run_or_reuse(cfg, parent_run_id=parent_run_id)
    return result_of(record, plan, space.stage, run_dir_of(cfg))


def read_back(recipe: Path, space: SweepSpace, plan: TrialPlan,
              tracking: list[str] | None = None) -> TrialResult | None:
    """The trial's result read from its finished run, as :func:`run_trial` would read it back
    (the same recipe and overrides); None when its run is not finished. Raises ``RunDirError``
    as :func:`run_trial` would, for a finished run of another recipe or teacher."""
    from tinyplm.run.pipeline import finished_record, run_dir_of

    cfg = load_recipe(recipe, plan.overrides + (tracking or []))
    record = finished_record(cfg)
    return result_of(record, plan, space.stage, run_dir_of(cfg)) if record is not None else None
