"""Layer-wise distillation losses as pure functions (float32 math, scalar mean out).

- TinyBERT (Jiao et al. 2020): :func:`embedding_mse`/:func:`hidden_mse` with a learned projection
  W_h when widths differ (:func:`make_projection`), and :func:`attention_score_mse` on pre-softmax
  attention scores.
- MiniLM (Wang et al. 2020): :func:`attention_kl` (attention distribution transfer) and
  :func:`value_relation_kl` (value relation transfer); equal head counts.
- MiniLMv2 (Wang et al. 2021): :func:`self_relation_kl` for Q-Q, K-K or V-V relations split into a
  chosen number of relation heads, so teacher and student head counts and widths may differ.
- DistilBERT (Sanh et al. 2019): :func:`cosine_hidden`, 1 - cosine between hidden states.

Every ``mask`` is (batch, seq) with 1 (or True) at real tokens and 0 at padding; padded tokens,
padded query rows and padded keys never contribute, so their values do not change any loss.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

TINYBERT_MASK_THRESHOLD = -1e2  # TinyBERT zeroes scores <= -100 (additively masked positions)


def make_projection(d_student: int, d_teacher: int, channels: list[int] | None = None) -> nn.Linear | None:
    """TinyBERT's W_h: an ``nn.Linear(d_student, d_teacher)``, or None when the widths are equal.

    ``channels`` (student channel i was copied from teacher channel ``channels[i]``, see
    ``models.narrow``) starts it as that embedding instead of at random: student channel i feeds
    teacher channel ``channels[i]`` and the dropped channels are predicted as 0, so a width-pruned
    student's first gradients refine its copied weights instead of chasing a random map."""
    if d_student == d_teacher:
        return None
    proj = nn.Linear(d_student, d_teacher)
    if channels is not None:
        if len(channels) != d_student or not all(0 <= c < d_teacher for c in channels):
            raise ValueError(f"channels must list {d_student} teacher channels in 0..{d_teacher - 1}")
        with torch.no_grad():
            proj.weight.zero_()
            proj.bias.zero_()
            proj.weight[torch.tensor(channels), torch.arange(d_student)] = 1.0
    return proj


def _valid(mask: Tensor, batch: int, seq: int) -> Tensor:
    """``mask`` as bool (batch, seq). Raises ValueError on a wrong shape or an all-padding mask."""
    if tuple(mask.shape) != (batch, seq):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected (batch, seq) = {(batch, seq)}")
    valid = mask.bool()
    if not valid.any():
        raise ValueError("mask has no real (non-padding) token")
    return valid


def _check_tokens(student: Tensor, teacher: Tensor, what: str) -> None:
    """Student and teacher are (batch, seq, *) with the same batch and seq."""
    if student.dim() != 3 or teacher.dim() != 3 or student.shape[:2] != teacher.shape[:2]:
        raise ValueError(
            f"{what}: expected (batch, seq, hidden) tensors with equal batch and seq, got student "
            f"{tuple(student.shape)} and teacher {tuple(teacher.shape)}"
        )


def _project(student: Tensor, teacher: Tensor, proj: nn.Module | None, what: str) -> Tensor:
    """``proj(student)`` in float32 (or student itself); raises ValueError if widths still differ."""
    x = student.float() if proj is None else proj(student.to(proj.weight.dtype)).float()
    if x.shape[-1] != teacher.shape[-1]:
        hint = "pass proj=make_projection(d_s, d_t)" if proj is None else "the projection's output is wrong"
        raise ValueError(
            f"{what}: student width {x.shape[-1]} != teacher width {teacher.shape[-1]}; {hint}"
        )
    return x


def hidden_mse(student: Tensor, teacher: Tensor, mask: Tensor, proj: nn.Module | None = None) -> Tensor:
    """TinyBERT hidden-state loss: MSE(proj(student), teacher) over real tokens.

    ``student`` (batch, seq, d_s), ``teacher`` (batch, seq, d_t), ``mask`` (batch, seq).
    Mean over real tokens and the d_t features. Raises ValueError on mismatched shapes or when
    d_s != d_t and no ``proj`` is given.
    """
    _check_tokens(student, teacher, "hidden_mse")
    valid = _valid(mask, *teacher.shape[:2])
    x = _project(student, teacher, proj, "hidden_mse")
    sq = (x - teacher.float()).pow(2).sum(-1)  # (batch, seq)
    return sq[valid].sum() / (valid.sum() * teacher.shape[-1])


embedding_mse = hidden_mse
"""TinyBERT embedding-layer loss: :func:`hidden_mse` applied to the embedding outputs."""


def cosine_hidden(student: Tensor, teacher: Tensor, mask: Tensor, proj: nn.Module | None = None) -> Tensor:
    """DistilBERT alignment: mean over real tokens of 1 - cos(proj(student), teacher).

    ``student`` (batch, seq, d_s), ``teacher`` (batch, seq, d_t), ``mask`` (batch, seq).
    Raises ValueError on mismatched shapes or unequal widths without ``proj``.
    """
    _check_tokens(student, teacher, "cosine_hidden")
    valid = _valid(mask, *teacher.shape[:2])
    x = _project(student, teacher, proj, "cosine_hidden")
    cos = F.cosine_similarity(x, teacher.float(), dim=-1)  # (batch, seq)
    return (1.0 - cos)[valid].mean()


