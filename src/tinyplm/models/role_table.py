"""The role table: one :class:`Roles` entry per encoder family (the data :mod:`tinyplm.models.roles` reads).

Paths are dotted and relative (as in ``named_modules()``): ``base`` to a task or masked-LM model,
``embeddings``/``layers``/``pooler``/``embeddings_project`` to the bare encoder, ``word_embeddings``
and ``embedding_norm`` to the embeddings, ``linears``/``norms``/``self_attention``/``parts`` to one
layer, ``mlm_head``/``mlm_predictions``/``pair_head``/``task_heads`` to the task model.

What a family does differently is said here as data, never as ``if model_type == ...`` elsewhere:

- ``fused_qkv``: query, key and value are one Linear whose output is ``[Q; K; V]`` (ModernBERT's
  ``Wqkv``); the three roles name that module and :func:`~tinyplm.models.roles.role_rows` says
  which rows each one owns.
- ``gated_ffn``: the FFN's input Linear yields ``[input; gate]``, two halves of the FFN width
  (ModernBERT's ``Wi``); pruning a neuron drops its row in both halves.
- ``embeddings_project``: an E -> H Linear between the embeddings and the first layer (ELECTRA
  when ``embedding_size != hidden_size``, ALBERT always); the word table is V x E.
- ``group_key``: the layers are groups that ``num_hidden_layers`` steps run in turn (ALBERT's
  ``num_hidden_groups``); :func:`~tinyplm.models.roles.layers` expands a shared group into
  independent ones and says so.
- ``layer_lists``: config lists with one entry per layer (ModernBERT's ``layer_types``, its
  global/local attention pattern) that follow their layers when layers are dropped or picked.
- ``sizes``: the config keys of the four sizes (:class:`SizeKeys`: layers, hidden, heads, FFN) as
  the family names them (DistilBERT's ``n_layers``/``dim``/``n_heads``/``hidden_dim``);
  :func:`config_shape` reads them and :func:`shaped_config_values` writes them, so no code reads
  ``config.intermediate_size`` or its kin by name.
- ``hidden_keys``: config keys that hold the hidden width again (DeBERTa's ``pooler_hidden_size``)
  and follow it when a student is narrower; every other config field of the teacher, the ones
  that change wiring included (attention variants, position kinds, layer groups, embedding size),
  is kept as the teacher has it, present or absent (the model classes read absent fields with
  defaults of their own).
- ``limits``: config values the family's checkpoints may hold but tinyplm (or ``transformers``
  itself) cannot run (:class:`ConfigLimit`); :func:`config_problems` lists the ones a config breaks,
  so ``validate`` and ``run`` refuse it before any work.
- ``positions``: how tokens find their position (:class:`Positions`), so :func:`usable_positions`
  can tell the longest window a checkpoint takes before a run truncates its texts to a longer one.
- ``scores``: how the attention scores are formed (:class:`Scores`), for attention features.
- ``cannot``: stage -> why that stage cannot apply to the family (the error says it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from tinyplm.errors import ModelError

#: The Linear modules of an encoder layer, by role, in forward order.
LINEAR_ROLES: tuple[str, ...] = ("query", "key", "value", "attn_out", "ffn_in", "ffn_out")
#: The LayerNorms of an encoder layer: after (post-norm) or before (pre-norm) attention, the FFN.
NORM_ROLES: tuple[str, ...] = ("attn_norm", "ffn_norm")


class Scores(StrEnum):
    """How a family forms its attention scores (what attention features must recompute)."""

    PLAIN = "plain"  # Q K^T / sqrt(head_dim) + mask
    DISENTANGLED = "disentangled"  # DeBERTa: + content<->position terms over relative distances
    POSITION_BIAS = "position_bias"  # MPNet: + a learned per-head bias of relative position buckets
    ROTARY = "rotary"  # ModernBERT: rotary Q/K and a sliding window on local layers


class Positions(StrEnum):
    """Where a family's position vectors come from, which bounds the window it can read."""

    ABSOLUTE = "absolute"  # a table of max_position_embeddings rows, ids 0..n-1
    AFTER_PAD = "after_pad"  # RoBERTa-style: ids run from pad_token_id + 1, so pad + 1 fewer rows are usable
    ROTARY = "rotary"  # no table: rotary Q/K, any length


