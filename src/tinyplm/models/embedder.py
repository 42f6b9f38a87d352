"""One loaded embedding model, whatever its kind, as a texts -> vectors callable.

An embedding model dir is one of two kinds, told apart by its files:

- a transformer pooled as its sentence-transformers layout says (``modules.json``: the packaged
  all-MiniLM-L6-v2, all-mpnet-base-v2, and every transformer student tinyplm saves):
  :class:`~tinyplm.models.sentence.SentenceEncoder`, encoded by
  :func:`~tinyplm.models.sentence.encode_texts` (length-sorted batches);
- a static sentence encoder (one vector per word piece, config ``model_type``
  ``tinyplm_static_sentence``): :class:`~tinyplm.models.classic.static_sentence.StaticSentenceEncoder`,
  encoded by :func:`~tinyplm.models.classic.static_sentence.encode_static` (numpy, no forward pass).

A transformer may also be in a runtime form (``modules.json`` beside a config.json saying
``tinyplm_format: onnx`` or ``openvino``: what a ``runtime`` compress step saves): its graph, with
pooling, Dense and normalisation inside, runs as :class:`~tinyplm.models.onnx.OrtEmbedder` or
:class:`~tinyplm.models.openvino.OvEmbedder` (:func:`load_graph_sentence`), encoded by
:func:`~tinyplm.models.sentence.encode_texts` (length-sorted batches, as a SentenceEncoder's).

:func:`load_embedder` reads either and refuses anything else up front, naming the dir and what was
expected; :class:`Embedder` is what evaluation (``tinyplm.evaluate.embedding``) calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
        return _KINDS[self.kind].encode(self.model, self.tokenizer, texts, self.max_length, self.batch_size)

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


def model_dir(name: str) -> Path:
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
    ``TinyplmError`` for a ``max_length`` or ``batch_size`` below 1, or a ``max_length`` past the
    positions of the model's encoder."""
    if max_length is not None and max_length < 1:
        raise TinyplmError(f"max_length must be at least 1, got {max_length}")
    if batch_size < 1:
        raise TinyplmError(f"batch_size must be at least 1, got {batch_size}")
    path = model_dir(str(name))
    kind = embedder_kind(path)
    model, tokenizer = _KINDS[kind].load(path)
    _check_window(path, model, max_length)
    return Embedder(model.eval(), tokenizer, kind, path, max_length, batch_size)


def _check_window(path: Path, model, max_length: int | None) -> None:
    """A ``max_length`` past the positions the encoder of ``model`` reads would fail at the first long
    text, after the sets were read and embedded: refused here (``TinyplmError``), as ``predict`` does."""
    from tinyplm.models.sentence_fit import readable_positions

    positions = readable_positions(getattr(model, "config", None))
    if max_length is not None and positions is not None and max_length > positions:
        raise TinyplmError(f"--max-length {max_length} is longer than the {positions} positions the encoder of "
                           f"{path} reads; give at most {positions}")


# ---------------------------------------------------------------------------------------------
# each kind: how it loads and how it encodes


def graph_form(path: Path) -> str | None:
    """The runtime form (``onnx``, ``openvino``) that ``path``'s config.json records, or None for
    a PyTorch model (or a config.json that cannot be read: the loaders name what is wrong with it)."""
    from tinyplm.models.onnx import FORMAT_KEY

    try:
        cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    form = cfg.get(FORMAT_KEY) if isinstance(cfg, dict) else None
    return str(form) if form else None


