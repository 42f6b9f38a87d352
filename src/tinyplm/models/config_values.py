"""Values in a checkpoint's config.json that no family can run, found from the file alone (before
any weight is loaded, by every command that reads a model): a padding id outside the word table
(where the family's code pads with the config's id, not a fixed one of its own),
heads that do not divide the hidden width, a segment table of no rows where the family adds a
segment embedding to every token. transformers finds each only deep inside building or running the
model, as an assertion or an index error; here the message names the file and the keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tinyplm.models.role_table import ROLES

#: Families whose ``type_vocab_size: 0`` means "no segment embedding" rather than a table of no rows.
NO_SEGMENTS_AT_ZERO = frozenset({"deberta-v2"})


def config_value_problem(cfg_file: Path, cfg: Mapping[str, object]) -> str | None:
    """The first value of ``cfg`` (``cfg_file``'s config.json) that cannot run, in one line naming
    the file, the keys and what would; None when none is found."""
    vocab, pad = cfg.get("vocab_size"), cfg.get("pad_token_id")
    family = ROLES.get(str(cfg.get("model_type")))
    fixed_pad = family is not None and family.position_pad is not None  # MPNet's code pads with its own id
    if _int(pad) and _int(vocab) and not fixed_pad and not 0 <= pad < vocab:
        return (f"{cfg_file}: pad_token_id {pad} is outside the word table (vocab_size {vocab}: ids 0 to "
                f"{vocab - 1}); expected the id of the tokenizer's padding token")
    sizes = family.sizes if family is not None else None  # the keys as the family's config names them
    if sizes is not None and not any(k in cfg for k in ("attention_head_size", "head_dim")):  # an explicit head size
        heads, width = cfg.get(sizes.heads), cfg.get(sizes.hidden)
        if _int(heads) and _int(width) and heads > 0 and width % heads:
            return (f"{cfg_file}: {sizes.heads} {heads} does not divide {sizes.hidden} {width}; expected a number "
                    f"of heads that splits the width evenly")
    if cfg.get("type_vocab_size") == 0 and cfg.get("model_type") not in NO_SEGMENTS_AT_ZERO:
        return (f"{cfg_file}: type_vocab_size 0: a {cfg.get('model_type')} model adds a segment (token type) "
                "embedding to every token, and a table of no rows cannot be read; expected at least 1 (2 for pairs)")
    return None


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
