"""What every model loaded from a folder goes through before use: its float weights in fp32, each
of them a number."""

from __future__ import annotations

from pathlib import Path

import torch

from tinyplm.models.finite import refuse_nonfinite_weights


def in_fp32(model):
    """``model`` with its float weights in fp32. transformers 5 keeps the dtype they were saved in
    (``dtype="auto"``): a checkpoint saved in fp16 or bf16 would train there, losing most small
    updates to rounding, and be timed and reported as if it were fp32. Lower precisions are the
    runtimes' and autocast's to choose, measured as such. Cast after loading, and only when some
    weight is not fp32: asking ``from_pretrained`` for ``dtype=float32`` made every load slower,
    for the fp32 checkpoints that nearly all are."""
    if any(p.is_floating_point() and p.dtype != torch.float32 for p in model.parameters()):
        model = model.to(torch.float32)
    return model


def loaded(model, source: Path):
    """``model``, just loaded from ``source``, ready for use: its float weights in fp32
    (:func:`in_fp32`), each of them a number (:func:`~tinyplm.models.finite.refuse_nonfinite_weights`:
    ``ModelError`` naming ``source`` and the weight otherwise)."""
    return refuse_nonfinite_weights(in_fp32(model), source)
