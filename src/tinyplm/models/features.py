"""Named intermediate features of a Hugging Face encoder forward: what layer-wise distillation
compares, and what layer probes and attention-head analysis read.

:func:`forward_features` runs one forward of any ``transformers`` encoder of a family in the role
table (:mod:`tinyplm.models.roles`: a bare ``BertModel`` or a task / masked-LM model holding one)
and keeps only the features an objective asks for (:data:`FEATURES`):

- ``embeddings``: the embedding output ``hidden_states[0]`` (batch, seq, hidden)
- ``hidden``: the output of each encoder layer 1..L, each (batch, seq, hidden)
- ``queries``/``keys``/``values``: each layer's Q/K/V ``nn.Linear`` outputs before the head split,
  each (batch, seq, hidden), captured with forward hooks that are removed after the call
- ``attn_scores``: pre-softmax scores ``Q_h K_h^T / sqrt(head_dim) + mask``, (batch, heads, seq, seq)
- ``attn_probs``: ``softmax(attn_scores)``, (batch, heads, seq, seq)

Scores and probabilities are recomputed from the captured Q and K, so they do not depend on the
attention implementation (sdpa does not return attention weights) and are *pre-dropout*: in train
mode the model's own attention dropout does not touch them. The additive mask follows
``transformers``: ``torch.finfo(dtype).min`` at padded key positions, 0 elsewhere.

BERT and RoBERTa score ``Q K^T / sqrt(head_dim)``. DeBERTa's disentangled attention adds
content-to-position and position-to-content terms over relative distances and scales by
``sqrt(head_dim * (1 + number of those terms))``; :func:`disentangled_attention` adds them with the
layer's own ``disentangled_attention_bias`` (the relative-position table without its dropout), so
attention-based distillation sees the scores the model itself softmaxes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tinyplm.models import roles
from tinyplm.models.infer import output_logits
from tinyplm.models.role_table import Scores
from tinyplm.models.widths import attention_heads, role_output

FEATURES = ("embeddings", "hidden", "attn_scores", "attn_probs", "queries", "keys", "values")
_QKV = ("queries", "keys", "values")
_ROLE = {"queries": "query", "keys": "key", "values": "value"}


@dataclass
class Features:
    """What one forward returned; features that were not asked for are None."""

    logits: Tensor | None
    attention_mask: Tensor  # (batch, seq), 1 = real token, 0 = padding
    embeddings: Tensor | None = None  # (batch, seq, hidden)
    hidden: list[Tensor] | None = None  # layer 1..L, each (batch, seq, hidden)
    attn_scores: list[Tensor] | None = None  # per layer (batch, heads, seq, seq), pre-softmax
    attn_probs: list[Tensor] | None = None  # per layer (batch, heads, seq, seq), pre-dropout
    queries: list[Tensor] | None = None  # per layer (batch, seq, hidden)
    keys: list[Tensor] | None = None  # per layer (batch, seq, hidden)
    values: list[Tensor] | None = None  # per layer (batch, seq, hidden)


def num_layers(model: nn.Module) -> int:
    """Number of encoder layers. Raises ``ModelError`` (a ValueError) for a model the role table
    does not know."""
    return len(roles.layer_steps(model))


def hidden_size(model: nn.Module) -> int:
    """Hidden width of an encoder model."""
    return int(roles.base_model(model).config.hidden_size)


def num_heads(model: nn.Module) -> int:
    """Number of attention heads per layer (from the config)."""
    return int(roles.base_model(model).config.num_attention_heads)


def _check_want(want: Iterable[str]) -> frozenset[str]:
    """The asked features as a set. Raises ValueError naming the valid ones for an unknown name."""
    asked = frozenset(want)
    unknown = sorted(asked - set(FEATURES))
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; valid features are {list(FEATURES)}")
    return asked


def _mask_of(inputs: dict[str, Tensor]) -> Tensor:
    """The (batch, seq) attention mask of ``inputs``, all ones when none is given."""
    if inputs.get("attention_mask") is not None:
        return inputs["attention_mask"]
    ref = inputs.get("input_ids")
    if ref is None:
        ref = inputs.get("inputs_embeds")
    if ref is None:
        raise ValueError("inputs need `input_ids` or `inputs_embeds`")
    return torch.ones(ref.shape[:2], dtype=torch.long, device=ref.device)


def attention_from_qk(q: Tensor, k: Tensor, heads: int, mask: Tensor, factor: int = 1) -> tuple[Tensor, Tensor]:
    """Pre-softmax scores and probabilities from Q and K, scaled by ``1 / sqrt(head_dim * factor)``.

    ``q``, ``k``: (batch, seq, hidden); ``mask``: (batch, seq), 0 at padding.
    Returns (scores, probs), each (batch, heads, seq, seq); padded keys get ``finfo(dtype).min``.
    """
    b, s, d = q.shape
    hd = d // heads
    qh = q.view(b, s, heads, hd).transpose(1, 2)  # (batch, heads, seq, head_dim)
    kh = k.view(b, s, heads, hd).transpose(1, 2)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(hd * factor)  # (batch, heads, seq, seq)
    pad = (mask == 0)[:, None, None, :].to(scores.device)  # (batch, 1, 1, seq)
    additive = torch.zeros(pad.shape, dtype=scores.dtype, device=scores.device)
    additive = additive.masked_fill(pad, torch.finfo(scores.dtype).min)
    scores = scores + additive
    return scores, torch.softmax(scores, dim=-1)


def disentangled_attention(model: nn.Module, layer: nn.Module, q: Tensor, k: Tensor, heads: int,
                           mask: Tensor) -> tuple[Tensor, Tensor]:
    """Pre-softmax scores and probabilities of one DeBERTa layer from its Q and K outputs.

    ``q``, ``k``: (batch, seq, heads * head_dim); ``mask``: (batch, seq), 0 at padding.
    Returns (scores, probs), each (batch, heads, seq, seq): content scores plus the layer's
    relative-position terms, padded keys at ``finfo(dtype).min``. Rows of padded queries differ
    from DeBERTa's own (it masks them whole); losses mask those rows anyway.
    """
    attention = roles.self_attention(layer)
    path = roles.roles_of(model).layers.rpartition(".")[0]
    encoder = roles.base_model(model).get_submodule(path)  # holds the relative-position table
    b, s, d = q.shape
    hd = d // heads
    qh = q.view(b, s, heads, hd).transpose(1, 2).reshape(b * heads, s, hd)  # (batch*heads, seq, head_dim)
    kh = k.view(b, s, heads, hd).transpose(1, 2).reshape(b * heads, s, hd)
    factor = _deberta_factor(attention)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(hd * factor)  # (batch*heads, seq, seq)
    relative = encoder.get_rel_pos(q)
    scores = scores + attention.disentangled_attention_bias(qh, kh, relative, encoder.get_rel_embedding(), factor)
    scores = scores.view(b, heads, s, s)
    pad = (mask == 0)[:, None, None, :].to(scores.device)  # (batch, 1, 1, seq)
    scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
    return scores, torch.softmax(scores, dim=-1)


def position_bias_attention(model: nn.Module, layer: nn.Module, q: Tensor, k: Tensor, heads: int,
                            mask: Tensor) -> tuple[Tensor, Tensor]:
    """Pre-softmax scores and probabilities of one MPNet layer: ``Q K^T / sqrt(head_dim)`` plus the
    encoder's relative-position bias (one learned value per head and distance bucket).

    ``q``, ``k``: (batch, seq, heads * head_dim); ``mask``: (batch, seq). Returns (scores, probs),
    each (batch, heads, seq, seq), padded keys at ``finfo(dtype).min``."""
    path = roles.roles_of(model).layers.rpartition(".")[0]
    encoder = roles.base_model(model).get_submodule(path)  # holds the relative-position bias table
    b, s, d = q.shape
    hd = d // heads
    qh = q.view(b, s, heads, hd).transpose(1, 2)  # (batch, heads, seq, head_dim)
    kh = k.view(b, s, heads, hd).transpose(1, 2)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(hd) + encoder.compute_position_bias(q)  # (b, heads, s, s)
    pad = (mask == 0)[:, None, None, :].to(scores.device)  # (batch, 1, 1, seq)
    scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
    return scores, torch.softmax(scores, dim=-1)


def _plain(_model: nn.Module, _layer: nn.Module, q: Tensor, k: Tensor, heads: int, mask: Tensor):
    return attention_from_qk(q, k, heads, mask)


#: How each kind of attention scores is recomputed from a layer's Q and K (the role table's ``scores``).
def _deberta_factor(attention: nn.Module) -> int:
    """DeBERTa's score scale is ``1 / sqrt(head_dim * factor)``, one more for each of ``c2p`` and
    ``p2c`` in ``pos_att_type``, whether or not the layer adds relative-position terms."""
    return 1 + len({"c2p", "p2c"} & set(attention.pos_att_type or ()))


def _disentangled(model: nn.Module, layer: nn.Module, q: Tensor, k: Tensor, heads: int, mask: Tensor):
    """DeBERTa's scores; content only for a layer built without relative attention (still scaled as
    its ``pos_att_type`` says)."""
    attention = roles.self_attention(layer)
    if getattr(attention, "relative_attention", False):
        return disentangled_attention(model, layer, q, k, heads, mask)
    return attention_from_qk(q, k, heads, mask, _deberta_factor(attention))


_SCORES = {Scores.PLAIN: _plain, Scores.DISENTANGLED: _disentangled,
           Scores.POSITION_BIAS: position_bias_attention}


def _layer_attention(model: nn.Module, layer: nn.Module, q: Tensor, k: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """(scores, probs) of one layer, by its family's attention (see the module docstring)."""
    return _SCORES[roles.roles_of(model).scores](model, layer, q, k, attention_heads(layer), mask)


