"""The prediction-layer objective: hard labels and/or soft targets from the teacher's cached
logits, for sequence, span and token heads. Fine-tuning is ``kd_weight=0, hard_weight=1``; Tang et
al. (2019)'s distillation into a BiLSTM is ``kd_weight=0, logit_mse=1`` (sequence heads).

It runs any model that answers ``model(**inputs)`` with logits (a ``transformers`` classifier or a
classic student of ``tinyplm.models.classic``), so one objective trains both.

:class:`PredictionObjective` is a pure loss on logits (``__call__``, also used to score pruning
importance) and a training :class:`~tinyplm.train.objective.Objective` for the one loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tinyplm.models.infer import output_logits
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.train import head_losses as hl
from tinyplm.train.kd import hard_label_loss, logit_mse, regression_kd, soft_target_kd
from tinyplm.train.objective import Batch, supervised_batch


@dataclass(frozen=True)
class PredictionObjective:
    """kd_weight * KD + hard_weight * hard loss + logit_mse * MSE(logits, teacher logits).
    Fine-tuning is kd_weight=0, hard_weight=1.

    ``head`` picks the losses: ``sequence`` (above), ``span`` (start/end KD and cross-entropy over
    positions, ``train.head_losses``) or ``token`` (per-piece KD and cross-entropy at labelled
    pieces). Per-token teacher logits may be wider than the batch; they are cut to its width.
    ``class_weights`` (one per class, sequence classification) weigh the hard cross-entropy.
    Raises ``ValueError`` for ``logit_mse`` with a span or token head, ``TinyplmError`` for a head
    without a loss on logits (:data:`LOSSES`: the embedding head learns vectors).
    """

    kd_weight: float = 0.0
    hard_weight: float = 1.0
    temperature: float = 1.0
    is_regression: bool = False
    head: Head = Head.SEQUENCE
    logit_mse: float = 0.0
    class_weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _ = LOSSES[self.head]  # a head without a loss on logits (embedding) is refused here, not at its first step
        if self.logit_mse > 0 and Head(self.head).per_position:
            raise ValueError(f"logit_mse is for sentence-level logits; this task has a {self.head} head")

    # -- the training Objective ----------------------------------------------------------------
    @property
    def needs_teacher_logits(self) -> bool:
        """Soft targets and logit matching come from teacher logits cached over the training set."""
        return self.kd_weight > 0 or self.logit_mse > 0

    needs_teacher = False  # no teacher model runs during training

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Any model with this task's head trains with it."""

    def prepare(self, batch: dict[str, torch.Tensor]) -> Batch:
        return supervised_batch(batch)

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> Any:
        return None

    def loss(self, model: nn.Module, batch: Batch, teacher_out: Any) -> torch.Tensor:
        """Runs ``model`` on the batch; the loss of its logits (see :meth:`__call__`)."""
        logits = output_logits(model(**batch.inputs)).float()
        return self(logits, batch.targets, batch.teacher_logits, batch.inputs.get("attention_mask"))[0]

    def __call__(
        self, logits: torch.Tensor, labels: torch.Tensor, teacher_logits: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Return (loss, {part: value}) for one batch; ``mask`` ``(batch, seq)`` marks real
        tokens (a span head needs it so padding gets no probability)."""
        if self.needs_teacher_logits and teacher_logits is None:
            raise ValueError("this objective has kd_weight or logit_mse > 0 but no teacher logits were given")
        if Head(self.head).per_position and teacher_logits is not None:
            teacher_logits = teacher_logits[:, : logits.shape[1]]
        parts = self._parts(logits, labels, teacher_logits, mask)
        weights = {"hard": self.hard_weight, "kd": self.kd_weight, "logit_mse": self.logit_mse}
        loss = sum(weights[k] * v for k, v in parts.items())
        return loss, {k: float(v.detach()) for k, v in parts.items()}

    def _parts(self, logits, labels, teacher_logits, mask) -> dict[str, torch.Tensor]:
        return LOSSES[self.head](self, logits, labels, teacher_logits, mask)


def _sequence_parts(obj: PredictionObjective, logits, labels, teacher_logits, mask) -> dict[str, torch.Tensor]:
    """Logits ``(batch, labels)``: cross-entropy (MSE for a score), KD on soft targets, logit MSE."""
    parts: dict[str, torch.Tensor] = {}
    if obj.hard_weight > 0:
        weight = None
        if obj.class_weights is not None and not obj.is_regression:
            weight = torch.tensor(obj.class_weights, dtype=torch.float32, device=logits.device)
        parts["hard"] = hard_label_loss(logits, labels, obj.is_regression, weight)
    if obj.kd_weight > 0:
        parts["kd"] = (regression_kd(logits, teacher_logits) if obj.is_regression
                       else soft_target_kd(logits, teacher_logits, obj.temperature))
    if obj.logit_mse > 0:
        parts["logit_mse"] = logit_mse(logits, teacher_logits)
    return parts


def _span_parts(obj: PredictionObjective, logits, labels, teacher_logits, mask) -> dict[str, torch.Tensor]:
    """Logits ``(batch, seq, 2)``: cross-entropy and KD over start and end positions (real tokens only)."""
    if mask is None:
        raise ValueError("span losses need the attention mask")
    parts: dict[str, torch.Tensor] = {}
    s, e = logits[..., 0], logits[..., 1]
    if obj.hard_weight > 0:
        parts["hard"] = hl.span_hard(s, e, labels, mask)
    if obj.kd_weight > 0:
        parts["kd"] = hl.span_kd(s, e, teacher_logits[..., 0], teacher_logits[..., 1], mask, obj.temperature)
    return parts


def _token_parts(obj: PredictionObjective, logits, labels, teacher_logits, mask) -> dict[str, torch.Tensor]:
    """Logits ``(batch, seq, tags)``: cross-entropy and KD at labelled pieces."""
    parts: dict[str, torch.Tensor] = {}
    if obj.hard_weight > 0:
        parts["hard"] = hl.token_hard(logits, labels)
    if obj.kd_weight > 0:
        parts["kd"] = hl.token_kd(logits.float(), teacher_logits.float(), labels, obj.temperature)
    return parts


#: The prediction-layer loss parts of each head with logits (the embedding head's loss is on vectors).
LOSSES: PerHead = PerHead("prediction-layer loss on logits", {Head.SEQUENCE: _sequence_parts,
                                                              Head.SPAN: _span_parts, Head.TOKEN: _token_parts})
