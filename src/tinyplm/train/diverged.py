"""A training stage whose weights stopped being numbers is not carried on: a loss of NaN or infinity
that reached the weights (a learning rate far too high, an overflow) leaves a model whose logits are
NaN, whose argmax is always class 0, so every later step, check and report would score a model that
answers nothing as if it were one that learned. Where the stage kept a best checkpoint from before,
it ends there (with a warning); otherwise the run stops, naming the stage, the step and what to change."""

from __future__ import annotations

import logging
import math

import torch
from torch import nn

from tinyplm.errors import TinyplmError
from tinyplm.train.accelerator import synced

log = logging.getLogger(__name__)


def diverged_weight(model: nn.Module, loss: float) -> str | None:
    """The name of a parameter of ``model`` holding NaN or infinity when the mean ``loss`` of the
    last steps is not finite; None when the loss is finite or every weight is."""
    if math.isfinite(loss):
        return None
    return next((name for name, p in model.named_parameters() if not torch.isfinite(p).all()), None)


def divergence_error(stage: str, step: int, loss: float, weight: str, lr: float) -> TinyplmError:
    """The error that stops a run whose stage diverged with no earlier checkpoint to fall back on."""
    return TinyplmError(
        f"stage {stage}: training diverged by step {step}: the loss is {loss} and weights ({weight} among them) are "
        f"no longer numbers, so the model would predict one class whatever it reads; lower this stage's learning "
        f"rate (teacher.finetune.lr, or the student's train.lr; {lr:g} at this step), then run the recipe into a "
        "new output folder (-o); --force here would delete the stages this run has already made")


def stage_diverged(loop, loss: float, lr: float) -> bool:
    """True when the weights of ``loop`` (a :class:`tinyplm.train.loop._Loop`) diverged and its stage
    ends at the best checkpoint it kept (warned, and a ``diverged`` event logged); raises
    :func:`divergence_error` when it kept none. ``loss``: the mean of the steps just logged; rank 0's
    is used, so every process decides alike (DDP keeps one set of weights on all)."""
    bad = diverged_weight(loop.student, synced(loop.acc, loss)[0])
    if bad is None:
        return False
    state = loop.state
    if not (loop.spec.keep_best and loop.best is not None):
        raise divergence_error(loop.io.name, state.step, loss, bad, lr)
    log.warning("stage %s diverged by step %d (%s is no longer a number): it ends at its best checkpoint, step %s; "
                "a lower learning rate would let it train on", loop.io.name, state.step, bad, state.best_step)
    loop.log.write(event="diverged", step=state.step, weight=bad, best_step=state.best_step)
    return True
