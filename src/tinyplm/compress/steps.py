"""The registry of compression steps: recipe ``kind`` -> function that changes a model in place.

``apply_step(model, step, ctx)`` runs one step and returns what it did (for the report).
Recovery training after a step is not here: the run's stage machinery does it (see
``tinyplm.stages.run_compress``), so this package never imports the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from tinyplm.compress.importance import importance
from tinyplm.compress.structured import drop_layers, least_important_layers, prune_ffn, prune_heads
from tinyplm.config.compress import DropLayers, PruneFFN, PruneHeads
from tinyplm.tasks.encoding import Encoded


@dataclass
class CompressContext:
    """What steps may read: the task's training data, teacher logits on it (or None), the task kind."""

    train: Encoded
    teacher_logits: torch.Tensor | None
    is_regression: bool
    seed: int = 0


def _scores(model: nn.Module, step, ctx: CompressContext):
    return importance(model, ctx.train, batches=step.score_batches, batch_size=step.score_batch_size,
                      seed=ctx.seed, teacher_logits=ctx.teacher_logits, is_regression=ctx.is_regression)


def _prune_heads(model: nn.Module, step: PruneHeads, ctx: CompressContext) -> dict:
    return prune_heads(model, _scores(model, step, ctx), step.keep, step.scope)


def _prune_ffn(model: nn.Module, step: PruneFFN, ctx: CompressContext) -> dict:
    return prune_ffn(model, _scores(model, step, ctx), step.keep, step.scope)


def _drop_layers(model: nn.Module, step: DropLayers, ctx: CompressContext) -> dict:
    layers = step.layers if step.layers is not None else least_important_layers(_scores(model, step, ctx), step.count)
    return drop_layers(model, list(layers))


REGISTRY: dict[str, Callable[[nn.Module, object, CompressContext], dict]] = {
    "prune_heads": _prune_heads,
    "prune_ffn": _prune_ffn,
    "drop_layers": _drop_layers,
}


def apply_step(model: nn.Module, step, ctx: CompressContext) -> dict:
    """Run one compression step on ``model`` (in place) -> info for the report."""
    return REGISTRY[step.kind](model, step, ctx)