class Stage(StrEnum):
    """Stages a family may be unable to take (keys of ``Roles.cannot``)."""

    PRUNE_HEADS = "prune_heads"
    NARROW = "narrowed init"
    ATTENTION_FEATURES = "attention features"
    MLM = "masked-LM head"
    PREFIX_TUNING = "prefix tuning"


def _mapping(**items: str) -> Mapping[str, str]:
    return MappingProxyType(items)


@dataclass(frozen=True)
class SizeKeys:
    """The config keys of a family's four sizes (``transformers`` maps some of them by
    ``attribute_map``, not all: DistilBERT's FFN width is only ``hidden_dim``)."""

    layers: str = "num_hidden_layers"
    hidden: str = "hidden_size"
    heads: str = "num_attention_heads"
    ffn: str = "intermediate_size"


@dataclass(frozen=True)
class ConfigLimit:
    """A config value a family's checkpoint may hold that cannot be run: ``ok(value, config)`` says
    whether ``key``'s value (``default`` when the config lacks the key) can, beside the rest of the
    config; ``expected`` says what can, and why. With ``per_layer`` the limit holds only for stages
    that work layer by layer (a student of teacher layers, pruning, layer-wise distillation); else
    for any use of the model."""

    key: str
    ok: Callable[[object, Mapping[str, object]], bool]
    default: object
    expected: str
    per_layer: bool = False


@dataclass(frozen=True)
class ConfigShape:
    """A config's sizes, whatever its family names them: layers, hidden width, heads per layer
    and FFN width (the largest layer's, for a pruned model whose config records per-layer ones)."""

    layers: int
    hidden: int
    heads: int
    ffn: int


@dataclass(frozen=True)
class Roles:
    """One encoder family's attribute paths and peculiarities (see the module docstring)."""

    model_type: str  # config.model_type
    layer_class: str  # class name of one encoder layer: finds the entry from a layer alone
    base: str  # task / masked-LM model -> bare encoder
    embeddings: str  # bare encoder -> embeddings module
    word_embeddings: str  # embeddings -> word table (V x E)
    embedding_norm: str  # embeddings -> their LayerNorm
    layers: str  # bare encoder -> nn.ModuleList of layers
    pooler: str | None  # bare encoder -> pooler (None: the family has none)
    linears: Mapping[str, str]  # LINEAR_ROLES -> path inside a layer
    norms: Mapping[str, str]  # NORM_ROLES -> path inside a layer
    self_attention: str  # layer -> self-attention module (holds the head width, maybe a head count)
    parts: Mapping[str, tuple[str, ...]]  # sharing unit (attention, ffn) -> child modules of a layer
    mlm_head: str | None  # task model -> whole pre-training head
    mlm_predictions: str | None  # task model -> masked-LM prediction head (hidden -> vocab)
    pair_head: str | None  # task model -> next-sentence / sentence-order head (pooled -> 2)
    task_heads: tuple[str, ...]  # task model -> classifier-like heads, any of which may be present
    class_prefix: str = "Bert"  # transformers class names: f"{prefix}ForSequenceClassification"
    head_linears: tuple[str, ...] = ()  # more per-head projections (layer -> Linear), pruned with the heads
    head_dim: str = "attention_head_size"  # self-attention attribute: the width of one head
    sizes: SizeKeys = SizeKeys()  # config keys of layers, hidden, heads, FFN width
    hidden_keys: tuple[str, ...] = ()  # config keys that repeat the hidden width and follow it
    fused_qkv: bool = False  # query/key/value are one Linear yielding [Q; K; V]
    gated_ffn: bool = False  # ffn_in yields [input; gate], two halves of the FFN width
    embeddings_project: str | None = None  # bare encoder -> E -> H Linear after the embeddings
    group_key: str | None = None  # config key: number of layer groups the layer steps cycle through
    layer_lists: tuple[str, ...] = ()  # config lists indexed by layer, kept with their layers
    first_layer: str | None = None  # why layer 0 must stay the first layer (None: any layer may lead)
    limits: tuple[ConfigLimit, ...] = ()  # config values that cannot be run (validate refuses them)
    positions: Positions = Positions.ABSOLUTE
    position_pad: int | None = None  # AFTER_PAD: the padding id the positions start after, when the family's
    # code fixes it whatever the config's pad_token_id says (transformers' MPNet: always 1)
    table_key: str | None = None  # config key that, when false, means no absolute table (DeBERTa)
    scores: Scores = Scores.PLAIN
    cannot: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


