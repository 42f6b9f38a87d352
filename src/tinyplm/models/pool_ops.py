"""Pooling token vectors into one vector with sentence-transformers' own arithmetic (its
``Pooling._forward_padded``, one mode, no prompt): the modes (:class:`PoolMode`) and :func:`pool`.
:mod:`tinyplm.models.pooling` reads which mode a checkpoint uses."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import torch
from torch import Tensor

from tinyplm.errors import TinyplmError


class PoolMode(StrEnum):
    """How token vectors become one vector (ST's pooling mode names)."""

    MEAN = "mean"
    CLS = "cls"
    MAX = "max"
    LASTTOKEN = "lasttoken"
    MEAN_SQRT_LEN_TOKENS = "mean_sqrt_len_tokens"
    WEIGHTEDMEAN = "weightedmean"


def _accumulation(hidden: Tensor) -> torch.dtype:
    return torch.float32 if hidden.dtype in (torch.float16, torch.bfloat16) else hidden.dtype


def _mean(hidden: Tensor, mask: Tensor, sqrt: bool = False) -> Tensor:
    weights = mask.unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
    total = (hidden * weights).sum(dim=1, dtype=_accumulation(hidden))  # (batch, hidden)
    count = torch.clamp(weights.sum(dim=1, dtype=_accumulation(hidden)), min=1e-9)  # (batch, 1)
    return (total / (torch.sqrt(count) if sqrt else count)).to(hidden.dtype)


def _cls(hidden: Tensor, mask: Tensor) -> Tensor:
    first = mask.to(torch.int).argmax(dim=1)  # (batch,) the first real position (left padding too)
    return torch.gather(hidden, 1, first.view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])).squeeze(1)


def _max(hidden: Tensor, mask: Tensor) -> Tensor:
    padded = mask.unsqueeze(-1).expand_as(hidden).to(hidden.dtype) == 0
    return hidden.masked_fill(padded, float("-inf")).max(dim=1).values


def _weightedmean(hidden: Tensor, mask: Tensor) -> Tensor:
    acc = _accumulation(hidden)
    weights = torch.arange(1, hidden.shape[1] + 1, device=hidden.device, dtype=acc).view(1, -1, 1)
    if mask.numel():  # positions count from the first real token
        weights = weights - mask.to(torch.int32).argmax(dim=1).view(-1, 1, 1)
    weighted = mask.unsqueeze(-1).to(acc) * weights  # (batch, seq, 1)
    total = (hidden * weighted).sum(dim=1)
    return (total / torch.clamp(weighted.sum(dim=1), min=1e-9)).to(hidden.dtype)


def _lasttoken(hidden: Tensor, mask: Tensor) -> Tensor:
    seq = hidden.shape[1]
    values, back = mask.flip(1).max(1)  # back: distance of the last real position from the end
    back = torch.where(values == 0, seq - 1, back)
    index = (seq - back - 1).view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
    masked = hidden * mask.unsqueeze(-1).expand_as(hidden).to(hidden.dtype)
    return torch.gather(masked, 1, index).squeeze(1)


#: Pool mode -> its function of (hidden (batch, seq, hidden), mask (batch, seq)) -> (batch, hidden).
POOLERS: dict[PoolMode, Callable[[Tensor, Tensor], Tensor]] = {
    PoolMode.MEAN: _mean,
    PoolMode.MEAN_SQRT_LEN_TOKENS: lambda hidden, mask: _mean(hidden, mask, sqrt=True),
    PoolMode.CLS: _cls,
    PoolMode.MAX: _max,
    PoolMode.WEIGHTEDMEAN: _weightedmean,
    PoolMode.LASTTOKEN: _lasttoken,
}


def pool(hidden: Tensor, mask: Tensor, mode: PoolMode) -> Tensor:
    """Pool token vectors ``hidden`` ``(batch, seq, hidden)`` under ``mask`` ``(batch, seq)`` (1 = real
    token) into ``(batch, hidden)`` as ST does: mean over real tokens (count clamped at ``1e-9``),
    ``mean_sqrt_len_tokens`` (sum over the root of the count), ``cls`` (first real token), ``max``
    (padding set to ``-inf`` first), ``weightedmean`` (weights 1, 2, ... from the first real token),
    ``lasttoken`` (the last real token). Raises ``TinyplmError`` when the shapes do not fit."""
    if hidden.dim() != 3 or tuple(mask.shape) != tuple(hidden.shape[:2]):
        raise TinyplmError(f"pool: expected hidden (batch, seq, hidden) and mask (batch, seq), got "
                           f"{tuple(hidden.shape)} and {tuple(mask.shape)}")
    return POOLERS[PoolMode(mode)](hidden, mask)
