"""Prediction-layer losses for span (SQuAD) and tagging (NER) heads, as pure functions.

Span heads score every position as the answer's start and end: KD is Hinton's soft-target KL
over *positions*, for start and end, averaged (as TinyBERT/DistilBERT distil SQuAD). Tagging
heads score every piece: KD is the KL over labels at each piece that carries a label (first word
pieces) and a teacher's target, averaged over them. All are scaled by T^2; padding positions never count.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from tinyplm.train.kd import soft_target_kd

IGNORE = -100
_NEG = -1e4  # masked positions: no probability mass (bf16-safe, unlike -inf in mixed sums)


def _masked(logits: Tensor, mask: Tensor) -> Tensor:
    return logits.float().masked_fill(~mask.bool(), _NEG)


def span_kd(s_start: Tensor, s_end: Tensor, t_start: Tensor, t_end: Tensor, mask: Tensor, temperature: float) -> Tensor:
    """Mean of start and end soft-target KD over positions; logits ``(batch, seq)``, ``mask``
    ``(batch, seq)`` 1 on real tokens."""
    start = soft_target_kd(_masked(s_start, mask), _masked(t_start, mask), temperature)
    end = soft_target_kd(_masked(s_end, mask), _masked(t_end, mask), temperature)
    return (start + end) / 2


def span_hard(s_start: Tensor, s_end: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """Mean of start and end cross-entropy with gold token positions ``labels`` ``(batch, 2)``."""
    return (F.cross_entropy(_masked(s_start, mask), labels[:, 0])
            + F.cross_entropy(_masked(s_end, mask), labels[:, 1])) / 2


def token_kd(s_logits: Tensor, t_logits: Tensor, labels: Tensor, temperature: float) -> Tensor:
    """Soft-target KD at the labelled pieces (``labels != IGNORE``) where the teacher has logits (a
    NaN row is a word the teacher's pieces did not reach: ``distill.across_tokenizers``); logits
    ``(batch, seq, labels)``."""
    keep = (labels != IGNORE) & ~t_logits.isnan().any(-1)
    if not keep.any():
        return s_logits.sum() * 0.0
    return soft_target_kd(s_logits[keep], t_logits[keep], temperature)


def token_hard(s_logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy at the labelled pieces; ``labels`` ``(batch, seq)`` with IGNORE elsewhere."""
    if not (labels != IGNORE).any():
        return s_logits.sum() * 0.0
    return F.cross_entropy(s_logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
