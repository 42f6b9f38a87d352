"""Copy chosen teacher layers into a narrower BERT student (width-pruned initialisation).

DistilBERT initialises its student from teacher layers, which needs the teacher's width. A student
narrower than its teacher (TinyBERT-4's hidden 312 against MiniLM's 384) would otherwise start from
random weights. Here it starts from the teacher's weights restricted to the most important

- residual channels (one choice shared by the embeddings, every layer and the heads),
- dimensions of each attention head (queries/keys together, values with the output projection),
- FFN neurons of each layer,

in the spirit of structured width pruning (Minitron, Sheared-LLaMA's init). Importance is read from
the weights alone, so the init is deterministic and needs no data:

- a residual channel scores the sum over the copied LayerNorms of ``sqrt(gamma^2 + beta^2)``
  (roughly the size of that channel in every normalised output);
- a query/key dimension scores ``|W_q row| * |W_k row|`` (its share of the attention logits), a
  value dimension ``|W_v row| * |W_o column|``, an FFN neuron ``|W_in row| * |W_out column|``.

The number of heads is kept, so each head keeps ``hidden // heads`` of its dimensions; the queries
are rescaled by ``sqrt(d_student / d_teacher)`` so that the ``1/sqrt(d)`` of attention keeps the
teacher's logit scale. LayerNorm statistics over fewer channels differ from the teacher's, so the
copy is a starting point for distillation, not a compressed teacher. ``torch.nn.utils.prune`` masks
weights in place and cannot change a Linear's shape, hence the index copies here.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

#: The config key of a width-pruned student that lists, per student channel, the teacher channel
#: it was copied from (saved in config.json; distillation starts its projections from it).
TEACHER_CHANNELS = "tinyplm_teacher_channels"


def _top(scores: Tensor, k: int) -> Tensor:
    """Indices of the ``k`` largest scores, in increasing index order."""
    return torch.sort(torch.topk(scores, k).indices).values


def residual_channels(src: nn.Module, layers: list[int], width: int) -> Tensor:
    """The ``width`` residual channels of BERT encoder ``src`` whose LayerNorms weigh most."""
    norms = [src.embeddings.LayerNorm]
    for i in layers:
        layer = src.encoder.layer[i]
        norms += [layer.attention.output.LayerNorm, layer.output.LayerNorm]
    score = sum(torch.sqrt(n.weight.float() ** 2 + n.bias.float() ** 2) for n in norms)
    return _top(score, width)


def head_dims(a: Tensor, b: Tensor, heads: int, keep: int) -> Tensor:
    """Per head, the ``keep`` of its dimensions with the largest ``|a row| * |b column-or-row|``.

    ``a`` and ``b`` score one dimension each per index along dim 0 (rows of W_q and W_k, or rows of
    W_v and columns of W_o transposed); returns flat indices, head by head."""
    size = a.shape[0] // heads
    score = (a.float().norm(dim=1) * b.float().norm(dim=1)).view(heads, size)
    picked = [_top(score[h], keep) + h * size for h in range(heads)]
    return torch.cat(picked)


def _copy_linear(dst: nn.Linear, src: nn.Linear, rows: Tensor | None, cols: Tensor | None, scale: float = 1.0) -> None:
    w = src.weight
    if rows is not None:
        w = w[rows]
    if cols is not None:
        w = w[:, cols]
    dst.weight.copy_(w * scale)
    if dst.bias is not None and src.bias is not None:
        dst.bias.copy_((src.bias if rows is None else src.bias[rows]) * scale)


def _copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm, keep: Tensor) -> None:
    dst.weight.copy_(src.weight[keep])
    dst.bias.copy_(src.bias[keep])


@torch.no_grad()
def copy_narrowed_layers(student: nn.Module, teacher: nn.Module, layers: list[int]) -> None:
    """Fill ``student`` (a narrower BERT with the teacher's head count) from the teacher's
    embeddings, the listed encoder layers, pooler and task head; the kept residual channels are
    recorded in its config under :data:`TEACHER_CHANNELS`."""
    src, dst = getattr(teacher, "bert", teacher), student.bert
    heads = dst.config.num_attention_heads
    d_t = src.config.hidden_size // src.config.num_attention_heads
    d_s = dst.config.hidden_size // heads
    keep = residual_channels(src, layers, dst.config.hidden_size)
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        getattr(dst.embeddings, name).weight.copy_(getattr(src.embeddings, name).weight[:, keep])
    _copy_norm(dst.embeddings.LayerNorm, src.embeddings.LayerNorm, keep)
    scale = math.sqrt(d_s / d_t)
    for s_idx, t_idx in enumerate(layers):
        t, s = src.encoder.layer[t_idx], dst.encoder.layer[s_idx]
        ta, sa = t.attention.self, s.attention.self
        qk = head_dims(ta.query.weight, ta.key.weight, heads, d_s)
        vo = head_dims(ta.value.weight, t.attention.output.dense.weight.T, heads, d_s)
        _copy_linear(sa.query, ta.query, qk, keep, scale)
        _copy_linear(sa.key, ta.key, qk, keep)
        _copy_linear(sa.value, ta.value, vo, keep)
        _copy_linear(s.attention.output.dense, t.attention.output.dense, keep, vo)
        _copy_norm(s.attention.output.LayerNorm, t.attention.output.LayerNorm, keep)
        w_in, w_out = t.intermediate.dense.weight, t.output.dense.weight
        ffn = _top(w_in.float().norm(dim=1) * w_out.float().norm(dim=0), s.intermediate.dense.out_features)
        _copy_linear(s.intermediate.dense, t.intermediate.dense, ffn, keep)
        _copy_linear(s.output.dense, t.output.dense, keep, ffn)
        _copy_norm(s.output.LayerNorm, t.output.LayerNorm, keep)
    if getattr(src, "pooler", None) is not None and dst.pooler is not None:
        _copy_linear(dst.pooler.dense, src.pooler.dense, keep, keep)
    for name in ("classifier", "qa_outputs"):
        head, mine = getattr(teacher, name, None), getattr(student, name, None)
        if head is not None and mine is not None and head.weight.shape[0] == mine.weight.shape[0]:
            _copy_linear(mine, head, None, keep)
    setattr(student.config, TEACHER_CHANNELS, keep.tolist())
