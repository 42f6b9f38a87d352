"""Widths of one encoder layer read through the role table, and which rows of a module a role owns.

A family may fuse query, key and value into one Linear yielding ``[Q; K; V]`` (ModernBERT's
``Wqkv``) or gate its FFN (``Wi`` yields ``[input; gate]``): the module that plays a role is then
wider than the role. Code that counts heads or neurons, slices them or reads a role's output asks
here instead of reading ``out_features``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tinyplm.models import roles


def attention_width(layer: nn.Module) -> int:
    """Width of the layer's attention (heads x head width): the query's outputs, a third of a fused
    ``[Q; K; V]`` Linear's."""
    width = roles.layer_linear(layer, "query").out_features
    return width // 3 if roles.roles_of_layer(layer).fused_qkv else width


def attention_heads(layer: nn.Module) -> int:
    """Number of attention heads the layer has now (a pruned layer's are fewer)."""
    return attention_width(layer) // head_dim(layer)


def head_dim(layer: nn.Module) -> int:
    """Width of one attention head of the layer."""
    return int(getattr(roles.self_attention(layer), roles.roles_of_layer(layer).head_dim))


def ffn_width(layer: nn.Module) -> int:
    """Number of FFN neurons: the FFN input Linear's outputs, half of a gated one's."""
    width = roles.layer_linear(layer, "ffn_in").out_features
    return width // 2 if roles.roles_of_layer(layer).gated_ffn else width


def role_rows(layer: nn.Module, role: str, index: Tensor) -> Tensor:
    """The output rows of the module playing ``role`` that ``index`` (a 1-D tensor of head-dim or
    neuron indices of that role) owns: itself, shifted to the role's third of a fused ``[Q; K; V]``
    Linear, or repeated in both halves of a gated FFN input."""
    family = roles.roles_of_layer(layer)
    if family.fused_qkv and role in ("query", "key", "value"):
        return index + ("query", "key", "value").index(role) * attention_width(layer)
    if family.gated_ffn and role == "ffn_in":
        return torch.cat([index, index + ffn_width(layer)])
    return index


def role_output(layer: nn.Module, role: str, out: Tensor) -> Tensor:
    """The part of ``out`` (the output of :func:`layer_linear` ``role``, (..., width)) that is the
    role's own: a third of a fused ``[Q; K; V]`` output, else ``out`` itself."""
    if roles.roles_of_layer(layer).fused_qkv and role in ("query", "key", "value"):
        return out.chunk(3, dim=-1)[("query", "key", "value").index(role)]
    return out
