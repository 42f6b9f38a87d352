"""Hypothesis strategies over the config space of every role-table family: tiny configs drawn from
the fields that change module shapes or wiring in ``transformers``' config classes (attention
variants, shared keys, position buckets, embedding size against hidden, layer groups, local/global
attention patterns, activations, tied embeddings), with sizes, vocabulary and tokenizer kind drawn
too. A field is sometimes left out altogether, since a checkpoint's config.json often omits one and
the model classes then read their own defaults (which a student must keep).

``FAMILY_FIELDS`` is the one table of what is drawn per family; :func:`family_configs` builds the
strategy. Everything is tiny (hidden 16-32, 2-4 layers) so one draw runs every stage in seconds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hypothesis import strategies as st

from helpers_families import SPECIALS, tiny_tokenizer

#: A value drawn for a field may be ABSENT: the key is then missing from the config.
ABSENT = object()

_ACTS = st.sampled_from(["gelu", "relu", "gelu_new", "silu"])


def _maybe(strategy):
    return st.one_of(st.just(ABSENT), strategy)


#: family -> config field -> strategy of its value (sizes are drawn separately, by :func:`_sizes`).
FAMILY_FIELDS: dict[str, dict[str, st.SearchStrategy]] = {
    "bert": {"hidden_act": _ACTS, "type_vocab_size": st.sampled_from([1, 2])},
    "roberta": {"hidden_act": _ACTS, "type_vocab_size": st.sampled_from([1, 2])},
    "xlm-roberta": {"hidden_act": _ACTS},
    "camembert": {"hidden_act": _ACTS},
    "distilbert": {"activation": st.sampled_from(["gelu", "relu"]), "sinusoidal_pos_embds": st.booleans()},
    "deberta-v2": {
        "relative_attention": st.booleans(),
        "pos_att_type": _maybe(st.sampled_from([[], ["p2c"], ["c2p"], ["p2c", "c2p"]])),
        "share_att_key": _maybe(st.booleans()),
        "position_buckets": _maybe(st.sampled_from([-1, 4, 8])),
        "max_relative_positions": _maybe(st.sampled_from([-1, 8, 16])),
        "norm_rel_ebd": _maybe(st.sampled_from(["none", "layer_norm"])),
        "position_biased_input": _maybe(st.booleans()),
        "conv_kernel_size": _maybe(st.sampled_from([0, 3])),
        "embedding_size": _maybe(st.sampled_from([8, "hidden"])),
        "attention_head_size": _maybe(st.just("head")),
        "type_vocab_size": st.sampled_from([0, 2]),
        "hidden_act": _ACTS,
    },
    "electra": {"embedding_size": st.sampled_from([8, 16, "hidden"]), "hidden_act": _ACTS},
    "albert": {"embedding_size": st.sampled_from([8, 16, "hidden"]), "num_hidden_groups": st.sampled_from([1, 2, 3]),
               "hidden_act": st.sampled_from(["gelu_new", "relu"])},
    "mpnet": {"relative_attention_num_buckets": _maybe(st.sampled_from([32, 64])), "hidden_act": _ACTS},
    "modernbert": {"global_attn_every_n_layers": st.sampled_from([1, 2, 3]),
                   "local_attention": st.sampled_from([4, 8, 16]),
                   "hidden_activation": st.sampled_from(["gelu", "silu"]),
                   "tie_word_embeddings": st.booleans()},
}
FAMILIES = tuple(FAMILY_FIELDS)
#: Config values a family's checkpoint may hold that tinyplm refuses up front (``validate``), with
#: what the refusal says: (family, fields, needs a per-layer stage to be refused, message).
REFUSED = [
    ("mpnet", {"relative_attention_num_buckets": 8}, False, "'relative_attention_num_buckets' is 8; expected at "
                                                            "least 32"),
    ("deberta-v2", {"attention_head_size": 4}, False, "'attention_head_size' is 4; expected hidden_size / "
                                                     "num_attention_heads"),
    ("albert", {"inner_group_num": 2}, True, "student s (teacher_layers, compress step prune_ffn): config key "
                                             "'inner_group_num' is 2; expected 1"),
]
#: Families whose embeddings assume a padding id (MPNet's positions start past id 1): every tiny
#: tokenizer puts ``<pad>`` at 1, so any kind fits every family.
TOKENIZER_KINDS = ("wordpiece", "bpe", "unigram")


@dataclass(frozen=True)
class Drawn:
    """One drawn checkpoint: its family, config (a ``transformers`` config object), tokenizer kind,
    and the fields as drawn (for the failure message)."""

    family: str
    config: object
    tokenizer_kind: str
    fields: dict

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return f"Drawn({self.family}, tokenizer={self.tokenizer_kind}, {self.fields})"


def _sizes(draw) -> dict:
    heads = draw(st.sampled_from([2, 4]))
    # a word table larger than the tokenizer is common (DeBERTa-v3: 128,100 rows for 128,001 pieces)
    return {"layers": draw(st.integers(2, 4)), "heads": heads, "hidden": heads * draw(st.sampled_from([4, 8])),
            "ffn": draw(st.integers(12, 40)), "extra_rows": draw(st.sampled_from([0, 0, 5]))}


def _build(family: str, pieces: int, sizes: dict, fields: dict):
    import transformers as tf

    vocab = pieces + sizes["extra_rows"]
    ids = {"pad_token_id": SPECIALS.index("<pad>"), "bos_token_id": 0, "eos_token_id": 2, "num_labels": 2}
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=vocab, dim=sizes["hidden"], n_layers=sizes["layers"],
                                   n_heads=sizes["heads"], hidden_dim=sizes["ffn"], max_position_embeddings=64,
                                   **ids, **fields)
    common = {"vocab_size": vocab, "hidden_size": sizes["hidden"], "num_hidden_layers": sizes["layers"],
              "num_attention_heads": sizes["heads"], "intermediate_size": sizes["ffn"],
              "max_position_embeddings": 66, **ids}
    if family == "modernbert":
        common.update(cls_token_id=0, sep_token_id=2)
    cls = tf.AutoConfig.for_model(family).__class__
    return cls(**common, **fields)


@st.composite
def family_configs(draw, family: str) -> Drawn:
    """A tiny config of ``family`` with its wiring fields drawn from :data:`FAMILY_FIELDS`."""
    kind = draw(st.sampled_from(TOKENIZER_KINDS))
    sizes = _sizes(draw)
    fields = {}
    for key, strategy in FAMILY_FIELDS[family].items():
        value = draw(strategy)
        if value is ABSENT:
            continue
        widths = {"hidden": sizes["hidden"], "head": sizes["hidden"] // sizes["heads"]}  # follow the drawn sizes
        fields[key] = widths[value] if isinstance(value, str) and value in widths else value
    return Drawn(family, _build(family, _pieces(kind), sizes, fields), kind, {**sizes, **fields})


@functools.cache
def _pieces(kind: str) -> int:
    return len(tiny_tokenizer(kind))
