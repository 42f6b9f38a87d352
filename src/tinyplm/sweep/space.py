"""A :class:`~tinyplm.config.sweep.SweepSpace` as Ray Tune sees it (its param space and search
algorithm), and one trial's values as what ``tinyplm run`` takes (its overrides and run dir)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import yaml

from tinyplm.config.sweep import SweepSpace

#: A grid's one Tune key: the index of the trial in ``SweepSpace.grid_values()``. Tune's own grid
#: would cross every key, with no way to leave a combination out (``exclude``) nor to fix the order.
GRID_INDEX = "trial"


def tune_space(space: SweepSpace) -> dict[str, Any]:
    """Ray Tune's ``param_space``: for a grid, the index of each planned trial; otherwise one entry
    per varying key (a flat dict: the dotted keys stay whole, so Tune never splits them)."""
    from ray import tune

    if space.search == "grid":
        return {GRID_INDEX: tune.grid_search(list(range(space.trial_count())))}
    made = {}
    for key, d in space.params.items():
        if d.grid is not None:  # a random search crosses its grid keys with its draws
            made[key] = tune.grid_search(list(d.grid))
        elif d.choice is not None:
            made[key] = tune.choice(list(d.choice))
        elif d.uniform is not None:
            made[key] = tune.uniform(*d.uniform)
        elif d.loguniform is not None:
            made[key] = tune.loguniform(*d.loguniform)
        else:
            made[key] = tune.randint(*d.randint)
    return made


def trial_values(space: SweepSpace, config: dict[str, Any]) -> dict[str, Any]:
    """The values of the trial Tune gave ``config``: a grid's planned trial, else the drawn values."""
    if space.search == "grid":
        return space.grid_values()[config[GRID_INDEX]]
    return {k: config[k] for k in space.params}


def search_alg(space: SweepSpace, max_concurrent: int = 1):
    """The search algorithm: Tune's default variant generator for grid and random (seeded, at most
    ``max_concurrent`` trials at once: it takes that limit itself, where Tune's
    ``max_concurrent_trials`` would warn and ignore it), Optuna (``ray.tune.search.optuna``,
    multi-objective over ``objectives``) for ``optuna``."""
    if space.search != "optuna":
        from ray.tune.search import BasicVariantGenerator

        return BasicVariantGenerator(random_state=space.seed, max_concurrent=max_concurrent)
    try:
        import optuna
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:
        from tinyplm.errors import DependencyError

        raise DependencyError("search: optuna needs the package optuna (pip install 'tinyplm[cluster]')") from None
    metrics = [o.metric for o in space.objectives]
    modes = [o.mode for o in space.objectives]
    sampler = optuna.samplers.TPESampler(seed=space.seed) if len(metrics) == 1 else \
        optuna.samplers.NSGAIISampler(seed=space.seed)
    if len(metrics) == 1:
        return OptunaSearch(metric=metrics[0], mode=modes[0], sampler=sampler)
    return OptunaSearch(metric=metrics, mode=modes, sampler=sampler)


@dataclass(frozen=True)
class TrialPlan:
    """One trial as a run: its values, the overrides that make its recipe, and its key (the name
    of its run dir, the same for the same values in every sweep over the recipe)."""

    values: dict[str, Any]
    overrides: list[str]
    key: str

    @property
    def label(self) -> str:
        """The values in one short line, for tables: ``students.0.train.lr=0.0001, ...``, each as
        :func:`short_value` writes it (``values`` and ``sweep.json`` hold each in full)."""
        return ", ".join(f"{k}={short_value(v)}" for k, v in self.values.items())


LABEL_WIDTH = 48


def short_value(value: Any) -> str:
    """One trial value for a table: a mapping's ``name`` (a student) or ``method`` (a training
    section) when it has one, else its one-line YAML, cut at ``LABEL_WIDTH``."""
    for key in ("name", "method"):
        if isinstance(value, dict) and isinstance(value.get(key), str):
            return value[key]
    text = _flow(value)
    return text if len(text) <= LABEL_WIDTH else text[:LABEL_WIDTH - 3] + "..."


def _flow(value: Any) -> str:
    """``value`` as one line of YAML (what an override's right side takes)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def trial_plan(space: SweepSpace, values: dict[str, Any], trials_dir: str) -> TrialPlan:
    """The run of one trial: ``space.fixed`` then ``values`` as overrides, named by the key (a hash
    of the values and the fixed keys), written to ``trials_dir/KEY``."""
    values = {k: values[k] for k in space.params}  # the space's order; Tune adds nothing here
    body = json.dumps({"fixed": space.fixed, "values": values}, sort_keys=True, default=str)
    key = "t-" + hashlib.sha256(body.encode()).hexdigest()[:10]
    overrides = [f"{k}={_flow(v)}" for k, v in {**space.fixed, **values}.items()]
    overrides += [f"name={space.name}-{key}", f"output_dir={trials_dir}/{key}"]
    return TrialPlan(values, overrides, key)
