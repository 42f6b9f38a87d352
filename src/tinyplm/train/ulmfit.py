"""ULMFiT (Howard & Ruder 2018) for an encoder classifier: layer groups from the top, discriminative
learning rates, gradual unfreezing and the slanted-triangular schedule.

Group 0 is everything above the encoder layers (task head, pooler, and any learned part of the
objective), group 1 the top layer, ..., group L the first layer, group L+1 the embeddings. Group k's
learning rate is ``lr / lr_decay**k``. At step s (0-based) the groups ``0 .. s // every`` train and
the rest are frozen (``requires_grad`` off, so backpropagation stops above them).

Written here rather than taken from fastai: fastai's ``freeze_to``/``fit_one_cycle`` drive its own
``Learner``; what is needed is a parameter partition and a function of the step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from torch import nn

from tinyplm.config.finetune import MethodOptions
from tinyplm.models import roles
from tinyplm.train.progress import JsonlLog


def layer_groups(model: nn.Module) -> list[list[nn.Parameter]]:
    """The model's parameters by ULMFiT group, top first: [head and the rest, layer L, ..., layer 1,
    embeddings], read off the model as it is (an ALBERT keeps its shared layer group). A parameter
    shared by several layer steps belongs to the highest one; a step left with no parameters of its
    own is no group (ALBERT's one shared group is one group), so every unfreezing step frees some."""
    steps = roles.layer_steps(model)
    below = [*[list(layer.parameters()) for layer in reversed(steps)], list(roles.embeddings(model).parameters())]
    seen: set[int] = set()
    groups: list[list[nn.Parameter]] = []
    for params in below:
        own = [p for p in params if id(p) not in seen]
        groups += [own] if own else []
        seen.update(id(p) for p in params)
    top = [p for p in model.parameters() if id(p) not in seen]
    return [top, *groups]


def discriminative_groups(trainable: nn.Module, student: nn.Module, weight_decay: float,
                          decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups of ``trainable`` (the student plus the objective's parts): per layer
    group k an ``lr_scale`` of ``decay**-k`` and a ``layer_group`` index, split into weight-decayed
    matrices and undecayed vectors/LayerNorms. Parameters outside ``student`` join group 0."""
    index = {id(p): k for k, params in enumerate(layer_groups(student)) for p in params}
    buckets: dict[tuple[int, bool], list[nn.Parameter]] = {}
    for name, p in trainable.named_parameters():
        no_decay = p.ndim < 2 or "LayerNorm" in name
        buckets.setdefault((index.get(id(p), 0), no_decay), []).append(p)
    return [{"params": params, "weight_decay": 0.0 if no_decay else weight_decay, "lr_scale": decay ** -k,
             "layer_group": k} for (k, no_decay), params in sorted(buckets.items())]


@dataclass
class Unfreezer:
    """Gradual unfreezing as a flag-setting callback: ``apply(step)`` makes groups ``0 .. step //
    every`` trainable and freezes the others; it owns no other logic."""

    groups: list[list[nn.Parameter]]
    every: int

    def trainable_groups(self, step: int) -> int:
        """How many groups (from the top) train at optimiser step ``step`` (0-based)."""
        return min(len(self.groups), 1 + step // max(1, self.every))

    def shortfall(self, steps: int) -> str | None:
        """None when every group trained by the last of ``steps`` optimiser steps, else what stayed
        frozen and what to change (a time budget often ends a stage before the default of one group
        per epoch reaches the embeddings)."""
        trained = self.trainable_groups(max(steps - 1, 0))
        if trained >= len(self.groups):
            return None
        return (f"method ulmfit trained {trained} of its {len(self.groups)} layer groups: the stage ended after "
                f"{steps} steps, one group more every {self.every} (method_options.unfreeze_every, default one "
                "epoch), so the layers below never trained; lower unfreeze_every or train longer")

    def apply(self, step: int) -> None:
        n = self.trainable_groups(step)
        for k, params in enumerate(self.groups):
            for p in params:
                p.requires_grad_(k < n)


def say_shortfall(unfreezer: Unfreezer | None, steps: int, stage: str, jsonl: JsonlLog) -> None:
    """Warn, and write an ``ulmfit_frozen`` event to the stage's log, when ``unfreezer`` (None: the
    stage is not ULMFiT) left groups that never trained (:meth:`Unfreezer.shortfall`)."""
    note = unfreezer.shortfall(steps) if unfreezer is not None else None
    if note:
        logging.getLogger(__name__).warning("%s: %s", stage, note)
        jsonl.write(event="ulmfit_frozen", note=note)


def stlr_factor(progress: float, options: MethodOptions) -> float:
    """The slanted-triangular LR factor at ``progress`` in [0, 1]: a linear rise over the first
    ``stlr_cut`` of training from ``1/stlr_ratio`` to 1, then a linear fall back to ``1/stlr_ratio``."""
    cut, ratio = options.stlr_cut, options.stlr_ratio
    progress = min(max(progress, 0.0), 1.0)
    p = progress / cut if progress < cut else 1.0 - (progress - cut) / (1.0 - cut)
    return (1.0 + p * (ratio - 1.0)) / ratio
