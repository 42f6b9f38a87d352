"""An exponential moving average of the weights a stage trains, for ``train.ema_decay``.

A small student distilled for a few minutes ends on whatever its last batches pushed it to; the
average of its recent weights (Polyak averaging; an EMA as in Tarvainen and Valpola 2017 and
most vision training recipes) sits nearer the middle of where those batches took it and often
scores better on examples it did not see. With ``ema_decay = d`` the average moves
``1 - d`` of the way towards the trained weights after every optimiser step (a horizon of about
``1 / (1 - d)`` steps).

The average is kept by ``torch.optim.swa_utils.AveragedModel`` with its EMA update
(``get_ema_multi_avg_fn``), over the student's parameters (its buffers are position and token-type
ids, not averaged). Training goes on from the trained weights; every evaluation scores the
average, so the checkpoint kept is the one whose average scores best, and the stage returns that
average (or the last one without ``keep_best``). Checkpoints hold the average beside the trained
weights, so a resumed stage averages on from where it stopped. What it did for the demo's
students (nothing their held-out sentences could see): docs/results/demo.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

#: The file of a checkpoint that holds the average (train/checkpoint.py ``extra``).
AVERAGE_FILE = "average"


@dataclass
class WeightAverage:
    """The running average of a student's parameters (an ``AveragedModel`` holding a copy)."""

    averaged: AveragedModel

    @classmethod
    def of(cls, student: nn.Module, decay: float) -> WeightAverage | None:
        """An average of ``student`` for ``decay`` in (0, 1); ``None`` for 0 (no averaging).
        Raises ``ValueError`` for ``decay`` outside [0, 1)."""
        if not 0 <= decay < 1:
            raise ValueError(f"ema_decay = {decay!r}: expected a number in [0, 1)")
        if decay == 0:
            return None
        return cls(AveragedModel(student, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=False))

    @property
    def model(self) -> nn.Module:
        """The averaged copy of the student (evaluate it as the student)."""
        return self.averaged.module

    def update(self, student: nn.Module) -> None:
        """One step of the average towards ``student``'s weights now (the first call copies them)."""
        self.averaged.update_parameters(student)

    def state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps: the averaged weights and how many steps they average."""
        return {k: v.detach().clone().contiguous() for k, v in self.averaged.state_dict().items()}

    def load(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state` (a resumed stage). Raises ``RuntimeError`` for another model's."""
        self.averaged.load_state_dict(state)

    def with_average(self, trainable_state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
        """A copy of ``trainable_state`` (the student under ``prefix`` beside the objective's own
        parts) whose student tensors are the average's: the weights a kept-best checkpoint holds."""
        state = {k: v.detach().clone() for k, v in trainable_state.items()}
        for name, value in self.model.state_dict().items():
            state[prefix + name] = value.detach().clone()
        return state

    @torch.no_grad()
    def copy_into(self, student: nn.Module) -> None:
        """Put the averaged weights into ``student``, in place."""
        student.load_state_dict(self.model.state_dict())
