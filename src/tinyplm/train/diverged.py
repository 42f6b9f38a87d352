"""A training stage whose weights stopped being numbers is stopped there, naming the stage, the step
and what to change: a loss of NaN or infinity that reached the weights (a learning rate far too high,
an overflow) leaves a model whose logits are NaN, whose argmax is always class 0, so every later
step, check and report would score a model that answers nothing as if it were one that learned."""

from __future__ import annotations

import math

import torch
from torch import nn

from tinyplm.errors import TinyplmError


def check_finite(model: nn.Module, loss: float, stage: str, step: int, lr: float) -> None:
    """Raise ``TinyplmError`` when the mean ``loss`` of the last steps is NaN or infinite and a
    parameter of ``model`` holds NaN or infinity; a finite loss, or finite weights, pass."""
    if math.isfinite(loss):
        return
    bad = next((name for name, p in model.named_parameters() if not torch.isfinite(p).all()), None)
    if bad is None:
        return
    raise TinyplmError(
        f"stage {stage}: training diverged by step {step}: the loss is {loss} and weights ({bad} among them) are "
        f"no longer numbers, so the model would predict one class whatever it reads; lower this stage's learning "
        f"rate (teacher.finetune.lr, or the student's train.lr; {lr:g} at this step), then run again with --force")
