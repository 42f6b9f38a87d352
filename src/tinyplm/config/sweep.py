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
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from tinyplm.config.base import Section
from tinyplm.config.schema import NAME_PATTERN
from tinyplm.errors import RecipeError, did_you_mean
from tinyplm.files import read_utf8

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
        seen: set[str] = set()
        for value in self.grid or ():  # as a trial's key sees a value: the same value would be the same run
            text = json.dumps(value, sort_keys=True, default=str)
            if text in seen:
                raise ValueError(f"grid: the value {text} is given twice (each value is one trial's run; a seed "
                                 "repeats a setting: give each seed once)")
            seen.add(text)
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
        """How many trials the sweep plans: a grid's combinations; a random search's draws (each
        round of ``num_samples`` crosses its grid keys; draws that repeat a trial's values are run
        once, so it may run fewer); Optuna's ``num_samples``."""
        if self.search == "grid":
            return len(self.grid_values())
        if self.search == "random":
            return self.num_samples * math.prod(len(d.grid) for d in self.params.values() if d.grid is not None)
        return self.num_samples


#: Top-level keys only a run recipe has, and only a space file has.
RECIPE_KEYS, SPACE_KEYS = ("task", "teacher", "students"), ("params", "search", "objectives")


def file_kind(path: Path) -> str | None:
    """``recipe`` or ``space`` when ``path``'s top-level keys are only one kind's, else None
    (unreadable files are left to the loader to report)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict):
        return None
    recipe, space = any(k in raw for k in RECIPE_KEYS), any(k in raw for k in SPACE_KEYS)
    return "recipe" if recipe and not space else "space" if space and not recipe else None


def load_space(path: str | Path) -> SweepSpace:
    """Read a space file (``--space``); raises ``RecipeError`` naming the file (and line and key):
    missing, empty, a run recipe given in its place, an unknown key of a param's domain (with the
    nearest of grid, choice, uniform, loguniform, randint), or any key ``load_recipe`` refuses."""
    from tinyplm.config.load import load_recipe

    path = Path(path)
    if not path.is_file():
        found = "is a folder, not a space file (a YAML file)" if path.is_dir() else "space file not found"
        raise RecipeError(f"--space {path}: {found}")
    text = read_utf8(path, RecipeError)
    if _parses(text) and yaml.safe_load(text) is None:
        raise RecipeError(f"--space {path}: the space file is empty; a space file names at least its name and "
                          "params (sweeps/*.yaml are examples)")
    if file_kind(path) == "recipe":
        raise RecipeError(f"--space {path}: is a run recipe (it has {', '.join(RECIPE_KEYS)} keys), not a space "
                          "file; the command is: tinyplm sweep RECIPE --space SPACE")
    _check_domain_keys(path, text)
    return load_recipe(path, schema=SweepSpace)


def _parses(text: str) -> bool:
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return True


def _check_domain_keys(path: Path, text: str) -> None:
    """Each ``params`` entry's keys are a domain's (the recipe loader cannot name the valid keys
    below a mapping of free keys)."""
    from tinyplm.config.load import line_of

    if not _parses(text):
        return
    raw = yaml.safe_load(text)
    params = raw.get("params") if isinstance(raw, dict) else None
    if not isinstance(params, dict):
        return
    valid = list(Domain.model_fields)
    for key, domain in params.items():
        for k in domain if isinstance(domain, dict) else ():
            if k not in valid:
                line = line_of(text, ("params", str(key), str(k)))
                where = f"{path}:{line}" if line else str(path)
                raise RecipeError(f"{where}: unknown key 'params.{key}.{k}'{did_you_mean(str(k), valid)} Valid keys "
                                  f"here: {', '.join(valid)}")
