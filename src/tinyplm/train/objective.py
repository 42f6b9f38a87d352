"""The one contract between the training loop and every kind of training.

Fine-tuning and prediction-layer KD (``train.prediction.PredictionObjective``), layer-wise and
masked-LM distillation (``distill.objective.DistillObjective``), pre-training
(``pretrain.objective.PretrainObjective``) and fitting a masked-LM head on a frozen encoder
(``pretrain.mlm_head.HeadMLMObjective``) all implement :class:`Objective`; the loop knows nothing
else about them. An objective that is an ``nn.Module`` (learned projections, ELECTRA's
generator) trains and checkpoints together with the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor, nn

from tinyplm.tasks.encoding import model_inputs


@dataclass
class Batch:
    """One training batch as an objective sees it.

    ``inputs``: model keyword arguments (``input_ids``, ``attention_mask``, ...), each ``(batch, seq)``.
    ``targets``: what the loss compares against (class ids ``(batch,)``, masked-LM labels
    ``(batch, seq)``, or the objective's own structure). ``index``: the examples' positions in the
    training set ``(batch,)``. ``teacher_logits``: cached teacher outputs for these examples, when
    the objective asked for them (filled in by the loop).
    """

    inputs: dict[str, Tensor]
    targets: Any
    index: Tensor
    teacher_logits: Tensor | None = None


@runtime_checkable
class Objective(Protocol):
    """What the loop needs from a kind of training.

    ``needs_teacher_logits``: the loop must be given teacher logits over the whole training set;
    it hands each batch its rows. ``needs_teacher``: the loop must be given a teacher model, run
    (without gradients) on every batch through :meth:`teacher_outputs`.

    An objective may also define ``start(model, data, teacher_logits)``, optional so that the
    protocol stays small: the loop calls it once before the first step (and before a resumed
    stage loads its checkpoint), for set-up that needs the training data, such as fitting a
    projection (:meth:`tinyplm.distill.embedding.EmbeddingObjective.start`).
    """

    needs_teacher_logits: bool
    needs_teacher: bool

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Raise ``ValueError`` when ``model``/``teacher`` cannot be trained with this objective."""
        ...

    def prepare(self, batch: dict[str, Tensor]) -> Batch:
        """A collated batch (``tasks.encoding.collate``) -> the :class:`Batch` to train on. May
        draw from torch's global RNG (masking): the loop checkpoints that RNG, so a resumed run
        draws as an uninterrupted one."""
        ...

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> Any:
        """What the loss needs from the teacher on this batch (called under ``no_grad``)."""
        ...

    def loss(self, model: nn.Module, batch: Batch, teacher_out: Any) -> Tensor:
        """The batch's scalar loss, computed by running ``model`` on ``batch``."""
        ...


def supervised_batch(batch: dict[str, Tensor]) -> Batch:
    """The plain :meth:`Objective.prepare`: model inputs, the ``labels`` column as targets."""
    return Batch(model_inputs(batch), batch["labels"], batch["index"])