def _check_attention(s: Tensor, t: Tensor, mask: Tensor, what: str) -> Tensor:
    """Both (batch, heads, seq, seq) with equal shapes; returns the bool (batch, seq) mask."""
    if s.dim() != 4 or t.dim() != 4:
        raise ValueError(
            f"{what}: expected (batch, heads, seq, seq), got {tuple(s.shape)} and {tuple(t.shape)}"
        )
    if s.shape[1] != t.shape[1]:
        raise ValueError(
            f"{what}: student has {s.shape[1]} heads, teacher {t.shape[1]}; this loss needs equal "
            "head counts (use self_relation_kl with relation heads for differing counts)"
        )
    if s.shape != t.shape:
        raise ValueError(f"{what}: shapes differ: student {tuple(s.shape)}, teacher {tuple(t.shape)}")
    return _valid(mask, s.shape[0], s.shape[-1])


def attention_score_mse(s_scores: Tensor, t_scores: Tensor, mask: Tensor) -> Tensor:
    """TinyBERT attention loss: MSE between pre-softmax scores, (batch, heads, seq, seq) each.

    Masked entries (padded keys, and as in TinyBERT any score <= -100, i.e. additively masked)
    are set to 0 in both before the MSE. Mean over heads and all (real query, real key) pairs.
    Raises ValueError when head counts or shapes differ.
    """
    valid = _check_attention(s_scores, t_scores, mask, "attention_score_mse")
    pair = valid[:, None, :, None] & valid[:, None, None, :]  # (batch, 1, seq, seq)

    def clean(x: Tensor) -> Tensor:
        x = x.float()
        return torch.where(pair & (x > TINYBERT_MASK_THRESHOLD), x, torch.zeros_like(x))

    sq = (clean(s_scores) - clean(t_scores)).pow(2)  # (batch, heads, seq, seq)
    n = pair.sum() * s_scores.shape[1]
    return sq.sum() / n


def _row_kl(log_t: Tensor, log_s: Tensor, valid: Tensor) -> Tensor:
    """KL(t || s) per row over real keys, mean over heads and real query rows.

    ``log_t``, ``log_s``: (batch, heads, seq, seq) log-probabilities; ``valid``: (batch, seq) bool.
    """
    keys = valid[:, None, None, :]  # (batch, 1, 1, seq)
    terms = torch.where(keys, log_t.exp() * (log_t - log_s), torch.zeros_like(log_t))
    per_row = terms.sum(-1)  # (batch, heads, seq)
    rows = valid[:, None, :].expand_as(per_row)
    return per_row[rows].mean()


def attention_kl(s_probs: Tensor, t_probs: Tensor, mask: Tensor, eps: float = 1e-12) -> Tensor:
    """MiniLM attention transfer: KL(teacher || student) per head and query row.

    ``s_probs``, ``t_probs``: (batch, heads, seq, seq) attention probabilities. Sum over real keys,
    mean over heads and real query rows; probabilities are clamped at ``eps`` before the log.
    Raises ValueError when head counts or shapes differ.
    """
    valid = _check_attention(s_probs, t_probs, mask, "attention_kl")
    log_s = s_probs.float().clamp_min(eps).log()
    log_t = t_probs.float().clamp_min(eps).log()
    return _row_kl(log_t, log_s, valid)


def _relation_log_probs(x: Tensor, heads: int, valid: Tensor) -> Tensor:
    """log softmax(X_h X_h^T / sqrt(d_h)) with padded keys masked; x (batch, seq, hidden).

    Returns (batch, heads, seq, seq). Raises ValueError when ``heads`` does not divide hidden.
    """
    b, s, d = x.shape
    if heads < 1 or d % heads:
        raise ValueError(f"{heads} relation heads do not divide hidden size {d}")
    xh = x.float().view(b, s, heads, d // heads).transpose(1, 2)  # (batch, heads, seq, d_h)
    logits = xh @ xh.transpose(-1, -2) / math.sqrt(d // heads)  # (batch, heads, seq, seq)
    logits = logits.masked_fill(~valid[:, None, None, :], torch.finfo(logits.dtype).min)
    return F.log_softmax(logits, dim=-1)


def self_relation_kl(s_x: Tensor, t_x: Tensor, relation_heads: int, mask: Tensor) -> Tensor:
    """MiniLMv2 self-attention relation loss for one of Q, K or V.

    ``s_x`` (batch, seq, d_s), ``t_x`` (batch, seq, d_t): each split into ``relation_heads`` heads of
    its own width; relation = softmax(X_h X_h^T / sqrt(d_h)) over real keys; KL(teacher || student)
    mean over relation heads and real query rows. The models' own head counts do not matter.
    Raises ValueError on mismatched batch/seq or when ``relation_heads`` does not divide a width.
    """
    _check_tokens(s_x, t_x, "self_relation_kl")
    valid = _valid(mask, *s_x.shape[:2])
    log_s = _relation_log_probs(s_x, relation_heads, valid)
    log_t = _relation_log_probs(t_x, relation_heads, valid)
    return _row_kl(log_t, log_s, valid)


def value_relation_kl(s_values: Tensor, t_values: Tensor, s_heads: int, t_heads: int, mask: Tensor) -> Tensor:
    """MiniLM value-relation transfer: KL(teacher VR || student VR), VR = softmax(V_h V_h^T / sqrt(d_h)).

    ``s_values`` (batch, seq, d_s), ``t_values`` (batch, seq, d_t): value Linear outputs, split
    into each model's heads. Raises ValueError when ``s_heads != t_heads`` (MiniLM v1 needs equal
    head counts; use :func:`self_relation_kl` otherwise) or on mismatched shapes.
    """
    if s_heads != t_heads:
        raise ValueError(
            f"value_relation_kl: student has {s_heads} heads, teacher {t_heads}; MiniLM needs equal "
            "head counts (use self_relation_kl with a chosen number of relation heads)"
        )
    return self_relation_kl(s_values, t_values, s_heads, mask)
