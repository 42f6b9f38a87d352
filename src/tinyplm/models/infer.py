"""Batched inference and precision choice, shared by training, caching and evaluation."""

from __future__ import annotations

import contextlib
import os
from functools import lru_cache

import numpy as np
import torch

from tinyplm.tasks.encoding import Encoded, collate, length_sorted_batches, model_inputs, padded_width


def output_logits(output) -> torch.Tensor:
    """A model output's logits in one tensor: ``.logits`` (classifier ``(batch, labels)``, tagger
    ``(batch, seq, labels)``), a question-answering head's start and end logits stacked on the
    last axis ``(batch, seq, 2)``, or an embedding model's vectors ``(batch, dim)`` (its output is the
    tensor itself): the form every loss, cache and export here uses."""
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if logits is not None:
        return logits
    return torch.stack([output.start_logits, output.end_logits], dim=-1)


#: The switch that decides what ``precision: auto`` means, whatever the CPU: ``on`` (bf16 autocast, as
#: on a CPU with native bf16), ``off`` (fp32, as on one without). Unset: the CPU decides. CI runs the
#: tests both ways, so a CPU without native bf16 cannot hide a failure that only bf16 shows.
BF16_SWITCH = "TINYPLM_BF16"
_SWITCH_VALUES = {"on": True, "1": True, "true": True, "off": False, "0": False, "false": False}


@lru_cache(maxsize=1)
def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 matmuls (AVX512-BF16 or AMX); then autocast pays off."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def forced_bf16() -> bool | None:
    """What :data:`BF16_SWITCH` forces ``auto`` to (True/False), or None when it is unset.

    Raises ``ValueError`` naming the variable and the values it takes for anything else."""
    raw = os.environ.get(BF16_SWITCH, "").strip().lower()
    if not raw:
        return None
    if raw not in _SWITCH_VALUES:
        raise ValueError(f"{BF16_SWITCH}={os.environ[BF16_SWITCH]!r}: expected on or off (or unset: the CPU decides)")
    return _SWITCH_VALUES[raw]


def use_bf16(precision: str) -> bool:
    """Resolve a precision ('auto' | 'bf16' | 'fp32') to whether bf16 autocast is on: 'auto' is
    bf16 where the CPU has native bf16, unless :data:`BF16_SWITCH` forces it on or off."""
    if precision == "fp32":
        return False
    if precision == "bf16":
        return True
    if precision != "auto":
        raise ValueError(f"precision {precision!r}: expected auto, bf16 or fp32")
    forced = forced_bf16()
    return cpu_supports_bf16() if forced is None else forced


def precision_name(bf16: bool) -> str:
    """The name results record for a computation with (``bf16``) or without autocast."""
    return "bf16" if bf16 else "fp32"


def precision_facts() -> dict[str, object]:
    """What decides ``auto`` on this machine, for results.json: native bf16, and the switch."""
    return {"bf16_native": cpu_supports_bf16(), "bf16_switch": os.environ.get(BF16_SWITCH) or None,
            "auto_means": precision_name(use_bf16("auto"))}


def autocast(bf16: bool) -> contextlib.AbstractContextManager:
    """CPU bf16 autocast when ``bf16`` else a no-op context."""
    return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


#: The attribute a model class sets to the torch threads its forward passes run best on (see
#: :func:`model_threads`); absent: the process's setting.
THREADS_ATTR = "forward_threads"


@contextlib.contextmanager
def model_threads(model: object):
    """Run the block on the torch threads ``model`` asks for (its :data:`THREADS_ATTR`, never more
    than the process's setting), then restore the setting. A static student's forward pass takes
    microseconds: spread over the cores it gains nothing, while torch's idle OpenMP workers keep
    spinning on the cores that the tokenizer of the next batch needs (docs/results/pareto.md)."""
    wanted, before = getattr(model, THREADS_ATTR, None), torch.get_num_threads()
    if not wanted or wanted >= before:
        yield
        return
    torch.set_num_threads(wanted)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.inference_mode()
def predict_logits(model: torch.nn.Module, enc: Encoded, batch_size: int = 64, bf16: bool = False) -> torch.Tensor:
    """Logits for every example of ``enc`` in its original order -> float32 ``(N, num_labels)``;
    per-token heads give ``(N, width, K)``, zero past each example's end, ``width`` the longest
    example rounded up as :func:`collate` rounds (so any batch's logits fit).

    Batches are formed from length-sorted examples so padding is minimal; the passes run on the
    threads the model asks for (:func:`model_threads`).
    """
    was_training = model.training
    if was_training:  # each switch walks every submodule, which shows beside a static student's short pass
        model.eval()
    out: torch.Tensor | None = None
    with model_threads(model):
        for idx in length_sorted_batches(enc, batch_size):
            batch = collate(enc, idx)
            with autocast(bf16):
                logits = output_logits(model(**model_inputs(batch))).float()
            if out is None:
                shape = (len(enc),) if logits.dim() == 2 else (len(enc), padded_width(int(enc.lengths().max())))
                out = torch.zeros((*shape, logits.shape[-1]), dtype=torch.float32)
            if logits.dim() == 3:  # padding positions inside the batch are zeroed too (whatever they held: NaN)
                pad = batch["attention_mask"][..., None] == 0
                out[batch["index"], : logits.shape[1]] = logits.masked_fill(pad, 0.0)
            else:
                out[batch["index"]] = logits
    if was_training:
        model.train()
    return out if out is not None else torch.empty((0, 0))


def logits_to_predictions(logits: torch.Tensor | np.ndarray, is_regression: bool) -> np.ndarray:
    """argmax class ids, or the single regression output."""
    arr = logits.numpy() if isinstance(logits, torch.Tensor) else np.asarray(logits)
    return arr[:, 0] if is_regression else arr.argmax(-1)
