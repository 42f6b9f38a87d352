"""Warming a served model up on every input shape it will meet, where its runtime needs it, and
what one more forward pass costs it.

OpenVINO's CPU plugin builds its kernels for each input shape the first time the shape runs: a
forward pass at a new ``(batch, width)`` costs several warm passes (torch shows no such step). A
server batches random requests, so its forward passes take any batch size up to ``--max-batch``
and any padded width up to the max length (a multiple of 8,
:func:`~tinyplm.tasks.encoding.padded_width`): hundreds of shapes, each paying once, in the first
minutes of serving (what a new shape cost: docs/results/code-choices.md). So before the server
says it is ready, :func:`warm_shapes` runs each of those shapes once (largest batches first),
within a time budget: 256 shapes (batch 32, max length 64) take a few seconds.

A batch of random requests runs in length groups that weigh a forward pass as so many padded
tokens (:func:`~tinyplm.inference.predictor.length_groups`): a pass's fixed cost over its cost per
token, which depends on the runtime far more than on the model's depth (both grow with it).
Fitting ``time = fixed + per_token * batch * width`` on warm shapes gives that weight:
:data:`~tinyplm.inference.predictor.PASS_OVERHEAD_TOKENS` (64) was fitted on MiniLM-L6 in
PyTorch, and int8 OpenVINO students, whose passes cost little per token, fitted larger weights
(the fit is too noisy on a shared machine to run at start-up). :data:`OPENVINO_PASS_TOKENS` (160)
is the weight random SST-2 batches ran fastest with on those students (the fits and the timings:
docs/results/code-choices.md).
"""

from __future__ import annotations

import time

import torch

from tinyplm.inference.predictor import PASS_OVERHEAD_TOKENS
from tinyplm.models.openvino import OvClassifier
from tinyplm.tasks.encoding import padded_width

#: The weight of a forward pass of an OpenVINO model, in padded tokens (see the module docstring).
OPENVINO_PASS_TOKENS = 160.0


def needs_shape_warm_up(model) -> bool:
    """Whether ``model``'s runtime builds kernels per input shape (see the module docstring)."""
    return isinstance(model, OvClassifier)


def shapes(max_batch: int, max_length: int) -> list[tuple[int, int]]:
    """Every ``(batch, width)`` a forward pass of at most ``max_batch`` examples of at most
    ``max_length`` tokens can have, largest batches first."""
    widths = sorted({min(padded_width(n), max_length) for n in range(1, max_length + 1)})  # as collate caps them
    return [(b, w) for b in range(max_batch, 0, -1) for w in widths]


def warm_shapes(model, max_batch: int, max_length: int, budget_s: float = 120.0) -> int:
    """Run ``model`` once at each of :func:`shapes` (all ones as token ids: the values do not
    matter, the shapes do) until ``budget_s`` is spent -> the shapes run."""
    start, done = time.perf_counter(), 0
    with torch.inference_mode():
        for batch, width in shapes(max_batch, max_length):
            if time.perf_counter() - start > budget_s:
                break
            ids = torch.ones((batch, width), dtype=torch.long)
            model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
            done += 1
    return done



def pass_overhead_tokens(model) -> float:
    """What one more forward pass costs ``model``, in padded tokens (see the module docstring)."""
    return OPENVINO_PASS_TOKENS if isinstance(model, OvClassifier) else PASS_OVERHEAD_TOKENS
