"""The optimiser of a training stage: AdamW over what trains, PyTorch's fused kernel where it can run."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tinyplm.config.finetune import Method
from tinyplm.config.schema import TrainSpec
from tinyplm.train.ulmfit import discriminative_groups


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """One AdamW group of weight-decayed matrices and one of undecayed vectors and LayerNorms."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def optimizer(trainable: nn.Module, model: nn.Module, spec: TrainSpec) -> torch.optim.Optimizer:
    """AdamW over what trains: ULMFiT's discriminative layer groups, else decayed / undecayed."""
    if spec.method is Method.ULMFIT:
        groups = discriminative_groups(trainable, model, spec.weight_decay, spec.method_options.lr_decay)
    else:
        groups = param_groups(trainable, spec.weight_decay)
    return adamw(groups, spec.lr)


#: Devices with PyTorch's fused AdamW kernel.
FUSED_DEVICES = frozenset({"cpu", "cuda", "xpu", "mps"})


def adamw(groups: list[dict[str, Any]], lr: float) -> torch.optim.AdamW:
    """AdamW with PyTorch's fused kernel where every parameter allows it, else its default.

    On CPU the fused kernel makes one pass over each tensor where the default makes several: the
    same update up to rounding, in less time. That matters most for a small student, whose step is
    mostly the optimiser's pass over its word table (11.7M of a 3-layer MiniLM student's 15M
    weights). What it saved, measured: docs/results/demo.md.
    """
    params = [p for g in groups for p in g["params"]]
    # PyTorch checks this only at the first step; checked here so that an odd parameter (a complex
    # one, one on a device without the kernel) falls back to the default instead of failing then.
    fused = all(torch.is_floating_point(p) and p.device.type in FUSED_DEVICES for p in params)
    return torch.optim.AdamW(groups, lr=lr, fused=fused or None)