def _hook_qkv(model: nn.Module, names: Iterable[str], store: dict[str, list[Tensor]]) -> list:
    """Register forward hooks storing each layer's Q/K/V Linear outputs; returns the handles.

    Only the first call of each projection per self-attention call is kept: DeBERTa (with
    ``share_att_key``) runs its query/key projections a second time on the relative-position
    table. A module shared by several layers (ALBERT-style) is hooked once, so it stores one output
    per call, i.e. per layer that uses it, in layer order."""
    handles = []
    seen: set[str] = set()  # projections already stored during the running self-attention call
    stack = roles.layer_steps(model)
    attentions = {id(m): m for m in (roles.self_attention(layer) for layer in stack)}
    for attention in attentions.values():
        handles.append(attention.register_forward_pre_hook(lambda _m, _i: seen.clear()))

    def keep(name: str, layer: nn.Module, out: Tensor) -> None:
        if name not in seen:
            seen.add(name)
            store[name].append(role_output(layer, _ROLE[name], out))  # a fused [Q; K; V]: its third

    for name in names:
        store[name] = []
        linears = {id(m): (m, layer) for layer in stack for m in (roles.layer_linear(layer, _ROLE[name]),)}
        for linear, layer in linears.values():
            handles.append(linear.register_forward_hook(lambda _m, _i, out, n=name, x=layer: keep(n, x, out)))
    return handles


