"""When and how a training stage scores itself: every ``eval_every`` steps and once at its end,
keeping the best step's weights (``keep_best``).

The weights are checked to be numbers before each evaluation (:func:`weights_diverged_unscored`):
the loss logged last may predate the step that broke them, and a model whose outputs are NaN is
refused by evaluation itself (:mod:`tinyplm.models.finite`), which would stop the run where
:func:`~tinyplm.train.diverged.stage_diverged` ends the stage at its best checkpoint instead.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

from tinyplm.train.diverged import stage_diverged


def weights_diverged_unscored(loop) -> bool:
    """Whether the weights of ``loop`` (a :class:`tinyplm.train.loop._Loop`), about to be scored,
    stopped being numbers, handled as :func:`stage_diverged` handles it (True: the stage ends at its
    best checkpoint; with none kept the run stops)."""
    return stage_diverged(loop, math.nan, loop.opt.param_groups[0]["lr"])


def evaluate_stage(loop) -> None:
    """Score the stage's model at this step (its weight average, or its start-relative weights,
    where it keeps them), log it and keep the weights when the primary metric improved."""
    state = loop.state
    if loop.average is not None:
        metrics = loop.evaluate(loop.average.model)
    else:
        with loop.start.applied(loop.student) if loop.start else nullcontext(loop.student) as student:
            metrics = loop.evaluate(student)
    loop.model.train()
    entry = {"step": state.step, "elapsed_s": round(state.elapsed, 2), **metrics}
    state.history.append(entry)
    key = loop.primary or next(iter(metrics), None)
    value = metrics.get(key) if key else None
    improved = value is not None and (state.best_metric is None or value > state.best_metric)
    if improved:
        state.best_metric, state.best_step = float(value), state.step
        if loop.spec.keep_best and loop.average is not None:
            loop.best = loop.average.with_average(loop.unwrapped.state_dict(), "student.")
        elif loop.spec.keep_best:
            loop.best = {k: v.detach().clone() for k, v in loop.unwrapped.state_dict().items()}
    loop.log.write(event="eval", step=state.step, metrics=metrics, best=improved)


def last_evaluation(loop, stopped_by: str) -> str:
    """Score the stage's last step unless it has no evaluation, was just scored or diverged ->
    how the stage stopped (``diverged`` when its weights are found broken here)."""
    if not loop.evaluate or stopped_by == "diverged" or (loop.state.history or [{}])[-1].get("step") == loop.state.step:
        return stopped_by
    if weights_diverged_unscored(loop):
        return "diverged"
    evaluate_stage(loop)
    return stopped_by
