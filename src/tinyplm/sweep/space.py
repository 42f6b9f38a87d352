"""A :class:`~tinyplm.config.sweep.SweepSpace` as Ray Tune sees it (its param space and search
algorithm), and one trial's values as what ``tinyplm run`` takes (its overrides and run dir)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from dataclasses import dataclass
from typing import Any

import yaml

from tinyplm.config.sweep import SweepSpace

#: The one Tune key of a grid or random search: the index of the trial in ``planned_values(space).distinct``.
#: Tune's own grid would cross every key, with no way to leave a combination out (``exclude``) nor to fix
#: the order; its own draws could repeat a trial's values, two Tune trials then claiming one run dir.
GRID_INDEX = "trial"


@dataclass(frozen=True)
class PlannedValues:
    """The values of every trial a grid or random search plans: ``distinct``, each once, in the
    order they run; ``drawn``: how many draws a random search made (a grid: one per trial), so
    ``drawn - len(distinct)`` draws repeated an earlier trial's values."""

    distinct: list[dict[str, Any]]
    drawn: int

    @property
    def repeated(self) -> int:
        return self.drawn - len(self.distinct)


def planned_values(space: SweepSpace) -> PlannedValues | None:
    """The trials of a grid (``SweepSpace.grid_values``) or of a random search (``num_samples``
    rounds, each every combination of its grid keys with one draw of the other keys, from a
    generator seeded with ``space.seed``: the same draws in every process and on ``--resume``);
    None for Optuna."""
    if space.search == "grid":
        values = space.grid_values()
        return PlannedValues(values, len(values))
    if space.search != "random":
        return None
    rng = random.Random(space.seed)
    grids = {k: d.grid for k, d in space.params.items() if d.grid is not None}
    drawn, seen = [], {}
    for _ in range(space.num_samples):
        for combo in itertools.product(*grids.values()):
            fixed = dict(zip(grids, combo, strict=True))
            values = {k: fixed[k] if k in fixed else _draw(d, rng) for k, d in space.params.items()}
            drawn.append(values)
            seen.setdefault(json.dumps(values, sort_keys=True, default=str), values)
    return PlannedValues(list(seen.values()), len(drawn))


def _draw(d, rng: random.Random) -> Any:
    """One value of a ``choice``, ``uniform``, ``loguniform`` or ``randint`` domain."""
    if d.choice is not None:
        return rng.choice(d.choice)
    if d.uniform is not None:
        return rng.uniform(*d.uniform)
    if d.loguniform is not None:
        lo, hi = d.loguniform
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return rng.randrange(*d.randint)


def tune_samples(space: SweepSpace) -> int:
    """Tune's ``num_samples``: once over the planned trials of a grid or random search (their rounds
    are drawn here: Tune repeating its grid would run each planned trial that many times, claiming
    one run dir), ``num_samples`` proposals for Optuna."""
    return 1 if planned_values(space) is not None else space.num_samples


def tune_space(space: SweepSpace) -> dict[str, Any]:
    """Ray Tune's ``param_space``: for a grid or random search, the index of each planned trial;
    for Optuna, one entry per varying key (a flat dict: the dotted keys stay whole, so Tune never
    splits them)."""
    from ray import tune

    planned = planned_values(space)
    if planned is not None:
        return {GRID_INDEX: tune.grid_search(list(range(len(planned.distinct))))}
    made = {}
    for key, d in space.params.items():
        if d.choice is not None:
            made[key] = tune.choice(list(d.choice))
        elif d.uniform is not None:
            made[key] = tune.uniform(*d.uniform)
        elif d.loguniform is not None:
            made[key] = tune.loguniform(*d.loguniform)
        else:
            made[key] = tune.randint(*d.randint)
    return made


def trial_values(space: SweepSpace, config: dict[str, Any]) -> dict[str, Any]:
    """The values of the trial Tune gave ``config``: a planned trial, else Optuna's proposal."""
    planned = planned_values(space)
    if planned is not None:
        return planned.distinct[config[GRID_INDEX]]
    return {k: config[k] for k in space.params}


def search_alg(space: SweepSpace, max_concurrent: int = 1):
    """The search algorithm: Tune's default variant generator for grid and random (seeded, at most
    ``max_concurrent`` trials at once: it takes that limit itself, where Tune's
    ``max_concurrent_trials`` would warn and ignore it), Optuna (``ray.tune.search.optuna``,
    multi-objective over ``objectives``) for ``optuna``."""
    if space.search != "optuna":  # a grid or random search: Tune runs the planned trials by index
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
