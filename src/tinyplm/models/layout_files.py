"""The files of a sentence-transformers layout, written: ``modules.json``, each module's config and
the model's settings, as ``SentenceTransformer(dir)`` reads them back (:func:`layout_json`), and the
folder ST gives each module (:func:`module_paths`, :func:`with_paths`). What the keys mean is read in
:mod:`tinyplm.models.pooling`.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath
from typing import Any

from tinyplm.errors import TinyplmError
from tinyplm.models.pooling import (
    DEFAULT_SIMILARITY,
    LEGACY_KEYS,
    MODEL_SETTINGS_FILE,
    MODULES_FILE,
    TRANSFORMER_SETTINGS,
    ModuleKind,
    SentenceLayout,
)


def module_paths(layout: SentenceLayout) -> list[tuple[ModuleKind, str]]:
    """Each module of ``layout`` in modules.json order with the folder ST gives it (``{idx}_{Kind}``;
    the Transformer at ``layout.transformer_path``)."""
    kinds = [ModuleKind.TRANSFORMER, ModuleKind.POOLING, *[ModuleKind.DENSE] * len(layout.dense)]
    kinds += [ModuleKind.NORMALIZE] if layout.normalize else []
    return [(kind, layout.transformer_path if i == 0 else f"{i}_{kind}") for i, kind in enumerate(kinds)]


def layout_json(layout: SentenceLayout) -> dict[str, Any]:
    """The ST files of ``layout``: relative path -> JSON value (modules.json is a list, the rest
    objects). Dense weights are not among them (the caller writes ``{path}/model.safetensors``).
    Raises ``TinyplmError`` when the pooling dimension is unknown (ST needs it)."""
    if layout.pooling.dimension is None:
        raise TinyplmError("layout_json: the pooling dimension is unknown; build the layout through "
                           "SentenceEncoder, which reads it from the encoder")
    paths = module_paths(layout)
    files: dict[str, Any] = {MODULES_FILE: [{"idx": i, "name": str(i), "path": path, "type": kind.st_type}
                                            for i, (kind, path) in enumerate(paths)]}
    pooling = {"word_embedding_dimension": layout.pooling.dimension}
    pooling |= {key: layout.pooling.mode is mode for key, mode in LEGACY_KEYS.items()}
    files[f"{paths[1][1]}/config.json"] = pooling | {"include_prompt": layout.pooling.include_prompt}
    dense_paths = [path for kind, path in paths if kind is ModuleKind.DENSE]
    for spec, path in zip(layout.dense, dense_paths, strict=True):
        files[f"{path}/config.json"] = {"in_features": spec.in_features, "out_features": spec.out_features,
                                        "bias": spec.bias, "activation_function": spec.activation}
    settings = str(PurePosixPath(layout.transformer_path or ".") / TRANSFORMER_SETTINGS[0])
    files[settings] = {"max_seq_length": layout.max_seq_length, "do_lower_case": layout.do_lower_case}
    files[MODEL_SETTINGS_FILE] = {"model_type": "SentenceTransformer", "prompts": dict(layout.prompts),
                                  "default_prompt_name": None,
                                  "similarity_fn_name": layout.similarity or DEFAULT_SIMILARITY}
    return files


def with_paths(layout: SentenceLayout, transformer_path: str = "") -> SentenceLayout:
    """``layout`` with the Transformer at ``transformer_path`` and each Dense at the folder
    :func:`module_paths` gives it (the layout as saved)."""
    moved = dataclasses.replace(layout, transformer_path=transformer_path)
    dense_paths = [path for kind, path in module_paths(moved) if kind is ModuleKind.DENSE]
    dense = tuple(dataclasses.replace(s, path=p) for s, p in zip(layout.dense, dense_paths, strict=True))
    return dataclasses.replace(moved, dense=dense)