_BERT_LINEARS = _mapping(
    query="attention.self.query", key="attention.self.key", value="attention.self.value",
    attn_out="attention.output.dense", ffn_in="intermediate.dense", ffn_out="output.dense")
_BERT_NORMS = _mapping(attn_norm="attention.output.LayerNorm", ffn_norm="output.LayerNorm")
_BERT_PARTS = MappingProxyType({"attention": ("attention",), "ffn": ("intermediate", "output")})
_NO_MLM = "its masked-LM head is not one module the role table can name"
_NO_PREFIX = "its attention takes no past key/value states, which is how prefix tuning adds its prefixes"

BERT = Roles(
    model_type="bert", layer_class="BertLayer", base="bert", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.layer", pooler="pooler",
    linears=_BERT_LINEARS, norms=_BERT_NORMS, self_attention="attention.self", parts=_BERT_PARTS,
    mlm_head="cls", mlm_predictions="cls.predictions", pair_head="cls.seq_relationship",
    task_heads=("classifier", "qa_outputs"),
)

#: RoBERTa: BERT's layer, positions offset past the padding id, a two-Linear classifier, no pooler.
ROBERTA = Roles(
    model_type="roberta", layer_class="RobertaLayer", base="roberta", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.layer", pooler="pooler",
    linears=_BERT_LINEARS, norms=_BERT_NORMS, self_attention="attention.self", parts=_BERT_PARTS,
    mlm_head="lm_head", mlm_predictions="lm_head", pair_head=None,
    task_heads=("classifier", "qa_outputs"), class_prefix="Roberta", positions=Positions.AFTER_PAD,
)
#: XLM-RoBERTa and CamemBERT: RoBERTa's layout (base ``roberta``) under their own class names.
XLM_ROBERTA = Roles(**{**ROBERTA.__dict__, "model_type": "xlm-roberta", "layer_class": "XLMRobertaLayer",
                       "class_prefix": "XLMRoberta"})
CAMEMBERT = Roles(**{**ROBERTA.__dict__, "model_type": "camembert", "layer_class": "CamembertLayer",
                     "class_prefix": "Camembert"})

#: DeBERTa-v2/v3: disentangled attention (position projections are key/query with ``share_att_key``,
#: else ``pos_key_proj``/``pos_query_proj``), relative table on the encoder, the pooler on the task model.
DEBERTA_V2 = Roles(
    model_type="deberta-v2", layer_class="DebertaV2Layer", base="deberta", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.layer", pooler=None,
    linears=_mapping(**{**_BERT_LINEARS, "query": "attention.self.query_proj",
                        "key": "attention.self.key_proj", "value": "attention.self.value_proj"}),
    norms=_BERT_NORMS, self_attention="attention.self", parts=_BERT_PARTS,
    mlm_head="cls", mlm_predictions="cls.predictions", pair_head=None,  # the legacy head (config.legacy)
    task_heads=("pooler", "classifier", "qa_outputs"), class_prefix="DebertaV2", hidden_keys=("pooler_hidden_size",),
    head_linears=("attention.self.pos_key_proj", "attention.self.pos_query_proj"),
    scores=Scores.DISENTANGLED, table_key="position_biased_input",
    limits=(ConfigLimit("attention_head_size",
                        lambda v, c: v is None or v * c.get("num_attention_heads", 0) == c.get("hidden_size"), None,
                        "hidden_size / num_attention_heads (or no attention_head_size): transformers' DeBERTa-v2 "
                        "projects the heads' joined outputs with a hidden x hidden Linear, so any other head "
                        "width fails on the first forward pass"),),
    cannot=_mapping(**{Stage.NARROW: "its relative-position projections are not narrowed"}),
)

