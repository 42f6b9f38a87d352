"""Whether a sentence-transformers folder's settings fit its encoder, read from configs alone: the
layout's widths against the encoder's hidden size, its ``max_seq_length`` against the positions
the encoder reads. ``validate`` checks a teacher with these before any weights are loaded;
:mod:`tinyplm.models.sentence` uses them when it builds and runs a model."""

from __future__ import annotations

from pathlib import Path

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.loading import LOAD_ERRORS
from tinyplm.models.pooling import SentenceLayout, read_layout


def layout_mismatch(layout: SentenceLayout, width: int) -> str | None:
    """What in ``layout`` does not fit an encoder of hidden size ``width`` (the Pooling's width, a
    Dense layer's inputs), naming the file and key; None when all fits."""
    if layout.pooling.dimension not in (None, width):
        return (f"the Pooling module pools vectors {layout.pooling.dimension} wide (embedding_dimension, or "
                f"word_embedding_dimension in older files, in its folder's config.json), but the encoder's hidden "
                f"size is {width}")
    before = width
    for i, spec in enumerate(layout.dense):
        if spec.in_features != before:
            return (f"Dense layer {i} ({spec.path or 'new'}) takes {spec.in_features} inputs (in_features in its "
                    f"config.json), but gets {before}")
        before = spec.out_features
    return None


def check_sentence_dir(path: Path) -> Path:
    """A sentence-transformers folder ``path`` checked from its files alone (no weights loaded, as
    ``validate`` does it): its layout (:func:`~tinyplm.models.pooling.read_layout`) and that its
    widths fit the encoder's config. Returns the encoder's folder (the root or e.g.
    ``0_Transformer/``), for the caller's checks of a checkpoint dir
    (:func:`~tinyplm.models.loading.check_model_dir`); a folder without modules.json is returned as
    it is. Raises ``ModelError`` naming the dir, file and key."""
    path = Path(path)
    layout = read_layout(path)
    if layout is None:
        return path
    folder = path / layout.transformer_path
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except LOAD_ERRORS:
        return folder  # the caller's check_model_dir and check_config name what is wrong with it
    mismatch = layout_mismatch(layout, roles.config_shape(config).hidden)
    if mismatch is not None:
        raise ModelError(f"{path}: {mismatch}")
    return folder


#: A tokenizer's ``model_max_length`` at or past this is transformers' "no limit" sentinel, not a length.
NO_LIMIT = 1_000_000


def readable_positions(config) -> int | None:
    """The most tokens ``config``'s encoder reads (its usable position rows), None when unbounded
    or unknown (no Hugging Face config)."""
    return config_positions(config.to_dict()) if hasattr(config, "to_dict") else None


def config_positions(cfg: dict) -> int | None:
    """:func:`readable_positions` of a ``config.json`` read as a dict."""
    positions = cfg.get("max_position_embeddings")
    usable = roles.usable_positions(cfg)  # RoBERTa's table starts after its padding id
    positions = usable if usable is not None else positions
    return positions if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0 else None


def own_limit(max_seq_length: int | None, tokenizer_limit: int | None, positions: int | None) -> int | None:
    """The token limit sentence-transformers reads a model at, so every place that states or uses it
    agrees (``embed-eval``, ``bench --task embedding``, a run's note on ``task.eval_max_length``):
    the layout's ``max_seq_length``, else the tokenizer's ``model_max_length`` (not the "no limit"
    sentinel), either cut to the ``positions`` the encoder reads; the positions alone when neither
    says; None when nothing does."""
    limit = max_seq_length
    if limit is None and tokenizer_limit is not None and tokenizer_limit < NO_LIMIT:
        limit = tokenizer_limit
    if positions is None:
        return limit
    return positions if limit is None else min(limit, positions)


def positions_cap(model) -> str | None:
    """Why :func:`~tinyplm.models.sentence.default_max_length` is less than the layout's
    ``max_seq_length`` (a sentence for the user), or None when it is not."""
    declared, positions = model.layout.max_seq_length, readable_positions(getattr(model, "config", None))
    if declared is None or positions is None or declared <= positions:
        return None
    return (f"max_seq_length {declared} (sentence-transformers' settings) is past the {positions} positions the "
            f"encoder reads, so texts are cut at {positions}")
