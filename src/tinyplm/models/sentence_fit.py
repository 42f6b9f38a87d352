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


def readable_positions(config) -> int | None:
    """The most tokens ``config``'s encoder reads (its usable position rows), None when unbounded
    or unknown (no Hugging Face config)."""
    if not hasattr(config, "to_dict"):
        return None
    positions = getattr(config, "max_position_embeddings", None)
    usable = roles.usable_positions(config.to_dict())  # RoBERTa's table starts after its padding id
    positions = usable if usable is not None else positions
    return positions if isinstance(positions, int) and positions != -1 else None


def positions_cap(model) -> str | None:
    """Why :func:`~tinyplm.models.sentence.default_max_length` is less than the layout's
    ``max_seq_length`` (a sentence for the user), or None when it is not."""
    declared, positions = model.layout.max_seq_length, readable_positions(getattr(model, "config", None))
    if declared is None or positions is None or declared <= positions:
        return None
    return (f"max_seq_length {declared} (sentence-transformers' settings) is past the {positions} positions the "
            f"encoder reads, so texts are cut at {positions}")
