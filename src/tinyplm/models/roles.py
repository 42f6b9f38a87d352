"""Where an encoder family keeps its parts: the one seam through which code reaches into a model.

Code outside this module never spells ``model.bert.encoder.layer[i].attention.self.query``; it asks
for a part by *role*: :func:`base_model`, :func:`layers`, :func:`layer_linear` (``query``, ``key``,
``value``, ``attn_out``, ``ffn_in``, ``ffn_out``), :func:`word_embeddings`, :func:`mlm_head`, ...
Each encoder family has one :class:`~tinyplm.models.role_table.Roles` entry in :data:`ROLES`
(:mod:`tinyplm.models.role_table`: BERT, RoBERTa, XLM-RoBERTa, CamemBERT, DeBERTa-v2, DistilBERT,
MPNet, ELECTRA, ALBERT, ModernBERT), by ``config.model_type`` for a model, by class for a layer.
Widths: :mod:`tinyplm.models.widths`. A stage a family cannot take raises through :func:`require`
saying why; a family not in the table raises ``ModelError`` naming the supported ones.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

from torch import inference_mode, nn

from tinyplm.errors import ModelError
from tinyplm.models.role_table import (
    LINEAR_ROLES,
    NORM_ROLES,
    ROLES,
    ConfigLimit,
    ConfigShape,
    Roles,
    Scores,
    SizeKeys,
    Stage,
    by_type,
    config_problems,
    config_shape,
    ffn_key,
    require,
    shaped_config_values,
    sizes_of,
    usable_positions,
)

__all__ = ["LINEAR_ROLES", "NORM_ROLES", "ROLES", "ConfigLimit", "ConfigShape", "Roles", "Scores", "SizeKeys", "Stage",
           "config_problems", "config_shape", "ffn_key", "require", "shaped_config_values", "sizes_of",
           "usable_positions"]
log = logging.getLogger(__name__)
SHARING_UNITS: tuple[str, ...] = ("attention", "ffn")  # what layers can share (ALBERT-style), every family


# ---------------------------------------------------------------------------------------------
# lookup


def roles_of(model: nn.Module) -> Roles:
    """The table entry of ``model`` (a task, masked-LM or bare model), by ``config.model_type``.

    Raises ``ModelError`` naming the model_type and the supported ones when the family is unknown.
    """
    return by_type(getattr(getattr(model, "config", None), "model_type", None), type(model).__name__)


def roles_of_layer(layer: nn.Module) -> Roles:
    """The table entry of one encoder layer, by its class (or a base class) name.

    Raises ``ModelError`` naming the class and the known layer classes."""
    names = {c.__name__ for c in type(layer).__mro__}
    for roles in ROLES.values():
        if roles.layer_class in names:
            return roles
    known = ", ".join(r.layer_class for r in ROLES.values())
    raise ModelError(f"{type(layer).__name__} is not an encoder layer tinyplm's role table knows ({known})")


def task_class(model_type: str, suffix: str) -> type:
    """The ``transformers`` class of ``model_type`` with class-name ``suffix``
    (``"ForSequenceClassification"``, ``"ForMaskedLM"``, ``"Model"``). Raises ``ModelError`` for an
    unknown family or a class ``transformers`` does not have."""
    import transformers

    name = by_type(model_type, "task_class()").class_prefix + suffix
    cls = getattr(transformers, name, None)
    if cls is None:
        raise ModelError(f"transformers has no class {name} for model_type {model_type!r}")
    return cls


def role_path(role: str, model_type: str = "bert") -> str:
    """The path of a Linear ``role`` inside one layer of ``model_type`` (``"attention.self.query"``).

    Raises ``ModelError`` for an unknown role or model type."""
    return by_type(model_type, "role_path()").linears[_check_role(role)]


def _check_role(role: str) -> str:
    if role not in LINEAR_ROLES:
        raise ModelError(f"unknown role {role!r}; roles are {sorted(LINEAR_ROLES)}")
    return role


def _get(root: nn.Module, path: str, what: str) -> nn.Module:
    """``root.get_submodule(path)``; ``ModelError`` saying ``what`` is missing."""
    try:
        return root.get_submodule(path)
    except AttributeError:
        raise ModelError(f"{type(root).__name__} has no {what} (expected at {path!r})") from None


def _optional(root: nn.Module, path: str) -> nn.Module | None:
    """``root.get_submodule(path)``, or None where the model has no such module."""
    parent, _, leaf = path.rpartition(".")
    found = getattr(root.get_submodule(parent) if parent else root, leaf, None)
    return found if isinstance(found, nn.Module) else None


def _set(root: nn.Module, path: str, module: nn.Module) -> None:
    """Put ``module`` at ``path`` under ``root`` (its parent must exist)."""
    parent, _, leaf = path.rpartition(".")
    setattr(_get(root, parent, parent) if parent else root, leaf, module)


# ---------------------------------------------------------------------------------------------
# the encoder


def base_model(model: nn.Module) -> nn.Module:
    """The bare encoder (``BertModel``) of a task or masked-LM model, of a wrapper that names its
    encoder ``base_model`` (a :class:`~tinyplm.models.sentence.SentenceEncoder`: encoder, then
    pooling), or ``model`` when it is bare.

    Raises ``ModelError`` for an unknown family or a model without an encoder where its table says."""
    roles = roles_of(model)
    inner = getattr(model, roles.base, None)
    if not isinstance(inner, nn.Module):  # a bare transformers model's base_model is itself
        inner = getattr(model, "base_model", None)
    base = inner if isinstance(inner, nn.Module) else model
    _get(base, roles.layers, "encoder layers")
    return base


def is_encoder(model: object) -> bool:
    """True for a ``torch`` model of a family in the table that has its encoder (never raises)."""
    if not isinstance(model, nn.Module):
        return False
    try:
        base_model(model)
    except ModelError:
        return False
    return True


def set_base_model(model: nn.Module, base: nn.Module) -> None:
    """Make ``model`` (a task or masked-LM model) use ``base`` as its encoder (``model.bert = base``).

    Raises ``ModelError`` when ``model`` is itself bare."""
    roles = roles_of(model)
    if not isinstance(getattr(model, roles.base, None), nn.Module):
        raise ModelError(f"{type(model).__name__} is a bare encoder: it has no {roles.base!r} to replace")
    setattr(model, roles.base, base)


def embeddings(model: nn.Module) -> nn.Module:
    """The embeddings module (word, position and token-type tables, LayerNorm)."""
    return _get(base_model(model), roles_of(model).embeddings, "embeddings")


def word_embeddings(model: nn.Module) -> nn.Module:
    """The word-embedding module (an ``nn.Embedding`` V x H, or a factorized stand-in)."""
    return _get(embeddings(model), roles_of(model).word_embeddings, "word embeddings")


def set_word_embeddings(model: nn.Module, module: nn.Module) -> None:
    """Replace the word-embedding module by ``module``."""
    _set(embeddings(model), roles_of(model).word_embeddings, module)


def embedding_norm(model: nn.Module) -> nn.Module:
    """The LayerNorm applied to the summed embeddings."""
    return _get(embeddings(model), roles_of(model).embedding_norm, "embedding LayerNorm")


def layers(model: nn.Module) -> nn.ModuleList:
    """The encoder layers, in order. A family whose layers are groups shared by several layer steps
    (ALBERT with ``num_hidden_groups < num_hidden_layers``) is first expanded into one independent
    group per step (:func:`expand_groups`; the forward is unchanged, the weights are copied)."""
    base, roles = base_model(model), roles_of(model)
    if roles.group_key:
        expand_groups(base)
    return _get(base, roles.layers, "encoder layers")


def layer_steps(model: nn.Module) -> list[nn.Module]:
    """The module each layer step runs, in order, without changing the model: the layers, or a
    grouped encoder's groups each repeated for the steps that share it (ALBERT)."""
    base, roles = base_model(model), roles_of(model)
    stack = _get(base, roles.layers, "encoder layers")
    steps = base.config.num_hidden_layers
    return [stack[i * len(stack) // steps] for i in range(steps)] if roles.group_key else list(stack)


def grouped(model: nn.Module) -> bool:
    """True for a grouped encoder whose layer steps share groups (ALBERT, not yet expanded)."""
    return len({id(m) for m in layer_steps(model)}) < base_model(model).config.num_hidden_layers


def expand_groups(model: nn.Module) -> bool:
    """Give each layer step of a grouped encoder (ALBERT) a group of its own, copying the shared
    weights, and log that it did; returns True when it expanded. Per-layer stages (pruning, dropping
    layers, layer-wise features, per-layer sharing) need independent layers.

    Raises ``ModelError`` for a group of several layers (``inner_group_num > 1``)."""
    roles, config = roles_of(model), model.config
    groups = _get(base_model(model), roles.layers, "encoder layer groups")
    inner = getattr(config, "inner_group_num", 1)
    if inner != 1:
        raise ModelError(f"{roles.model_type}: inner_group_num = {inner} (several layers per group) is not "
                         "supported; tinyplm handles one layer per group")
    steps, count = config.num_hidden_layers, getattr(config, roles.group_key)
    if count == steps:
        return False
    # layer step i runs group i * count // steps, as transformers' ALBERT does (uneven splits too)
    expanded = [groups[i * count // steps] for i in range(steps)]
    with inference_mode(False):  # copies made under an analysis's inference mode could never train
        expanded = [g if i == 0 or g is not expanded[i - 1] else copy.deepcopy(g) for i, g in enumerate(expanded)]
    _set(base_model(model), roles.layers, nn.ModuleList(expanded))
    setattr(config, roles.group_key, steps)
    log.info("%s: the %d shared layer group(s) are expanded into %d independent layers (weights copied, "
             "the same function) so that each layer can be changed on its own", roles.model_type, count, steps)
    return True


def set_layers(model: nn.Module, modules: Sequence[nn.Module]) -> None:
    """Make ``modules`` the encoder layers, in order; each self-attention's ``layer_idx`` (used by
    ``transformers`` for caches only) is renumbered, and a grouped family's group count follows.
    The layer count and per-layer config lists are left to the caller (:func:`select_layers`)."""
    new = nn.ModuleList(modules)
    roles = roles_of(model)
    _set(base_model(model), roles.layers, new)
    if roles.group_key:
        setattr(base_model(model).config, roles.group_key, len(new))
    for i, layer in enumerate(new):
        for module in (layer, self_attention(layer)):
            if hasattr(module, "layer_idx"):
                module.layer_idx = i


def select_layers(model: nn.Module, keep: Sequence[int]) -> None:
    """Keep encoder layers ``keep`` (0-based, in this order): the modules, the config's layer count
    and its per-layer lists (ModernBERT's ``layer_types``: each kept layer keeps its attention type).

    Raises ``ModelError`` where the family needs its layer 0 first (:attr:`Roles.first_layer`)."""
    stack = layers(model)
    roles = roles_of(model)
    if roles.first_layer and keep and keep[0] != 0:
        raise ModelError(f"cannot make layer {keep[0]} the first layer: {roles.first_layer}")
    lists = layer_lists(model.config, keep)
    set_layers(model, [stack[i] for i in keep])
    model.config.num_hidden_layers = len(keep)
    for key, values in lists.items():
        setattr(model.config, key, values)


def layer_lists(config, keep: Sequence[int]) -> dict[str, list]:
    """The config's per-layer lists (:attr:`Roles.layer_lists`) restricted to layers ``keep``."""
    roles = by_type(getattr(config, "model_type", None), type(config).__name__)
    return {key: [getattr(config, key)[i] for i in keep] for key in roles.layer_lists}


def embeddings_project(model: nn.Module) -> nn.Module | None:
    """The E -> H Linear between the embeddings and the first layer (ELECTRA with
    ``embedding_size != hidden_size``, ALBERT), or None."""
    path = roles_of(model).embeddings_project
    return _optional(base_model(model), path) if path else None


def pooler(model: nn.Module) -> nn.Module | None:
    """The pooler of the bare encoder, or None (an MLM's encoder, or a family without one)."""
    path = roles_of(model).pooler
    found = getattr(base_model(model), path, None) if path else None
    return found if isinstance(found, nn.Module) else None


# ---------------------------------------------------------------------------------------------
# one layer


def layer_linear(layer: nn.Module, role: str) -> nn.Module:
    """The module of one encoder layer that plays Linear ``role`` (an ``nn.Linear``, or what
    replaced it: low-rank, quantized). Raises ``ModelError`` for an unknown role."""
    return _get(layer, roles_of_layer(layer).linears[_check_role(role)], f"{role} module")


def set_layer_linear(layer: nn.Module, role: str, module: nn.Module) -> None:
    """Make ``module`` the layer's Linear ``role`` (the forward uses it from now on)."""
    _set(layer, roles_of_layer(layer).linears[_check_role(role)], module)


def layer_norm(layer: nn.Module, role: str) -> nn.Module:
    """The LayerNorm ``role`` (``attn_norm`` or ``ffn_norm``) of one layer."""
    if role not in NORM_ROLES:
        raise ModelError(f"unknown norm role {role!r}; norm roles are {list(NORM_ROLES)}")
    return _get(layer, roles_of_layer(layer).norms[role], f"{role} LayerNorm")


def head_linears(layer: nn.Module) -> dict[str, nn.Module]:
    """Per-head projections of one layer beyond query/key/value, by path, that this layer has
    (DeBERTa's ``pos_key_proj``/``pos_query_proj`` when ``share_att_key`` is off); pruning a head
    keeps the same rows of these."""
    found = {p: _optional(layer, p) for p in roles_of_layer(layer).head_linears}
    return {p: m for p, m in found.items() if m is not None}


def set_head_linear(layer: nn.Module, path: str, module: nn.Module) -> None:
    """Replace the per-head projection at ``path`` (one of :func:`head_linears`)."""
    if path not in head_linears(layer):
        raise ModelError(f"{type(layer).__name__} has no per-head projection {path!r}")
    _set(layer, path, module)


def self_attention(layer: nn.Module) -> nn.Module:
    """The layer's self-attention module (holds ``num_attention_heads``, ``all_head_size``,
    ``layer_idx``)."""
    return _get(layer, roles_of_layer(layer).self_attention, "self-attention")


def part_names(layer: nn.Module, unit: str) -> tuple[str, ...]:
    """The child modules of ``layer`` that make up sharing unit ``unit`` (``attention``, ``ffn``).

    Raises ``ModelError`` for another unit."""
    parts = roles_of_layer(layer).parts
    if unit not in parts:
        raise ModelError(f"unknown sharing unit {unit!r}; units are {list(parts)}")
    return parts[unit]


def layer_part(layer: nn.Module, name: str) -> nn.Module:
    """The child module ``name`` of ``layer``, one of its table's sharing parts (BERT: attention,
    intermediate, output). Raises ``ModelError`` for another name."""
    return _get(layer, _check_part(layer, name), f"part {name!r}")


def set_layer_part(layer: nn.Module, name: str, module: nn.Module) -> None:
    """Make ``module`` the layer's part ``name`` (shared when the same module goes to many layers)."""
    _set(layer, _check_part(layer, name), module)


def _check_part(layer: nn.Module, name: str) -> str:
    names = [n for unit in roles_of_layer(layer).parts.values() for n in unit]
    if name not in names:
        raise ModelError(f"unknown layer part {name!r}; parts are {names}")
    return name


# ---------------------------------------------------------------------------------------------
# names and iteration


def linear_name(model: nn.Module, i: int, role: str) -> str:
    """The name of layer ``i``'s Linear ``role`` in ``model.named_modules()``
    (``"bert.encoder.layer.3.attention.self.query"``). Raises ``ModelError`` for a bad index."""
    roles, base = roles_of(model), base_model(model)
    count = len(layers(model))
    if not 0 <= i < count:
        raise ModelError(f"layer index {i} out of range: the model has layers 0..{count - 1}")
    prefix = "" if base is model else f"{roles.base}."
    return f"{prefix}{roles.layers}.{i}.{roles.linears[_check_role(role)]}"


def config_linear_name(config, i: int, role: str) -> str:
    """The name :func:`linear_name` gives in a task model built from ``config`` (no model needed)."""
    roles = by_type(getattr(config, "model_type", None), type(config).__name__)
    return f"{roles.base}.{roles.layers}.{i}.{roles.linears[_check_role(role)]}"


def encoder_linears(model: nn.Module) -> list[tuple[int, str, nn.Module]]:
    """``(layer index, role, module)`` for every Linear role of every layer, in forward order.
    A module shared by several layers appears once per layer that uses it."""
    return [(i, role, layer_linear(layer, role)) for i, layer in enumerate(layers(model)) for role in LINEAR_ROLES]


# ---------------------------------------------------------------------------------------------
# heads


def mlm_head(model: nn.Module) -> nn.Module:
    """The whole pre-training head of a masked-LM model (BERT: ``model.cls``).

    Raises ``ModelError`` when the model has none."""
    return _get(model, _head_path(model, "mlm_head"), "masked-LM head")


def mlm_predictions(model: nn.Module) -> nn.Module:
    """The masked-LM prediction head ``(..., hidden) -> (..., vocab)`` (BERT: ``model.cls.predictions``)."""
    return _get(model, _head_path(model, "mlm_predictions"), "masked-LM prediction head")


def pair_head(model: nn.Module) -> nn.Module:
    """The sentence-pair head ``(batch, hidden) -> (batch, 2)`` on the pooled output
    (BERT: ``model.cls.seq_relationship``). Raises ``ModelError`` when the model has none."""
    return _get(model, _head_path(model, "pair_head"), "sentence-pair head")


def task_heads(model: nn.Module) -> dict[str, nn.Module]:
    """The task heads ``model`` has (sequence or token ``classifier``, span ``qa_outputs``) by
    attribute name; empty for a bare or masked-LM model. Heads match across models by name."""
    found = {name: getattr(model, name, None) for name in roles_of(model).task_heads}
    return {name: head for name, head in found.items() if isinstance(head, nn.Module)}


def _head_path(model: nn.Module, field: str) -> str:
    family = roles_of(model)
    path = getattr(family, field)
    if path is None:
        why = family.cannot.get(Stage.MLM, "it has none") if field != "pair_head" else "it has none"
        raise ModelError(f"{type(model).__name__}: the {family.model_type} family has no {field}: {why}")
    return path
