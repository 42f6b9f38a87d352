"""DistilBERT-style general distillation: the student learns the teacher's masked-LM distribution.

Sanh et al. (2019) train the student on masked text with ``5 * KD(teacher MLM, student MLM, T=2)
+ 2 * MLM(student) + 1 * cosine(last hidden states)``, the student initialised from every other
teacher layer. Here:

- :func:`with_mlm_head` gives a classification student a masked-LM head (``BertForMaskedLM`` or its
  family's) that *shares* the student's encoder, so training it trains the student, initialised from the
  teacher's head when the widths match, its decoder tied to the student's word embeddings;
- :func:`mlm_forward` runs a BERT with an MLM head and applies the head at the masked positions
  only: the vocabulary projection is most of the cost of a small model's step, and DistilBERT's
  ``restrict_ce_to_mask`` option does the same;
- :func:`mlm_soft_kd` and :func:`mlm_hard_loss` are the two vocabulary terms.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyplm.errors import ModelError
from tinyplm.models.features import Features, forward_features
from tinyplm.models.roles import base_model, is_encoder, mlm_head, mlm_predictions, set_base_model, task_class
from tinyplm.train.kd import soft_target_kd
from tinyplm.train.masking import IGNORE


def with_mlm_head(student: nn.Module, teacher_mlm: nn.Module | None = None) -> nn.Module:
    """A masked-LM model of the student's family (``BertForMaskedLM``, ``RobertaForMaskedLM``, ...)
    sharing the student's encoder; its head copied from ``teacher_mlm`` when both hidden sizes match
    (DistilBERT init), else newly initialised."""
    import copy

    # its own config: saving it must not relabel the classifier
    model = task_class(student.config.model_type, "ForMaskedLM")(copy.deepcopy(student.config))
    set_base_model(model, base_model(student))  # shared: the classifier's encoder (pooler included) trains
    if teacher_mlm is not None and teacher_mlm.config.hidden_size == student.config.hidden_size:
        with torch.no_grad():
            mlm_head(model).load_state_dict(mlm_head(teacher_mlm).state_dict())
    model.tie_weights()  # the decoder uses the student's word embeddings
    return model


def is_masked_lm(model: nn.Module) -> bool:
    """True for an encoder with a masked-LM head (``models.roles.mlm_predictions``)."""
    try:
        mlm_predictions(model)
    except ModelError:
        return False
    return is_encoder(model)


def mlm_forward(model: nn.Module, inputs: dict[str, Tensor], want: Iterable[str], labels: Tensor) -> Features:
    """Features of the encoder (``want`` plus the last hidden state) and, as ``logits``, the MLM
    head's output at the positions where ``labels != IGNORE``: ``(n_masked, vocab)``."""
    asked = set(want) | {"hidden"}
    feats = forward_features(base_model(model), inputs, asked)
    selected = labels != IGNORE
    feats.logits = mlm_head(model)(feats.hidden[-1][selected])
    if "hidden" not in set(want):
        feats.hidden = None
    return feats


def mlm_soft_kd(student_logits: Tensor, teacher_logits: Tensor, temperature: float) -> Tensor:
    """T^2 * KL(teacher || student) over the vocabulary, mean over masked positions ``(n, vocab)``;
    0 when no position was masked."""
    if student_logits.shape[0] == 0:
        return student_logits.sum() * 0.0
    return soft_target_kd(student_logits, teacher_logits, temperature)


def mlm_hard_loss(student_logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy of the masked positions' logits ``(n, vocab)`` with the original ids
    (``labels`` ``(batch, seq)``, :data:`IGNORE` where not masked); 0 when none was masked."""
    target = labels[labels != IGNORE]
    if target.numel() == 0:
        return student_logits.sum() * 0.0
    return F.cross_entropy(student_logits.float(), target)
