"""Structured pruning that really shrinks the model: attention heads, FFN neurons, whole layers.

Each function changes the model in place and returns what it did (for the report). Heads and
neurons are chosen by Taylor importance (:mod:`tinyplm.compress.importance`); the kept units are
copied into smaller ``nn.Linear`` modules (:mod:`tinyplm.models.shape`), so size and speed are
measured on a model that is physically smaller, and the saved config records the new shape.
"""

from __future__ import annotations

import torch
from torch import nn

from tinyplm.compress.importance import Importance, select
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.shape import head_size, keep_heads, keep_neurons, layer_shape
from tinyplm.models.widths import attention_heads, ffn_width


def prune_heads(model: nn.Module, scores: Importance, keep: float, scope: str = "global") -> dict:
    """Keep the ``keep`` fraction of attention heads with the highest importance (at least one
    per layer) -> ``{"heads_before", "heads_after", "kept"}``. Raises ``ModelError`` for a family
    whose heads cannot be removed per layer (MPNet: see the role table)."""
    roles.require(model, roles.Stage.PRUNE_HEADS)
    before = layer_shape(model)["heads"]
    ranked = scores.normalised().heads if scope == "global" else scores.heads
    kept = select(ranked, keep, scope)
    size = head_size(model)
    for layer, heads in zip(roles.layers(model), kept, strict=False):
        if len(heads) < attention_heads(layer):
            keep_heads(layer, heads, size)
    return {"heads_before": before, "heads_after": layer_shape(model)["heads"], "kept": kept}


def prune_ffn(model: nn.Module, scores: Importance, keep: float, scope: str = "layer") -> dict:
    """Keep the ``keep`` fraction of FFN neurons with the highest importance -> ``{"ffn_before",
    "ffn_after"}``. ``scope="layer"`` keeps the same fraction in every layer (one FFN width, so the
    model stays a plain Hugging Face BERT); ``"global"`` ranks neurons across layers."""
    before = layer_shape(model)["ffn"]
    ranked = scores.normalised().ffn if scope == "global" else scores.ffn
    for layer, neurons in zip(roles.layers(model), select(ranked, keep, scope), strict=False):
        if len(neurons) < ffn_width(layer):
            keep_neurons(layer, neurons)
    return {"ffn_before": before, "ffn_after": layer_shape(model)["ffn"]}


def layer_importance(scores: Importance) -> list[float]:
    """A layer's importance: the sum of its (unnormalised) head and neuron scores."""
    return [float(h.sum() + f.sum()) for h, f in zip(scores.heads, scores.ffn, strict=False)]


def drop_layers(model: nn.Module, layers: list[int]) -> dict:
    """Remove encoder layers (0-based) -> ``{"dropped", "layers_after"}``; the config's layer count
    follows, and per-layer config lists keep their kept layers' entries (ModernBERT's global/local
    ``layer_types``). Raises ``ModelError`` for an index out of range, when no layer would be left, or
    when the family needs its first layer kept (ModernBERT)."""
    stack = roles.layers(model)
    n = len(stack)
    bad = sorted({i for i in layers if not 0 <= i < n})
    if bad:
        raise ModelError(f"drop_layers: layers {bad} out of range; the model has layers 0..{n - 1}")
    drop = set(layers)
    if len(drop) >= n:
        raise ModelError(f"drop_layers: cannot drop all {n} layers")
    roles.select_layers(model, [i for i in range(n) if i not in drop])  # renumbers layer_idx, fixes the config
    return {"dropped": sorted(drop), "layers_after": n - len(drop)}


def least_important_layers(scores: Importance, count: int, keep_first: bool = False) -> list[int]:
    """The ``count`` layers with the lowest importance (sorted indices); never layer 0 with
    ``keep_first`` (a family whose first layer differs from the others, as ModernBERT's)."""
    ranked = [i for i in torch.tensor(layer_importance(scores)).argsort().tolist() if not (keep_first and i == 0)]
    return sorted(ranked[:count])
