"""Averaging a stage's start weights into what it trained (WiSE-FT), for ``train.keep_start_weights``.

A model that starts a stage already good at more than the stage teaches (the packaged
all-MiniLM-L6-v2, trained on a billion question-answer and paraphrase pairs, distilled towards
MPNet on books and Wikipedia) loses some of what the stage never shows it (real questions) while
it gains what the stage does show. Wortsman et al. 2022 ("Robust fine-tuning of zero-shot models")
found that the weights halfway along the straight line between the start and the fine-tuned model
keep most of both: the gain in distribution and the start's robustness outside it. With
``keep_start_weights = k`` every floating-point tensor of the saved model is
``k * start + (1 - k) * trained``; the start is the model as the stage received it (so a resumed
stage, which receives the same model, blends with the same start).

Checkpoints hold the trained weights (training continues from them), but every evaluation during
the stage scores the blend (:meth:`StartWeights.applied`), so the checkpoint kept is the one whose
blend scores best, and that blend is what the stage returns (:meth:`StartWeights.blend_into`).

Written here rather than taken from a library: the blend is a line of arithmetic per tensor, and
what needs care is when it applies (evaluations and the end, never the checkpoints), which is this
loop's business.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class StartWeights:
    """The floating-point tensors of a model at its stage's start (detached copies) and the share
    ``keep`` in (0, 1) of them blended into the trained model."""

    keep: float
    tensors: dict[str, torch.Tensor]

    @classmethod
    def of(cls, model: nn.Module, keep: float) -> StartWeights | None:
        """A snapshot of ``model``'s floating-point state for ``keep`` in (0, 1); ``None`` for 0
        (nothing to blend). Raises ``ValueError`` for ``keep`` outside [0, 1)."""
        if not 0 <= keep < 1:
            raise ValueError(f"keep_start_weights = {keep!r}: expected a number in [0, 1)")
        if keep == 0:
            return None
        return cls(keep, {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()})

    def blend_into(self, model: nn.Module) -> None:
        """Replace ``model``'s weights by the blend, in place. Raises ``ValueError`` naming a
        tensor whose name or shape differs from the start's (the model is not the one snapshotted)."""
        state = model.state_dict()
        missing = sorted(set(self.tensors) - set(state))
        if missing:
            raise ValueError(f"keep_start_weights: the trained model has no tensor {missing[0]!r} of its start "
                             f"({len(missing)} missing): it is not the model the stage started with")
        with torch.no_grad():
            for name, start in self.tensors.items():
                now = state[name]
                if now.shape != start.shape:
                    raise ValueError(f"keep_start_weights: tensor {name!r} is {tuple(now.shape)} after training "
                                     f"and was {tuple(start.shape)} at the start")
                now.mul_(1 - self.keep).add_(start.to(now.device, now.dtype), alpha=self.keep)

    @contextmanager
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """``model`` holding the blend inside the block, its trained weights again after it (also
        when the block raises)."""
        trained = {k: model.state_dict()[k].detach().clone() for k in self.tensors}
        self.blend_into(model)
        try:
            yield model
        finally:
            state = model.state_dict()
            with torch.no_grad():
                for name, value in trained.items():
                    state[name].copy_(value)
