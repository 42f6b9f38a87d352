"""Per-layer shapes that a Hugging Face ``BertConfig`` cannot say: heads and FFN width per layer.

Structured pruning leaves layers with different numbers of attention heads and FFN neurons. The
``transformers`` BERT modules run such layers unchanged (they infer the head count from the
projection widths), but build every layer from one ``num_attention_heads``/``intermediate_size``.
So a pruned model records its real shape in ``config.tinyplm_shape``::

    {"heads": [h_1, ..., h_L], "ffn": [f_1, ..., f_L]}

and :func:`build_shaped` rebuilds those modules before its weights are loaded: loading needs no
replay of the pruning. When every layer has the same FFN width and all heads, the shape *is* a
plain BERT config (``intermediate_size``), ``tinyplm_shape`` is dropped, and Hugging Face loads the
model by itself (:func:`hf_representable`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.factorized import FactorizedEmbedding, LowRankLinear, sharing_of, tie_shared
from tinyplm.models.widths import attention_heads, ffn_width, role_rows

SHAPE_KEY = "tinyplm_shape"


def head_size(model: nn.Module) -> int:
    """Width of one attention head (hidden / the config's head count; pruning keeps it)."""
    return model.config.hidden_size // model.config.num_attention_heads


def config_heads(config) -> list[int]:
    """The attention heads of each layer step as ``config`` describes them: its recorded shape
    (``tinyplm_shape``: a model with pruned or kept heads), else ``num_attention_heads`` in every layer."""
    recorded = getattr(config, SHAPE_KEY, None) or {}
    return list(recorded.get("heads") or [config.num_attention_heads] * config.num_hidden_layers)


def with_layer_shape(model: nn.Module):
    """``model.config``, or a shallow copy of it that records the model's real per-layer shape
    (:func:`layer_shape`) where the modules differ from what the config says (a student that kept
    fewer heads, a pruned model not yet saved): what a reader of the config alone must see."""
    import copy

    shape = layer_shape(model)
    if config_heads(model.config) == shape["heads"]:
        return model.config
    config = copy.copy(model.config)
    setattr(config, SHAPE_KEY, shape)
    return config


def layer_shape(model: nn.Module) -> dict[str, list[int]]:
    """The heads and FFN width of each encoder layer, read off the modules themselves (a shared
    group once per layer step that runs it)."""
    layers = roles.layer_steps(model)
    return {"heads": [attention_heads(layer) for layer in layers], "ffn": [ffn_width(layer) for layer in layers]}


def structure(model: nn.Module) -> dict:
    """Everything about the model's build that a ``BertConfig`` cannot say: per-layer heads and FFN
    widths, and where present ``ranks`` (low-rank Linear modules), ``embedding_rank`` and ``share``."""
    out: dict = layer_shape(model)
    ranks = {n: m.rank for n, m in model.named_modules() if isinstance(m, LowRankLinear)}
    if ranks:
        out["ranks"] = ranks
    emb = roles.word_embeddings(model)
    if isinstance(emb, FactorizedEmbedding):
        out["embedding_rank"] = emb.rank
    share = {} if roles.grouped(model) else sharing_of(model)  # ALBERT's own groups are in its config
    if any(owner != i for owners in share.values() for i, owner in enumerate(owners)):
        out["share"] = share
    return out


def hf_representable(model: nn.Module) -> bool:
    """True when a plain ``BertConfig`` describes the model (all heads, one FFN width, nothing
    factorized or shared)."""
    shape = structure(model)
    return (set(shape["heads"]) == {model.config.num_attention_heads} and len(set(shape["ffn"])) == 1
            and not ({"ranks", "embedding_rank", "share"} & set(shape)))


def record_shape(model: nn.Module) -> None:
    """Write the model's real structure into its config (before saving)."""
    shape = structure(model)
    key = roles.ffn_key(model.config)
    if hf_representable(model):
        setattr(model.config, key, shape["ffn"][0])
        if hasattr(model.config, SHAPE_KEY):
            delattr(model.config, SHAPE_KEY)
    else:
        setattr(model.config, key, max(shape["ffn"]))
        setattr(model.config, SHAPE_KEY, shape)


def _select(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A new Linear keeping ``index`` of its outputs (dim 0) or inputs (dim 1)."""
    if not isinstance(linear, nn.Linear):
        raise ModelError(f"cannot prune a {type(linear).__name__}: prune heads and neurons before "
                         "factorizing or quantizing")
    w = linear.weight.detach().index_select(dim, index).clone()
    out_f, in_f = w.shape
    new = nn.Linear(in_f, out_f, bias=linear.bias is not None, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        new.weight.copy_(w)
        if linear.bias is not None:
            new.bias.copy_(linear.bias.detach() if dim == 1 else linear.bias.detach().index_select(0, index))
    return new


def keep_heads(layer: nn.Module, heads: Sequence[int], size: int) -> None:
    """Keep only ``heads`` (0-based, sorted) of one encoder layer's self-attention, physically
    (Q/K/V rows, of a fused ``[Q; K; V]`` Linear too, the attention output's columns, and a family's
    other per-head projections).

    Raises ``ModelError`` when no head would be left or an index is out of range.
    """
    total = attention_heads(layer)
    heads = sorted(set(int(h) for h in heads))
    if not heads:
        raise ModelError("cannot remove every attention head of a layer; drop the layer instead")
    if heads[0] < 0 or heads[-1] >= total:
        raise ModelError(f"head index out of range: the layer has heads 0..{total - 1}, got {heads}")
    index = torch.cat([torch.arange(h * size, (h + 1) * size) for h in heads])
    rows: dict[int, tuple[str, nn.Module, list[torch.Tensor]]] = {}  # a fused Q/K/V module once, all its rows
    for role in ("query", "key", "value"):
        module = roles.layer_linear(layer, role)
        rows.setdefault(id(module), (role, module, []))[2].append(role_rows(layer, role, index))
    for role, module, parts in rows.values():
        roles.set_layer_linear(layer, role, _select(module, torch.cat(parts), 0))
    roles.set_layer_linear(layer, "attn_out", _select(roles.layer_linear(layer, "attn_out"), index, 1))
    for path, linear in roles.head_linears(layer).items():  # DeBERTa's unshared position projections
        roles.set_head_linear(layer, path, _select(linear, index, 0))
    attention = roles.self_attention(layer)
    for count in ("num_attention_heads", "n_heads"):  # what transformers' attention modules call it
        if hasattr(attention, count):
            setattr(attention, count, len(heads))
    if hasattr(attention, "all_head_size"):
        attention.all_head_size = len(heads) * size


def keep_neurons(layer: nn.Module, neurons: Sequence[int]) -> None:
    """Keep only ``neurons`` (0-based) of one layer's FFN: the FFN Linear pair shrinks (both halves
    of a gated input)."""
    total = ffn_width(layer)
    neurons = sorted(set(int(n) for n in neurons))
    if not neurons:
        raise ModelError("cannot remove every FFN neuron of a layer")
    if neurons[0] < 0 or neurons[-1] >= total:
        raise ModelError(f"FFN neuron index out of range: the layer has 0..{total - 1}")
    index = torch.tensor(neurons)
    rows = role_rows(layer, "ffn_in", index)
    roles.set_layer_linear(layer, "ffn_in", _select(roles.layer_linear(layer, "ffn_in"), rows, 0))
    roles.set_layer_linear(layer, "ffn_out", _select(roles.layer_linear(layer, "ffn_out"), index, 1))


def _layers_to_shape(model: nn.Module, shape: dict) -> Sequence[nn.Module]:
    """The module of each layer step :func:`apply_shape` resizes: a grouped encoder (an ALBERT saved
    with its shared group, e.g. with only its embeddings factorized) stays grouped where the shape
    keeps every step whole, as its weights are stored once; otherwise its layers are expanded."""
    steps = roles.layer_steps(model)
    whole = (not shape.get("share") and len(shape.get("heads") or steps) == len(steps)
             and all(h == attention_heads(s) for h, s in zip(shape.get("heads") or [], steps, strict=False))
             and all(f == ffn_width(s) for f, s in zip(shape.get("ffn") or [], steps, strict=False)))
    return steps if roles.grouped(model) and whole else roles.layers(model)


def apply_shape(model: nn.Module, shape: dict[str, list[int]]) -> None:
    """Resize a freshly built model's layers to ``shape`` (weights are loaded afterwards).

    Raises ``ModelError`` when the shape does not fit the config (layer count, head or FFN sizes).
    """
    layers = _layers_to_shape(model, shape)
    heads, ffn = shape.get("heads"), shape.get("ffn")
    for key, values in (("heads", heads), ("ffn", ffn)):
        if values is not None and len(values) != len(layers):
            raise ModelError(f"config {SHAPE_KEY}.{key} lists {len(values)} layers; the model has {len(layers)}")
    size = head_size(model)
    if shape.get("share"):  # shared layers are resized once, through their owner
        tie_shared(model, shape["share"])
    share = shape.get("share") or {}

    def borrowed(part: str, i: int) -> bool:
        return bool(share.get(part)) and share[part][i] != i

    for i, layer in enumerate(layers):
        if heads is not None and not borrowed("attention", i):
            if not 1 <= heads[i] <= model.config.num_attention_heads:
                raise ModelError(f"config {SHAPE_KEY}.heads[{i}] = {heads[i]} is not in "
                                 f"1..{model.config.num_attention_heads}")
            if heads[i] < attention_heads(layer):
                keep_heads(layer, range(heads[i]), size)
        width = ffn_width(layer)
        if ffn is not None and not borrowed("ffn", i):
            if not 1 <= ffn[i] <= width:
                raise ModelError(f"config {SHAPE_KEY}.ffn[{i}] = {ffn[i]} is not in 1..{width}")
            if ffn[i] < width:
                keep_neurons(layer, range(ffn[i]))
    _apply_factors(model, shape)


def _apply_factors(model: nn.Module, shape: dict) -> None:
    """Low-rank modules and factorized embeddings of the recorded sizes (weights load afterwards)."""
    for name, rank in (shape.get("ranks") or {}).items():
        try:
            old = model.get_submodule(name)
        except AttributeError:
            raise ModelError(f"config {SHAPE_KEY}.ranks names {name}, which the model does not have") from None
        if isinstance(old, nn.Linear):
            path, _, leaf = name.rpartition(".")
            low = LowRankLinear(old.in_features, old.out_features, int(rank), old.bias is not None)
            setattr(model.get_submodule(path), leaf, low)
    if shape.get("embedding_rank"):
        old = roles.word_embeddings(model)
        rank = int(shape["embedding_rank"])
        new = FactorizedEmbedding(old.num_embeddings, rank, old.embedding_dim, old.padding_idx)
        roles.set_word_embeddings(model, new)


def build_shaped(config, cls) -> nn.Module:
    """``cls(config)`` with the layers resized to ``config.tinyplm_shape`` when it has one.

    The FFN sizes in the shape may exceed ``intermediate_size`` (it is the largest layer's)."""
    shape = getattr(config, SHAPE_KEY, None)
    key = roles.ffn_key(config)
    if shape and shape.get("ffn"):
        setattr(config, key, max(getattr(config, key), max(shape["ffn"])))
    model = family_class(cls, config.model_type)(config)
    if shape:
        apply_shape(model, shape)
    return model


def family_class(cls: type, model_type: str) -> type:
    """``cls`` (e.g. ``BertForSequenceClassification``) for ``model_type``'s family: the class with
    the same head (``RobertaForSequenceClassification`` for ``roberta``). Raises ``ModelError`` for a
    family the role table does not know."""
    config_class = getattr(cls, "config_class", None)
    if getattr(config_class, "model_type", model_type) == model_type:
        return cls
    own = roles.ROLES[getattr(config_class, "model_type", "bert")].class_prefix
    if not cls.__name__.startswith(own):
        raise ModelError(f"cannot tell the head of {cls.__name__} to build a {model_type} model")
    return roles.task_class(model_type, cls.__name__[len(own):])


def once_each(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with each tensor held under several names (tied layers) once, under its first name,
    as safetensors requires (the loader ties them again)."""
    seen: set[int] = set()
    out = {}
    for name, value in state.items():
        key = value.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            out[name] = value
    return out


def unique_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each shared tensor once (under its first name), contiguous, for safetensors."""
    return {name: value.detach().contiguous() for name, value in once_each(model.state_dict()).items()}


def duplicate_keys(model: nn.Module) -> set[str]:
    """State-dict names whose tensor is shared with an earlier name (not stored on their own)."""
    return set(model.state_dict()) - set(unique_state(model))


def embedding_params(config) -> int:
    """Parameters of the embedding tables of the model ``config`` describes (every ``nn.Embedding``:
    word, or its V x E factor, position, token type, relative-position tables), as
    ``num_parameters(exclude_embeddings=True)`` leaves them out."""
    total, rest = _counts(config)
    return total - rest


def params_from_config(config, num_labels: int | None = None) -> int:
    """Parameters of the task model of any role-table family as its config describes it (structure
    included: pruned heads/FFN, low-rank modules, factorized embeddings, shared layers counted
    once), counted on a model built from the config alone on the meta device (no memory, no
    weights). The contract test checks every saved model against this count."""
    return _counts(config, num_labels)[0]


def _counts(config, num_labels: int | None = None) -> tuple[int, int]:
    """(all parameters, those outside embedding tables) of the model ``config`` builds, its head
    from ``config.architectures`` (a sequence classifier when it names none)."""
    import copy

    from tinyplm.tasks.heads import Head

    config = copy.deepcopy(config)
    if num_labels is not None:
        config.num_labels = num_labels
    head = Head.of_architectures(getattr(config, "architectures", None) or [])
    with torch.device("meta"):
        model = build_shaped(config, roles.task_class(config.model_type, head.auto_suffix))
    return model.num_parameters(), model.num_parameters(exclude_embeddings=True)