#: DistilBERT: ``q_lin``..``out_lin``, ``lin1``/``lin2``, post-norm, no token types, no pooler.
DISTILBERT = Roles(
    model_type="distilbert", layer_class="TransformerBlock", base="distilbert", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="transformer.layer", pooler=None,
    linears=_mapping(query="attention.q_lin", key="attention.k_lin", value="attention.v_lin",
                     attn_out="attention.out_lin", ffn_in="ffn.lin1", ffn_out="ffn.lin2"),
    norms=_mapping(attn_norm="sa_layer_norm", ffn_norm="output_layer_norm"), self_attention="attention",
    parts=MappingProxyType({"attention": ("attention", "sa_layer_norm"), "ffn": ("ffn", "output_layer_norm")}),
    mlm_head=None, mlm_predictions=None, pair_head=None,
    task_heads=("pre_classifier", "classifier", "qa_outputs"), class_prefix="DistilBert",
    sizes=SizeKeys(layers="n_layers", hidden="dim", heads="n_heads", ffn="hidden_dim"),
    cannot=_mapping(**{Stage.MLM: _NO_MLM, Stage.PREFIX_TUNING: _NO_PREFIX}),
)

#: MPNet: ``attention.attn.q``..``o``; one relative-position bias table (buckets x heads) on the
#: encoder, added to every layer's scores: a head is one column of it in all layers at once.
MPNET = Roles(
    model_type="mpnet", layer_class="MPNetLayer", base="mpnet", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.layer", pooler="pooler",
    linears=_mapping(query="attention.attn.q", key="attention.attn.k", value="attention.attn.v",
                     attn_out="attention.attn.o", ffn_in="intermediate.dense", ffn_out="output.dense"),
    norms=_mapping(attn_norm="attention.LayerNorm", ffn_norm="output.LayerNorm"),
    self_attention="attention.attn", parts=_BERT_PARTS,
    mlm_head="lm_head", mlm_predictions="lm_head", pair_head=None,
    task_heads=("classifier", "qa_outputs"), class_prefix="MPNet", scores=Scores.POSITION_BIAS,
    positions=Positions.AFTER_PAD, position_pad=1,
    limits=(ConfigLimit("relative_attention_num_buckets", lambda v, _: isinstance(v, int) and v >= 32, 32,
                        "at least 32: transformers' MPNet always sorts relative positions into 32 buckets "
                        "(compute_position_bias), so a smaller bias table fails on the first forward pass"),),
    cannot=_mapping(**{Stage.PRUNE_HEADS: "its relative-position bias is one table shared by every layer, with one "
                                          "column per head, so a head cannot be removed from one layer alone",
                       Stage.PREFIX_TUNING: _NO_PREFIX}),
)

#: ELECTRA (the discriminator): BERT's layer; a V x E word table and ``embeddings_project`` (E -> H)
#: when ``embedding_size != hidden_size``; a two-Linear classifier, no pooler.
ELECTRA = Roles(
    model_type="electra", layer_class="ElectraLayer", base="electra", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.layer", pooler=None,
    linears=_BERT_LINEARS, norms=_BERT_NORMS, self_attention="attention.self", parts=_BERT_PARTS,
    mlm_head=None, mlm_predictions=None, pair_head=None, task_heads=("classifier", "qa_outputs"),
    class_prefix="Electra", embeddings_project="embeddings_project",
    cannot=_mapping(**{Stage.MLM: "its generator head is a second model, not a head of the discriminator"}),
)

