"""One loaded embedding model, whatever its kind, as a texts -> vectors callable.

An embedding model dir is one of two kinds, told apart by its files:

- a transformer pooled as its sentence-transformers layout says (``modules.json``: the packaged
  all-MiniLM-L6-v2, all-mpnet-base-v2, and every transformer student tinyplm saves):
  :class:`~tinyplm.models.sentence.SentenceEncoder`, encoded by
  :func:`~tinyplm.models.sentence.encode_texts` (length-sorted batches);
- a static sentence encoder (one vector per word piece, config ``model_type``
  ``tinyplm_static_sentence``): :class:`~tinyplm.models.classic.static_sentence.StaticSentenceEncoder`,
  encoded by :func:`~tinyplm.models.classic.static_sentence.encode_static` (numpy, no forward pass).

:func:`load_embedder` reads either and refuses anything else up front, naming the dir and what was
expected; :class:`Embedder` is what evaluation (``tinyplm.evaluate.embedding``) calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
from torch import nn

from tinyplm.errors import ModelError, TinyplmError


class EmbedderKind(StrEnum):
    """How an embedding model makes its vectors (see the module docstring)."""

    TRANSFORMER = "transformer"
    STATIC = "static"


@dataclass
class Embedder:
    """A loaded embedding model: ``embed(texts)`` -> ``(len(texts), dim)`` float32, in input order,
    each text cut to ``max_length`` tokens (None: the model's own limit) and run in batches of
    ``batch_size``."""

    model: nn.Module
    tokenizer: object
    kind: EmbedderKind
    path: Path
    max_length: int | None = None
    batch_size: int = 64

    @property
    def dim(self) -> int:
        """The width of the vectors."""
        return int(self.model.dim) if self.kind is EmbedderKind.TRANSFORMER else int(self.model.config.embed_dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts``: ``(len(texts), dim)`` float32, row i for ``texts[i]``."""
        if self.kind is EmbedderKind.STATIC:
            from tinyplm.models.classic.static_sentence import encode_static

            return encode_static(self.model, self.tokenizer, texts, self.max_length)
        from tinyplm.models.sentence import encode_texts

        return encode_texts(self.model, self.tokenizer, texts, self.max_length, self.batch_size)

    __call__ = embed


def embedder_kind(path: Path) -> EmbedderKind:
    """The kind of the embedding model in ``path``; raises ``ModelError`` naming the dir when it is
    neither (a classifier, a bare encoder without ``modules.json``)."""
    from tinyplm.models.classic.static_sentence import is_static_sentence_dir

    if is_static_sentence_dir(path):
        return EmbedderKind.STATIC
    if (Path(path) / "modules.json").is_file():
        return EmbedderKind.TRANSFORMER
    raise ModelError(f"{path}: not an embedding model: expected modules.json (a sentence-transformers layout: "
                     "Transformer -> Pooling [-> Dense] [-> Normalize]) or a static sentence encoder's config.json "
                     "(model_type tinyplm_static_sentence); the pooling is read from the model, never assumed")


def _model_dir(name: str) -> Path:
    """An alias or a dir -> the model dir. A sentence-transformers layout (``modules.json``) may keep
    its Transformer in a subfolder (``0_Transformer/``), with no ``config.json`` at the root: its files
    are checked when it is loaded (:func:`~tinyplm.models.sentence.load_sentence_encoder`); any other
    dir is checked as a Hugging Face checkpoint (:func:`~tinyplm.models.loading.resolve_model_dir`)."""
    from tinyplm.models.loading import ALIASES, resolve_model_dir

    path = Path(name).expanduser()
    if name.lower() not in ALIASES and path.is_dir() and (path / "modules.json").is_file():
        return path
    return resolve_model_dir(name)


def load_embedder(name: str | Path, max_length: int | None = None, batch_size: int = 64) -> Embedder:
    """An alias (``minilm-l6``, ``mpnet-base``) or model dir -> its :class:`Embedder`. Raises
    ``ModelError`` naming the dir (not found, not an embedding model, damaged files) and
    ``TinyplmError`` for a ``max_length`` or ``batch_size`` below 1."""
    if max_length is not None and max_length < 1:
        raise TinyplmError(f"max_length must be at least 1, got {max_length}")
    if batch_size < 1:
        raise TinyplmError(f"batch_size must be at least 1, got {batch_size}")
    path = _model_dir(str(name))
    kind = embedder_kind(path)
    if kind is EmbedderKind.STATIC:
        from tinyplm.models.classic.static_sentence import load_static_sentence

        model, tokenizer = load_static_sentence(path)
    else:
        from tinyplm.models.sentence import load_sentence_encoder

        model, tokenizer = load_sentence_encoder(path)
    return Embedder(model.eval(), tokenizer, kind, path, max_length, batch_size)
