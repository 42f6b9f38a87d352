"""Weights and outputs that are not numbers, refused where they would otherwise be read as answers.

An arg-max over a row holding NaN reads the first NaN's class (numpy and torch alike; a row of NaN
reads class 0), so a model whose weights or outputs are NaN would be scored, reported, written to a
file and served as one that answers the first class. Two checks stop that:

* when a model is loaded, each weight is checked to be a number (not NaN, not infinite): a damaged
  checkpoint, or one saved after its training diverged, is refused naming the file's folder and the
  first bad weight, before any work is done on it (:func:`refuse_nonfinite_weights`);
* outputs that are NaN all the same (a compressed form or bf16 overflowing on some inputs) are
  refused where they are read, naming the examples (:func:`refuse_nan_outputs`), as
  :class:`NanOutputs`, which carries their positions so a caller can name its own (a file's lines).

An infinite output is left alone: it still has an arg-max, and a head may mask with -inf.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from tinyplm.errors import ModelError, TinyplmError

#: How many example positions an error lists before "..." (the count is always given).
SHOWN = 5


class NanOutputs(TinyplmError):
    """A model's outputs are NaN for the examples at ``rows`` (positions in the batch it was given)."""

    def __init__(self, message: str, rows: tuple[int, ...]) -> None:
        super().__init__(message)
        self.rows = rows


def nonfinite_weight(model: nn.Module) -> str | None:
    """The name of the first floating-point parameter or buffer of ``model`` holding NaN or an
    infinity; None when every one is a number."""
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return None


def refuse_nonfinite_weights(model: nn.Module, source: str | Path) -> nn.Module:
    """``model``, loaded from ``source``; ``ModelError`` naming ``source`` and the weight when one
    is NaN or infinite (:func:`nonfinite_weight`)."""
    bad = nonfinite_weight(model)
    if bad is not None:
        raise ModelError(
            f"{source}: weight {bad} holds values that are not numbers (NaN or infinite), so every output "
            "computed from it would be too; the checkpoint was saved after its training diverged or the file "
            "is damaged: load the checkpoint from before that (or train it again at a lower learning rate)")
    return model


def nan_rows(outputs: torch.Tensor | np.ndarray) -> tuple[int, ...]:
    """Positions along the first axis of ``outputs`` whose values hold a NaN."""
    array = outputs.numpy() if isinstance(outputs, torch.Tensor) else np.asarray(outputs)
    if array.size == 0 or not np.issubdtype(array.dtype, np.floating):
        return ()
    flat = np.isnan(array.reshape(array.shape[0], -1)).any(axis=1)
    return tuple(int(i) for i in np.flatnonzero(flat))


def refuse_nan_outputs(outputs: torch.Tensor | np.ndarray, what: str, unit: str = "input") -> None:
    """Raise :class:`NanOutputs` when any of ``outputs``' rows (one per ``unit``) holds a NaN;
    ``what`` names what was read (a task's split, "the inputs given")."""
    rows = nan_rows(outputs)
    if rows:
        raise nan_outputs(rows, len(outputs), what, unit)


def nan_outputs(rows: tuple[int, ...], total: int, what: str, unit: str = "input") -> NanOutputs:
    """The :class:`NanOutputs` of ``rows`` (positions counted from 0) among ``total`` ``unit``s of ``what``."""
    shown = ", ".join(str(i) for i in rows[:SHOWN]) + (", ..." if len(rows) > SHOWN else "")
    return NanOutputs(
        f"{what}: the model's outputs are NaN for {len(rows)} of {total} {unit}s ({unit} {shown}, counted from 0): "
        "NaN has no class or answer, and read as one it would be the first; a compressed form or bf16 overflowing "
        "on these inputs does this: read them with the model's float form, in fp32", rows)