_ALBERT = "albert_layers.0."
#: ALBERT: a V x E table, ``encoder.embedding_hidden_mapping_in`` (E -> H), and layer *groups* that the
#: ``num_hidden_layers`` steps share (``num_hidden_groups`` of them, one layer each here).
ALBERT = Roles(
    model_type="albert", layer_class="AlbertLayerGroup", base="albert", embeddings="embeddings",
    word_embeddings="word_embeddings", embedding_norm="LayerNorm", layers="encoder.albert_layer_groups",
    pooler="pooler",
    linears=_mapping(query=_ALBERT + "attention.query", key=_ALBERT + "attention.key",
                     value=_ALBERT + "attention.value", attn_out=_ALBERT + "attention.dense",
                     ffn_in=_ALBERT + "ffn", ffn_out=_ALBERT + "ffn_output"),
    norms=_mapping(attn_norm=_ALBERT + "attention.LayerNorm", ffn_norm=_ALBERT + "full_layer_layer_norm"),
    self_attention=_ALBERT + "attention",
    parts=MappingProxyType({"attention": (_ALBERT + "attention",),
                            "ffn": (_ALBERT + "ffn", _ALBERT + "ffn_output", _ALBERT + "full_layer_layer_norm")}),
    mlm_head="predictions", mlm_predictions="predictions", pair_head="sop_classifier",
    task_heads=("classifier", "qa_outputs"), class_prefix="Albert",
    embeddings_project="encoder.embedding_hidden_mapping_in", group_key="num_hidden_groups",
    limits=(ConfigLimit("inner_group_num", lambda v, _: v == 1, 1,
                        "1: tinyplm's per-layer stages (a student of teacher layers, pruning, layer-wise "
                        "distillation) handle one layer per group", per_layer=True),),
    cannot=_mapping(**{Stage.PREFIX_TUNING: _NO_PREFIX}),
)

#: ModernBERT: pre-norm (layer 0 has no attention norm), fused ``Wqkv``, gated FFN ``Wi`` (2 x FFN
#: rows), no biases, rotary positions, global/local attention by ``config.layer_types``.
MODERNBERT = Roles(
    model_type="modernbert", layer_class="ModernBertEncoderLayer", base="model", embeddings="embeddings",
    word_embeddings="tok_embeddings", embedding_norm="norm", layers="layers", pooler=None,
    linears=_mapping(query="attn.Wqkv", key="attn.Wqkv", value="attn.Wqkv", attn_out="attn.Wo",
                     ffn_in="mlp.Wi", ffn_out="mlp.Wo"),
    norms=_mapping(attn_norm="attn_norm", ffn_norm="mlp_norm"), self_attention="attn",
    parts=MappingProxyType({"attention": ("attn",), "ffn": ("mlp_norm", "mlp")}),
    mlm_head=None, mlm_predictions=None, pair_head=None, task_heads=("head", "classifier"),
    class_prefix="ModernBert", head_dim="head_dim", fused_qkv=True, gated_ffn=True, layer_lists=("layer_types",),
    first_layer="ModernBERT's first layer has no attention LayerNorm (the embeddings' norm feeds it), so only "
                "the teacher's layer 0 can be the first layer",
    scores=Scores.ROTARY, positions=Positions.ROTARY,
    cannot=_mapping(**{
        Stage.NARROW: "its pre-norm layers, fused Wqkv and final norm are not narrowed",
        Stage.ATTENTION_FEATURES: "its scores use rotary Q/K and sliding windows that attention features do not "
                                  "recompute; distil hidden states or MiniLM value relations instead",
        Stage.MLM: _NO_MLM, Stage.PREFIX_TUNING: _NO_PREFIX}),
)

#: model_type -> its table entry.
ROLES: dict[str, Roles] = {r.model_type: r for r in (BERT, ROBERTA, XLM_ROBERTA, CAMEMBERT, DEBERTA_V2, DISTILBERT,
                                                      MPNET, ELECTRA, ALBERT, MODERNBERT)}


def by_type(model_type: str | None, owner: str) -> Roles:
    """The entry of ``model_type``; ``ModelError`` naming ``owner`` (a class or config) if none."""
    if model_type not in ROLES:
        what = f"model_type {model_type!r}" if model_type else "a model without config.model_type"
        raise ModelError(f"{owner}: {what} is not in tinyplm's role table (supported model types: "
                         f"{', '.join(ROLES)})")
    return ROLES[model_type]