def load_graph_sentence(path: Path):
    """An embedding model's runtime form saved in ``path`` (by ``OrtEmbedder.save_to`` or
    ``OvEmbedder.save_to``) -> (model, tokenizer), the tokenizer lower-casing as its layout says.
    Raises ``ModelError`` naming the dir or file: a form other than onnx or openvino, damaged
    files (config, layout, tokenizer, Dense weights), a missing graph."""
    from tinyplm.models.loading import check_model_dir, load_tokenizer
    from tinyplm.models.onnx import FORMAT_KEY, SentenceParts
    from tinyplm.models.pooling import read_layout
    from tinyplm.models.sentence import lowercase

    path = Path(path)
    cfg = check_model_dir(path)
    form = cfg.get(FORMAT_KEY)
    if form not in _GRAPHS:
        raise ModelError(f"{path / 'config.json'}: {FORMAT_KEY}: {form!r}; an embedding model's runtime form is "
                         f"one of {', '.join(_GRAPHS)}")
    layout = read_layout(path)
    if layout is None or layout.transformer_path:
        raise ModelError(f"{path}: a runtime embedding model keeps its graph at the root: expected modules.json "
                         "naming the Transformer at path ''")
    config = _graph_config(path)
    sentence = SentenceParts(layout, tuple(_dense_state(path / spec.path) for spec in layout.dense))
    model = _GRAPHS[form](path, config, sentence)
    tokenizer = load_tokenizer(path, config.vocab_size)
    if layout.do_lower_case:
        lowercase(tokenizer)
    return model, tokenizer


def _load_onnx(path: Path, config, sentence):
    from tinyplm.models.onnx import ONNX_FILE, OrtEmbedder

    if not (path / ONNX_FILE).is_file():
        raise ModelError(f"{path / 'config.json'}: says onnx, but {path} holds no {ONNX_FILE}")
    return OrtEmbedder(path / ONNX_FILE, config, sentence)


def _load_openvino(path: Path, config, sentence):
    from tinyplm.models.openvino import load_openvino_dir

    return load_openvino_dir(path, config, sentence)


#: Each runtime form -> (dir, config, SentenceParts) -> its model.
_GRAPHS = {"onnx": _load_onnx, "openvino": _load_openvino}


def _graph_config(path: Path):
    """The ``transformers`` config of a graph dir; ``ModelError`` naming config.json when it cannot be used."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for a bad config
        raise ModelError(f"{path / 'config.json'}: transformers cannot use it ({exc.__class__.__name__}: "
                         f"{' '.join(str(exc).split())[:300]})") from None


def _dense_state(folder: Path) -> dict:
    """A Dense folder's weights (``linear.weight``, ``linear.bias``), read safely."""
    from tinyplm.models.pooling import DENSE_WEIGHTS

    file = next((folder / name for name in DENSE_WEIGHTS if (folder / name).is_file()), None)
    if file is None:
        raise ModelError(f"{folder}: the Dense module has no weights (expected {' or '.join(DENSE_WEIGHTS)})")
    try:
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(file))
        import torch

        return dict(torch.load(file, map_location="cpu", weights_only=True))
    except Exception as exc:  # safetensors and torch raise many types for a damaged file
        raise ModelError(f"{file}: cannot load weights ({exc.__class__.__name__}: "
                         f"{' '.join(str(exc).split())[:300]})") from None


def _load_transformer(path: Path):
    """A ``SentenceEncoder``, or the graph of its runtime form (:func:`graph_form`)."""
    from tinyplm.models.sentence import load_sentence_encoder

    return load_graph_sentence(path) if graph_form(path) else load_sentence_encoder(path)


def _load_static(path: Path):
    from tinyplm.models.classic.static_sentence import load_static_sentence

    return load_static_sentence(path)


def _encode_transformer(model, tokenizer, texts, max_length, batch_size) -> np.ndarray:
    """A ``SentenceEncoder`` or its graph, by ``encode_texts``."""
    from tinyplm.models.sentence import encode_texts

    return encode_texts(model, tokenizer, texts, max_length, batch_size)


def _encode_static(model, tokenizer, texts, max_length, batch_size) -> np.ndarray:
    from tinyplm.models.classic.static_sentence import encode_static

    return encode_static(model, tokenizer, texts, max_length)


@dataclass(frozen=True)
class _Kind:
    """How one kind of embedding model loads (dir -> (model, tokenizer)) and encodes (model,
    tokenizer, texts, max_length, batch_size -> vectors)."""

    load: Callable[[Path], tuple]
    encode: Callable[..., np.ndarray]


_KINDS: dict[EmbedderKind, _Kind] = {
    EmbedderKind.TRANSFORMER: _Kind(_load_transformer, _encode_transformer),
    EmbedderKind.STATIC: _Kind(_load_static, _encode_static),
}
