"""A sweep's search space (``tinyplm sweep RECIPE --space SPACE.yaml``): which recipe keys vary,
over which values, how trials are chosen, and what the table and the search compare.

Keys are the dotted overrides ``tinyplm run`` takes (``students.0.train.lr``, ``students.*.train.seed``,
``students.1.compress``); a value may be any YAML, a whole list of compress steps included, so a set of
compression variants is one ``grid`` key. Every trial is an ordinary run of the recipe with
``fixed`` and its own values applied, in its own run dir.

Example::

    name: sst2_lr
    search: grid            # grid | random | optuna
    fixed: {teacher.finetune.budget_minutes: 2}
    params:
      students.0.train.lr: {grid: [5.0e-5, 1.0e-4]}
      students.0.train.seed: {grid: [1, 2]}
    exclude: [{students.0.train.lr: 1.0e-4, students.0.train.seed: 2}]   # 3 trials, not 4
    objectives: [{metric: primary, mode: max}, {metric: throughput, mode: max}]
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import Field, model_validator

from tinyplm.config.base import Section
from tinyplm.config.schema import NAME_PATTERN

#: What a trial reports and an objective may name: the chosen stage's primary dev metric, its
#: batch throughput (sentences/s), batch-1 latency p50 (ms), bytes on disk, parameters, and its
#: share of the teacher's primary metric, and its throughput as a multiple of the teacher's timed in
#: the same run (``speedup``: the speed to compare when trials run side by side on one machine).
TRIAL_METRICS = ("primary", "throughput", "latency_ms", "disk_bytes", "params", "retention", "speedup")


class Domain(Section):
    """The values of one key: exactly one of ``grid`` (every value, crossed with the other grid
    keys), ``choice`` (one at random per trial), ``uniform``/``loguniform`` ([low, high]) or
    ``randint`` ([low, high), integers)."""

    grid: list[Any] | None = Field(None, min_length=1)
    choice: list[Any] | None = Field(None, min_length=1)
    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    randint: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Domain:
        given = [k for k in ("grid", "choice", "uniform", "loguniform", "randint") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of grid, choice, uniform, loguniform, randint (got {given or 'none'})")
        for key in ("uniform", "loguniform", "randint"):
            bounds = getattr(self, key)
            if bounds is not None and not bounds[0] < bounds[1]:
                raise ValueError(f"{key}: expected [low, high] with low < high, got {list(bounds)}")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise ValueError(f"loguniform: bounds must be > 0, got {list(self.loguniform)}")
        return self

    @property
    def kind(self) -> str:
        """The name of the one domain given."""
        return next(k for k in ("grid", "choice", "uniform", "loguniform", "randint") if getattr(self, k) is not None)


class Objective(Section):
    """One thing the sweep compares: a trial metric (``TRIAL_METRICS``) and its direction."""

    metric: Literal["primary", "throughput", "latency_ms", "disk_bytes", "params", "retention", "speedup"]
    mode: Literal["max", "min"]


class SweepSpace(Section):
    """A search space over recipe keys and how it is searched (see the module docstring)."""

    name: str = Field(..., pattern=NAME_PATTERN, description="the sweep's name: its folder under output_dir")
    output_dir: str = Field("runs/sweeps/{name}", description="the sweep's folder ({name} is replaced); trial run "
                            "dirs go in its trials/ folder")
    search: Literal["grid", "random", "optuna"] = Field(
        "grid", description="grid: every combination of the grid keys; random: num_samples "
        "draws; optuna: num_samples trials proposed by Optuna (multi-objective over `objectives`)")
    num_samples: int = Field(1, ge=1, description="random/optuna: the number of trials (grid: 1, every combination "
                             "once)")
    seed: int = Field(0, description="seed of the random and Optuna searches")
    fixed: dict[str, Any] = Field(default_factory=dict, description="overrides every trial gets (key: value)")
    params: dict[str, Domain] = Field(..., min_length=1, description="the keys that vary and their values")
    objectives: list[Objective] = Field(
        default_factory=lambda: [Objective(metric="primary", mode="max"), Objective(metric="throughput", mode="max")],
        min_length=1, description="what the search optimises (optuna) and the Pareto plots compare; the first "
        "is the main one")
    stage: str = Field("final", min_length=1, description="the stage of each trial's run that stands for the "
                       "trial: final (the run's final model), last (its last stage) or a stage name")
    trial_budget_minutes: float | None = Field(None, gt=0, description="stop a trial that runs longer (it is "
                                               "marked failed, its run dir kept for --resume)")
    budget_minutes: float | None = Field(None, gt=0, description="start no trial after the sweep ran this long")
    max_failures: int = Field(1, ge=0, description="times a failed trial (a dead worker, an error) is retried; "
                              "its run continues from its checkpoints")
    repeats: list[str] = Field(default_factory=list, description="params whose values repeat a setting rather than "
                               "change it (a seed): the table adds one row per setting, the mean and spread of "
                               "its finished trials over these keys")
    exclude: list[dict[str, Any]] = Field(
        default_factory=list, description="grid: combinations left out, each some grid keys and one of their "
        "values; a combination matching every key of an entry is not run (a seed repeated on the small tasks "
        "only: [{task.name: sst2, seed: 2}, ...])")

    @model_validator(mode="after")
    def _search_fits_params(self) -> SweepSpace:
        kinds = {key: d.kind for key, d in self.params.items()}
        if self.search == "grid":
            if self.num_samples != 1:
                raise ValueError("num_samples: a grid runs each combination once (the same values are the same "
                                 "run); to repeat, make the seed a grid key (students.*.train.seed: {grid: [1, 2, 3]})")
            other = [k for k, kind in kinds.items() if kind != "grid"]
            if other:
                raise ValueError(f"search: grid takes only grid keys; {other[0]} is {kinds[other[0]]} "
                                 "(use search: random or optuna)")
        elif "grid" in kinds.values() and self.search == "optuna":
            key = next(k for k, kind in kinds.items() if kind == "grid")
            raise ValueError(f"search: optuna does not take grid keys ({key}): use choice")
        stray = [k for k in self.repeats if k not in self.params]
        if stray:
            raise ValueError(f"repeats: {stray[0]} is not one of the params ({', '.join(self.params)})")
        self._check_exclude()
        clash = sorted(set(self.fixed) & set(self.params))
        if clash:
            raise ValueError(f"{clash[0]} is both fixed and a param")
        for key in (*self.fixed, *self.params):
            if key.split(".")[0] in ("name", "output_dir"):
                raise ValueError(f"{key}: a trial's name and run dir are the sweep's to choose")
        return self

    def _check_exclude(self) -> None:
        if self.exclude and self.search != "grid":
            raise ValueError(f"exclude: leaves combinations out of a grid; search is {self.search}")
        for i, entry in enumerate(self.exclude):
            if not entry:
                raise ValueError(f"exclude.{i}: empty (expected some grid keys and one value of each)")
            for key, value in entry.items():
                if key not in self.params:
                    raise ValueError(f"exclude.{i}: {key} is not one of the params ({', '.join(self.params)})")
                if value not in (self.params[key].grid or ()):
                    raise ValueError(f"exclude.{i}: {key}={value!r} is not one of its grid values "
                                     f"{self.params[key].grid}")
        if self.search == "grid" and not self.grid_values():
            raise ValueError("exclude: leaves no trial to run")

    def grid_values(self) -> list[dict[str, Any]]:
        """A grid's trials in the order they run, each its value of every key: every combination
        (the last key varying fastest) but those ``exclude`` leaves out. Empty for other searches."""
        if self.search != "grid":
            return []
        keys = list(self.params)
        grids = (self.params[k].grid or () for k in keys)
        combos = (dict(zip(keys, c, strict=True)) for c in itertools.product(*grids))
        return [c for c in combos if not any(all(c[k] == v for k, v in e.items()) for e in self.exclude)]

    def trial_count(self) -> int:
        """How many trials the sweep plans."""
        return len(self.grid_values()) if self.search == "grid" else self.num_samples
