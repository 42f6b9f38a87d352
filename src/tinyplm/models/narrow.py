"""Copy chosen teacher layers into a narrower student of the teacher's family (width-pruned initialisation).

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

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.shape import head_size, keep_heads
from tinyplm.models.widths import attention_heads, role_rows

#: The config key of a width-pruned student that lists, per student channel, the teacher channel
#: it was copied from (saved in config.json; distillation starts its projections from it).
TEACHER_CHANNELS = "tinyplm_teacher_channels"


def _top(scores: Tensor, k: int) -> Tensor:
    """Indices of the ``k`` largest scores, in increasing index order."""
    return torch.sort(torch.topk(scores, k).indices).values


def residual_channels(src: nn.Module, layers: list[int], width: int) -> Tensor:
    """The ``width`` residual channels of encoder ``src`` (a bare or task model) whose LayerNorms
    weigh most (the embeddings' and those of the listed ``layers``; not the embeddings' where an
    E -> H projection follows them, as in ELECTRA and ALBERT) -> sorted ``(width,)`` indices."""
    norms = [] if roles.embeddings_project(src) is not None else [roles.embedding_norm(src)]
    stack = roles.layers(src)
    for i in layers:
        norms += [roles.layer_norm(stack[i], role) for role in roles.NORM_ROLES]
    score = sum(torch.sqrt(n.weight.float() ** 2 + (0 if n.bias is None else n.bias.float()) ** 2) for n in norms)
    return _top(score, width)


def head_dims(a: Tensor, b: Tensor, heads: int, keep: int) -> Tensor:
    """Per head, the ``keep`` of its dimensions with the largest ``|a row| * |b column-or-row|``.

    ``a`` and ``b`` score one dimension each per index along dim 0 (rows of W_q and W_k, or rows of
    W_v and columns of W_o transposed); returns flat indices, head by head."""
    size = a.shape[0] // heads
    score = (a.float().norm(dim=1) * b.float().norm(dim=1)).view(heads, size)
    picked = [_top(score[h], keep) + h * size for h in range(heads)]
    return torch.cat(picked)


def strongest_heads(layer: nn.Module, keep: int, size: int) -> list[int]:
    """The ``keep`` heads (``size`` wide each) of one encoder layer that weigh most: a head scores
    its share of the layer's ``|W_q row| * |W_k row|`` plus its share of ``|W_v row| * |W_o column|``
    (the measures :func:`head_dims` ranks a head's dimensions by, summed over the head) -> sorted indices."""
    total = attention_heads(layer)
    index = torch.arange(total * size)

    def rows(role: str) -> Tensor:
        return roles.layer_linear(layer, role).weight[role_rows(layer, role, index)].float().norm(dim=1)

    out = roles.layer_linear(layer, "attn_out").weight[:, index].float().norm(dim=0)
    qk = (rows("query") * rows("key")).view(total, size).sum(1)
    vo = (rows("value") * out).view(total, size).sum(1)
    score = qk / qk.sum().clamp_min(1e-12) + vo / vo.sum().clamp_min(1e-12)
    return _top(score, keep).tolist()


@torch.no_grad()
def keep_strongest_heads(model: nn.Module, keep: int) -> list[list[int]]:
    """Physically keep the ``keep`` strongest heads (:func:`strongest_heads`) of every encoder layer
    of ``model``, as ``prune_heads`` would, before any training -> the kept heads per layer.

    A student that starts on its final head count keeps what it learns, where one pruned after
    training loses part of it (the demo's 2-layer runs: docs/results/demo.md). Raises
    ``ModelError`` for a family whose heads cannot be removed per layer (see the role table) or a
    ``keep`` above a layer's head count."""
    roles.require(model, roles.Stage.PRUNE_HEADS, "keeping the strongest heads (shape.keep_heads)")
    size, kept = head_size(model), []
    for layer in roles.layers(model):
        total = attention_heads(layer)
        if keep > total:
            raise ModelError(f"shape.keep_heads {keep} exceeds the {total} heads of a layer")
        kept.append(strongest_heads(layer, keep, size))
        if keep < total:
            keep_heads(layer, kept[-1], size)
    return kept


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
    if dst.bias is not None:
        dst.bias.copy_(src.bias[keep])


def _copy_layer(s: nn.Module, t: nn.Module, keep: Tensor, heads: int, scale: float) -> None:
    """Fill student layer ``s`` from teacher layer ``t``: ``keep`` residual channels, per head the
    query/key and value/output dimensions that score highest, the heaviest FFN neurons."""
    lin = {role: roles.layer_linear(t, role) for role in roles.LINEAR_ROLES}
    mine = {role: roles.layer_linear(s, role) for role in roles.LINEAR_ROLES}
    d_s = mine["query"].out_features // heads
    qk = head_dims(lin["query"].weight, lin["key"].weight, heads, d_s)
    vo = head_dims(lin["value"].weight, lin["attn_out"].weight.T, heads, d_s)
    _copy_linear(mine["query"], lin["query"], qk, keep, scale)
    _copy_linear(mine["key"], lin["key"], qk, keep)
    _copy_linear(mine["value"], lin["value"], vo, keep)
    _copy_linear(mine["attn_out"], lin["attn_out"], keep, vo)
    w_in, w_out = lin["ffn_in"].weight, lin["ffn_out"].weight
    ffn = _top(w_in.float().norm(dim=1) * w_out.float().norm(dim=0), mine["ffn_in"].out_features)
    _copy_linear(mine["ffn_in"], lin["ffn_in"], ffn, keep)
    _copy_linear(mine["ffn_out"], lin["ffn_out"], keep, ffn)
    for role in roles.NORM_ROLES:
        _copy_norm(roles.layer_norm(s, role), roles.layer_norm(t, role), keep)


@torch.no_grad()
def copy_narrowed_layers(student: nn.Module, teacher: nn.Module, layers: list[int]) -> None:
    """Fill ``student`` (a narrower model of the teacher's family, with its head count) from the
    teacher's embeddings, the listed encoder layers, pooler, task head and any other encoder tensor
    of the same shape (MPNet's relative-position bias); the kept residual channels are recorded in
    its config under :data:`TEACHER_CHANNELS`. Where an E -> H projection follows the embeddings
    (ELECTRA, ALBERT) the embeddings are copied whole and the projection keeps the channels' rows.

    Raises ``ModelError`` for a family whose layers cannot be narrowed (see the role table)."""
    roles.require(student, roles.Stage.NARROW)
    src, dst = roles.base_model(teacher), roles.base_model(student)
    heads = dst.config.num_attention_heads
    d_t = src.config.hidden_size // src.config.num_attention_heads
    d_s = dst.config.hidden_size // heads
    keep = residual_channels(src, layers, dst.config.hidden_size)
    _copy_embeddings(dst, src, keep)
    t_layers, s_layers = roles.layers(src), roles.layers(dst)
    for s_idx, t_idx in enumerate(layers):
        _copy_layer(s_layers[s_idx], t_layers[t_idx], keep, heads, math.sqrt(d_s / d_t))
    pooled, mine = roles.pooler(src), roles.pooler(dst)
    if pooled is not None and mine is not None:
        _copy_head(mine, pooled, keep, src.config.hidden_size)
    student_heads = roles.task_heads(student)
    for name, head in roles.task_heads(teacher).items():
        if name in student_heads:
            _copy_head(student_heads[name], head, keep, src.config.hidden_size)
    family = roles.roles_of(student)
    placed = tuple(f"{p}." for p in (family.embeddings, family.layers, family.pooler, family.embeddings_project) if p)
    own = dst.state_dict()
    rest = {k: v for k, v in src.state_dict().items()
            if not k.startswith(placed) and k in own and own[k].shape == v.shape}
    dst.load_state_dict(rest, strict=False)
    setattr(student.config, TEACHER_CHANNELS, keep.tolist())


def _copy_embeddings(dst: nn.Module, src: nn.Module, keep: Tensor) -> None:
    """The embedding tables and their norm: the kept channels, or whole with the rows of the E -> H
    projection that follows them."""
    s_emb, t_emb = roles.embeddings(dst), roles.embeddings(src)
    project = roles.embeddings_project(src)
    if project is not None:
        if roles.embeddings_project(dst) is None:
            raise ModelError(_no_projection(project.in_features, len(keep)))
        s_emb.load_state_dict(t_emb.state_dict())
        _copy_linear(roles.embeddings_project(dst), project, keep, None)
        return
    for name, table in s_emb.named_children():  # word, position and token-type tables
        if isinstance(table, nn.Embedding):
            table.weight.copy_(getattr(t_emb, name).weight[:, keep])
    _copy_norm(roles.embedding_norm(dst), roles.embedding_norm(src), keep)


def _copy_head(own: nn.Module, head: nn.Module, keep: Tensor, hidden: int) -> None:
    """Copy a pooler or task head (one Linear or several): a Linear's rows and columns of width
    ``hidden`` (the teacher's) keep the ``keep`` channels, the others (labels) are copied whole.
    A head whose Linear modules differ in number or labels is left as initialised."""
    pairs = list(zip((m for m in own.modules() if isinstance(m, nn.Linear)),
                     (m for m in head.modules() if isinstance(m, nn.Linear)), strict=False))
    if any(a.out_features != (len(keep) if b.out_features == hidden else b.out_features) for a, b in pairs):
        return
    for a, b in pairs:
        _copy_linear(a, b, keep if b.out_features == hidden else None, keep if b.in_features == hidden else None)


def _no_projection(embedding_width: int, width: int) -> str:
    return (f"the teacher projects its {embedding_width}-wide embeddings to its hidden width; a student {width} wide "
            f"has no such projection to narrow (choose a hidden width other than {embedding_width})")


def projection_problem(teacher_cfg: dict, hidden: int, heads: int) -> str | None:
    """Why a student ``hidden`` wide (``heads`` heads) narrowed from the teacher of config
    ``teacher_cfg`` would have no E -> H projection to take the teacher's (ELECTRA drops it when its
    width is its ``embedding_size``; ALBERT keeps it), from the family's own class built on the
    meta device (no memory): the refusal :func:`narrow_student` gives, before any work; None when
    there is none to take or the student has one."""
    from transformers import AutoConfig, AutoModel

    size = teacher_cfg.get("embedding_size")
    if not isinstance(size, int) or size == teacher_cfg.get("hidden_size") or hidden == teacher_cfg.get("hidden_size"):
        return None
    values = {k: v for k, v in teacher_cfg.items() if k not in ("model_type", "architectures", "transformers_version")}
    config = AutoConfig.for_model(teacher_cfg["model_type"], **{**values, "hidden_size": hidden,
                                                                "num_attention_heads": heads, "num_hidden_layers": 1})
    with torch.device("meta"):
        student = AutoModel.from_config(config)
    return _no_projection(size, hidden) if roles.embeddings_project(student) is None else None