def sizes_of(config) -> SizeKeys:
    """The size keys of ``config``'s family (:class:`SizeKeys`; ``ModelError`` for a family the
    table lacks)."""
    return by_type(getattr(config, "model_type", None), type(config).__name__).sizes


def config_problems(config: Mapping[str, object], per_layer: bool = True) -> list[str]:
    """What in ``config`` (a config.json mapping) its family's :attr:`Roles.limits` cannot run: one
    line per broken limit naming the key, its value and what would work; ``per_layer`` includes the
    limits of layer-by-layer stages. An unknown family has no limits here (``by_type`` refuses it)."""
    family = ROLES.get(str(config.get("model_type")))
    out = []
    for limit in family.limits if family else ():
        value = config.get(limit.key, limit.default)
        if (per_layer or not limit.per_layer) and not limit.ok(value, config):
            out.append(f"config key {limit.key!r} is {value!r}; expected {limit.expected}")
    return out


def usable_positions(config: Mapping[str, object]) -> int | None:
    """The longest window (in tokens, specials included) a checkpoint's config can read: its
    position table's rows, less the padding id + 1 where positions start after it (the family's fixed
    one, ``position_pad``, where its code ignores the config's); None when the
    family has no absolute table (rotary, or DeBERTa without ``position_biased_input``) or the
    config does not say."""
    family = ROLES.get(str(config.get("model_type")))
    rows = config.get("max_position_embeddings")
    if family is None or not isinstance(rows, int) or family.positions == Positions.ROTARY:
        return None
    if family.table_key and not config.get(family.table_key, True):
        return None
    if family.positions == Positions.AFTER_PAD:
        pad = family.position_pad if family.position_pad is not None else int(config.get("pad_token_id") or 0)
        return rows - (pad + 1)
    return rows


def ffn_key(config) -> str:
    """The config key of the FFN width (``intermediate_size``; DistilBERT ``hidden_dim``)."""
    return sizes_of(config).ffn


def config_shape(config) -> ConfigShape:
    """The four sizes of a config, read by its family's own keys (the standard ``transformers``
    names for a config outside the table, such as a classic student's, which maps them itself).
    Raises ``ModelError`` naming the config class when a size key is missing."""
    family = ROLES.get(getattr(config, "model_type", None))
    keys = family.sizes if family else SizeKeys()
    values = {}
    for field_name in ("layers", "hidden", "heads", "ffn"):
        key = getattr(keys, field_name)
        value = getattr(config, key, None)
        if not isinstance(value, int):
            raise ModelError(f"{type(config).__name__}: config key {key!r} ({field_name}) is {value!r}; expected an "
                             "integer")
        values[field_name] = value
    return ConfigShape(**values)


def shaped_config_values(config, layers: int, hidden: int, heads: int, ffn: int) -> dict:
    """``config.to_dict()`` with the four sizes set under the family's own keys, and the keys that
    repeat the hidden width (``hidden_keys``) moved with it where they equalled it. Every other
    field stays the teacher's, absent ones absent."""
    family = by_type(getattr(config, "model_type", None), type(config).__name__)
    values = config.to_dict()
    old_hidden = config_shape(config).hidden
    for key in family.hidden_keys:
        if values.get(key) == old_hidden:
            values[key] = hidden
    keys = family.sizes
    values.update({keys.layers: layers, keys.hidden: hidden, keys.heads: heads, keys.ffn: ffn})
    return values


def require(model_or_type, stage: Stage, what: str = "") -> None:
    """Raise ``ModelError`` saying why ``stage`` cannot apply, when the family of ``model_or_type``
    (a model, a config or a model_type) has it in :attr:`Roles.cannot`."""
    if isinstance(model_or_type, str):
        model_type = model_or_type
    else:
        config = getattr(model_or_type, "config", model_or_type)
        model_type = getattr(config, "model_type", None)
    why = by_type(model_type, "require()").cannot.get(Stage(stage))
    if why:
        raise ModelError(f"{what or Stage(stage).value} is not possible for a {model_type} model: {why}")