def forward_features(model: nn.Module, inputs: dict[str, Tensor], want: Iterable[str]) -> Features:
    """Run ``model(**inputs)`` once and return the asked features (others None).

    ``inputs`` are the usual model kwargs (``input_ids``, ``attention_mask``, ...); ``want`` names
    features from :data:`FEATURES`. Hooks are registered only for Q/K/V when needed (also for
    ``attn_scores``/``attn_probs``, computed from Q and K) and always removed, even on error.
    Raises ValueError for an unknown feature name, ``ModelError`` (a ValueError) for attention
    features of a family whose scores are not recomputed (ModernBERT), or for a model of a
    family the role table does not know.
    """
    asked = _check_want(want)
    stack = roles.layer_steps(model)  # as the model is: reading features must not unshare ALBERT's group
    mask = _mask_of(inputs)
    need_attn = bool(asked & {"attn_scores", "attn_probs"})
    if need_attn:
        roles.require(model, roles.Stage.ATTENTION_FEATURES, "distilling or analysing attention scores")
    capture = [n for n in _QKV if n in asked or (need_attn and n in ("queries", "keys"))]
    store: dict[str, list[Tensor]] = {}
    handles = _hook_qkv(model, capture, store)
    try:
        kwargs = {**inputs, "output_hidden_states": bool(asked & {"hidden", "embeddings"})}
        out = model(**kwargs)
    finally:
        for h in handles:
            h.remove()
    states = getattr(out, "hidden_states", None)
    has_head = hasattr(out, "logits") or hasattr(out, "start_logits")
    feats = Features(logits=output_logits(out) if has_head else None, attention_mask=mask)
    if "embeddings" in asked:
        feats.embeddings = states[0]
    if "hidden" in asked:
        feats.hidden = list(states[1:])
    if need_attn:
        qkl = zip(store["queries"], store["keys"], stack, strict=True)
        pairs = [_layer_attention(model, layer, q, k, mask) for q, k, layer in qkl]
        feats.attn_scores = [p[0] for p in pairs] if "attn_scores" in asked else None
        feats.attn_probs = [p[1] for p in pairs] if "attn_probs" in asked else None
    for name in _QKV:
        if name in asked:
            setattr(feats, name, store[name])
    return feats
