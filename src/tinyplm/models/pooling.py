"""The sentence-transformers (ST) layout of an embedding model: how its token vectors become one vector.

An ST folder lists its modules in ``modules.json``: a Transformer (the Hugging Face encoder, at the root
or in e.g. ``0_Transformer``), a Pooling (``1_Pooling/config.json``, one mode), any Dense layers (config
and weights) and an optional Normalize (L2). :func:`read_layout` reads it (the pooling is always read,
never assumed), :func:`pool` pools with ST's own arithmetic; :mod:`tinyplm.models.layout_files` writes
the files that ``SentenceTransformer(dir)`` reads back. sentence-transformers is not imported (tinyplm runs without
it); the keys and arithmetic follow its Pooling, Dense, Normalize and Transformer modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pydantic import Field
from torch import Tensor, nn

from tinyplm.errors import ModelError, TinyplmError
from tinyplm.models.pool_ops import PoolMode
from tinyplm.models.pool_ops import pool as pool_mode
from tinyplm.tasks.json_layout import Layout, load_json, problem, shown, validate

MODULES_FILE = "modules.json"
MODEL_SETTINGS_FILE = "config_sentence_transformers.json"
#: Where ST keeps the Transformer's settings (the first that exists is read, as ST does).
TRANSFORMER_SETTINGS = tuple(f"sentence_{name}_config.json" for name in ("bert", "roberta", "distilbert", "camembert",
                                                                          "albert", "xlm-roberta"))


class Similarity(StrEnum):
    """ST's similarity functions, by their ``similarity_fn_name`` (how the model's vectors are meant
    to be compared: :mod:`tinyplm.evaluate.similarity` compares them so)."""

    COSINE = "cosine"
    DOT = "dot"
    EUCLIDEAN = "euclidean"
    MANHATTAN = "manhattan"


#: ST's similarity function when a model names none.
DEFAULT_SIMILARITY = Similarity.COSINE.value
DENSE_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
L = TypeVar("L", bound=Layout)


#: ST's boolean pooling keys (the form every ST version reads) -> the mode each switches on.
LEGACY_KEYS: dict[str, PoolMode] = {
    "pooling_mode_cls_token": PoolMode.CLS,
    "pooling_mode_max_tokens": PoolMode.MAX,
    "pooling_mode_mean_tokens": PoolMode.MEAN,
    "pooling_mode_mean_sqrt_len_tokens": PoolMode.MEAN_SQRT_LEN_TOKENS,
    "pooling_mode_weightedmean_tokens": PoolMode.WEIGHTEDMEAN,
    "pooling_mode_lasttoken": PoolMode.LASTTOKEN,
}


class ModuleKind(StrEnum):
    """The ST modules tinyplm reads, by class name (the last part of a ``modules.json`` type)."""

    TRANSFORMER = "Transformer"
    POOLING = "Pooling"
    DENSE = "Dense"
    NORMALIZE = "Normalize"

    @property
    def st_type(self) -> str:
        """The type string written to modules.json (the form every ST version imports)."""
        return f"sentence_transformers.models.{self.value}"


#: The order tinyplm reads: each kind -> the kinds that may follow it (None: the start).
_NEXT: dict[ModuleKind | None, set[ModuleKind]] = {
    None: {ModuleKind.TRANSFORMER}, ModuleKind.TRANSFORMER: {ModuleKind.POOLING},
    ModuleKind.POOLING: {ModuleKind.DENSE, ModuleKind.NORMALIZE},
    ModuleKind.DENSE: {ModuleKind.DENSE, ModuleKind.NORMALIZE}, ModuleKind.NORMALIZE: set()}
_ORDER = "Transformer, Pooling, any number of Dense, then an optional Normalize"

#: Dense activations by the name ST writes (``module.Class``): only these torch classes are built.
ACTIVATIONS: dict[str, type[nn.Module]] = {
    f"{cls.__module__}.{cls.__name__}": cls for cls in (nn.Identity, nn.Tanh, nn.ReLU, nn.GELU, nn.Sigmoid, nn.SiLU)
}
TANH = "torch.nn.modules.activation.Tanh"  # ST's default when a Dense config names none


@dataclass(frozen=True)
class Pooling:
    """One pooling mode; ``include_prompt``: whether the tokens of a prompt put before a text are
    pooled too (tinyplm pools every token, so ``tinyplm embed-eval`` gives a model whose pooling
    leaves them out no prompts); ``dimension`` is the token vector width it pools (None: not known yet)."""

    mode: PoolMode
    include_prompt: bool = True
    dimension: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in set(PoolMode):
            raise TinyplmError(f"unknown pooling mode {self.mode!r}; expected one of {', '.join(PoolMode)}")
        object.__setattr__(self, "mode", PoolMode(self.mode))


@dataclass(frozen=True)
class DenseSpec:
    """One Dense layer: ``Linear(in_features, out_features, bias)`` then ``activation`` (ST's name for
    it, a key of :data:`ACTIVATIONS`); ``path`` is its folder in the model dir ("" for a new layer)."""

    in_features: int
    out_features: int
    bias: bool = True
    activation: str = TANH
    path: str = ""

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise TinyplmError(f"unsupported Dense activation {self.activation!r}; "
                               f"tinyplm builds {', '.join(ACTIVATIONS)}")


@dataclass(frozen=True)
class SentenceLayout:
    """How an encoder's token vectors become one sentence vector.

    ``transformer_path``: the encoder's folder ("" = the model dir itself, or e.g. "0_Transformer");
    ``dense``: Dense layers after pooling, in order; ``normalize``: L2-normalise last;
    ``max_seq_length``: the token limit ST applies (None: the tokenizer's, capped at the model's
    positions); ``do_lower_case``: lower-case text before tokenizing. ``prompts`` (name, text) and
    ``similarity`` (ST's ``similarity_fn_name``; None: its default, cosine) change no vector the
    model computes for a text: they say how its texts are prefixed and its vectors compared, which
    ``tinyplm embed-eval`` and a run of the embedding task follow, and a model saved from this layout
    (a student of it) keeps them for its users (``encode(..., prompt_name=...)``)."""

    pooling: Pooling
    transformer_path: str = ""
    dense: tuple[DenseSpec, ...] = ()
    normalize: bool = False
    max_seq_length: int | None = None
    do_lower_case: bool = False
    prompts: tuple[tuple[str, str], ...] = ()
    similarity: str | None = None

    @property
    def dim(self) -> int | None:
        """The width of the sentence vector (None while the pooling dimension is unknown)."""
        return self.dense[-1].out_features if self.dense else self.pooling.dimension


# ---------------------------------------------------------------------------------------------
# reading

class _Entry(Layout):
    """One entry of modules.json."""

    path: str
    type: str


class _TransformerKeys(Layout):
    """sentence_bert_config.json: what changes the vectors (other keys are ST's business)."""

    max_seq_length: int | None = Field(None, gt=0)
    do_lower_case: bool = False
    transformer_task: str = "feature-extraction"
    module_output_name: str = "token_embeddings"
    modality_config: dict[str, Any] | None = None
    processing_kwargs: dict[str, Any] | None = None


class _PoolingKeys(Layout):
    """1_Pooling/config.json, in ST's boolean form (``pooling_mode_*``) or its newer ``pooling_mode``."""

    word_embedding_dimension: int | None = Field(None, gt=0)
    embedding_dimension: int | None = Field(None, gt=0)
    pooling_mode: str | list[str] | None = None
    pooling_mode_cls_token: bool = False
    pooling_mode_max_tokens: bool = False
    pooling_mode_mean_tokens: bool = False
    pooling_mode_mean_sqrt_len_tokens: bool = False
    pooling_mode_weightedmean_tokens: bool = False
    pooling_mode_lasttoken: bool = False
    include_prompt: bool = True


class _NormalizeKeys(Layout):
    """A Normalize folder's config.json (ST 6 writes one; older versions none)."""

    module_input_name: str = "sentence_embedding"
    module_output_name: str | None = None


class _DenseKeys(_NormalizeKeys):
    """2_Dense/config.json."""

    in_features: int = Field(gt=0)
    out_features: int = Field(gt=0)
    bias: bool = True
    activation_function: str = TANH
    use_residual: bool = False


class _ModelKeys(Layout):
    """config_sentence_transformers.json: the settings that would change ST's vectors."""

    prompts: dict[str, str | None] = {}
    default_prompt_name: str | None = None
    truncate_dim: int | None = None
    similarity_fn_name: str | None = None
    model_type: str | None = None


_TEXT = {"method": "forward", "method_output_name": "last_hidden_state"}
_SENTENCE = (None, "sentence_embedding")
#: Settings file layout -> key -> the values tinyplm computes the same vectors for, and why.
_REQUIRED: dict[type[Layout], dict[str, tuple[tuple, str]]] = {
    _TransformerKeys: {"transformer_task": (("feature-extraction",), "tinyplm pools token vectors"),
                       "module_output_name": (("token_embeddings",), "tinyplm pools token vectors"),
                       "modality_config": ((None, {"text": _TEXT}), "tinyplm reads plain text only"),
                       "processing_kwargs": ((None, {}), "tinyplm tokenizes with the tokenizer's own settings")},
    _NormalizeKeys: {"module_input_name": (_SENTENCE, "tinyplm normalises the sentence vector"),
                     "module_output_name": (_SENTENCE, "tinyplm normalises the sentence vector")},
    _DenseKeys: {"module_input_name": (_SENTENCE, "tinyplm applies Dense to the sentence vector"),
                 "module_output_name": (_SENTENCE, "tinyplm applies Dense to the sentence vector"),
                 "use_residual": ((False,), "tinyplm builds Dense layers without a residual connection")},
    _ModelKeys: {"truncate_dim": ((None,), "tinyplm does not cut its vectors short"),
                 "model_type": ((None, "SentenceTransformer"), "tinyplm reads dense sentence-transformers models")},
}


def _settings(layout: type[L], file: Path) -> L:
    """``file`` read and checked against ``layout`` and the values :data:`_REQUIRED` allows."""
    keys = validate(layout, load_json(file, ModelError), file, ModelError)
    for key, (allowed, why) in _REQUIRED.get(layout, {}).items():
        if getattr(keys, key) not in allowed:
            shown_allowed = " or ".join(repr(v) for v in allowed)
            raise ModelError(f"{file}: {key}: expected {shown_allowed} ({why}), got {getattr(keys, key)!r}")
    return keys


def read_layout(model_dir: Path) -> SentenceLayout | None:
    """The ST layout of ``model_dir``; None when it has no modules.json.

    Raises ``ModelError`` naming the file and key for malformed JSON, modules in another order than
    Transformer, Pooling, Dense..., Normalize, a module type tinyplm does not support, a missing or
    ambiguous pooling config, a Dense without weights, and settings that would make ST's vectors
    differ from tinyplm's (a default prompt, ``truncate_dim``, a non-text Transformer output)."""
    model_dir = Path(model_dir)
    file = model_dir / MODULES_FILE
    if not file.is_file():
        return None
    paths: dict[ModuleKind, list[str]] = {kind: [] for kind in ModuleKind}
    for kind, entry in _entries(file):
        paths[kind].append(entry.path)
    transformer = paths[ModuleKind.TRANSFORMER][0]
    found = [model_dir / transformer / n for n in TRANSFORMER_SETTINGS if (model_dir / transformer / n).is_file()]
    settings = _settings(_TransformerKeys, found[0]) if found else _TransformerKeys()
    model = _ModelKeys()
    if (model_dir / MODEL_SETTINGS_FILE).is_file():
        model = _settings(_ModelKeys, model_dir / MODEL_SETTINGS_FILE)
        _check_prompt(model, model_dir / MODEL_SETTINGS_FILE)
    if model.similarity_fn_name is not None and model.similarity_fn_name not in set(Similarity):
        raise ModelError(f"{model_dir / MODEL_SETTINGS_FILE}: similarity_fn_name: {model.similarity_fn_name!r} is "
                         f"not a sentence-transformers similarity ({', '.join(Similarity)})")
    for path in paths[ModuleKind.NORMALIZE]:
        if (model_dir / path / "config.json").is_file():
            _settings(_NormalizeKeys, model_dir / path / "config.json")
    return SentenceLayout(
        pooling=_read_pooling(model_dir / paths[ModuleKind.POOLING][0] / "config.json"),
        transformer_path=transformer, dense=tuple(_read_dense(model_dir, p) for p in paths[ModuleKind.DENSE]),
        normalize=bool(paths[ModuleKind.NORMALIZE]), max_seq_length=settings.max_seq_length,
        do_lower_case=settings.do_lower_case,
        prompts=tuple((name, text) for name, text in model.prompts.items() if text is not None),
        similarity=None if model.similarity_fn_name in (None, DEFAULT_SIMILARITY) else model.similarity_fn_name,
    )


def layout_similarity(model_dir: Path) -> str | None:
    """The similarity function (ST's ``similarity_fn_name``) the model in ``model_dir`` is meant to be
    compared by: None for cosine (ST's default) or a dir without ``modules.json``. Raises
    ``ModelError`` as :func:`read_layout` does."""
    layout = read_layout(model_dir)
    return layout.similarity if layout is not None else None


def _entries(file: Path) -> list[tuple[ModuleKind, _Entry]]:
    """modules.json's entries with their kinds, checked for shape, paths, types and order."""
    raw = load_json(file, ModelError)
    if not isinstance(raw, list):
        raise ModelError(f"{file}: expected a list of modules, got {shown(raw)}")
    out: list[tuple[ModuleKind, _Entry]] = []
    before: ModuleKind | None = None
    for i, item in enumerate(raw):
        bad = problem(_Entry, item, at=(i,))
        if bad:
            raise ModelError(f"{file}: {bad}")
        entry = _Entry.model_validate(item)
        if entry.path.startswith(("/", "\\")) or ".." in PurePosixPath(entry.path).parts:
            raise ModelError(f"{file}: [{i}].path: expected a folder inside the model dir, got {entry.path!r}")
        kind = module_kind(entry.type)
        if kind is None:
            supported = ", ".join(k.st_type for k in ModuleKind)
            static = ("; a StaticEmbedding folder loads only as a static sentence encoder tinyplm saved (its "
                      "config.json says so), not a model2vec or other StaticEmbedding model"
                      if "StaticEmbedding" in entry.type else "")
            raise ModelError(f"{file}: [{i}].type: module type {entry.type!r} is not supported by tinyplm "
                             f"(supported: {supported}){static}")
        if kind not in _NEXT[before]:
            raise ModelError(f"{file}: [{i}].type: a {kind} module after {before or 'nothing'}; "
                             f"tinyplm reads {_ORDER}")
        out.append((kind, entry))
        before = kind
    if before in (None, ModuleKind.TRANSFORMER):
        raise ModelError(f"{file}: no Pooling module; tinyplm reads {_ORDER}")
    return out


def module_kind(st_type: str) -> ModuleKind | None:
    """The kind of a modules.json ``type`` (any ST version's path to the class), or None."""
    name = st_type.rsplit(".", 1)[-1]
    return ModuleKind(name) if st_type.startswith("sentence_transformers.") and name in set(ModuleKind) else None


def _read_pooling(file: Path) -> Pooling:
    """The one pooling mode of a Pooling config; raises ``ModelError`` naming the file and keys."""
    if not file.is_file():
        raise ModelError(f"{file}: missing; the Pooling module of {file.parents[1]} needs its config.json "
                         f"(one of {', '.join(LEGACY_KEYS)} set to true)")
    keys = _settings(_PoolingKeys, file)
    if keys.pooling_mode is not None:  # ST 5+: the modes by name
        named = [keys.pooling_mode] if isinstance(keys.pooling_mode, str) else keys.pooling_mode
        unknown = [m for m in named if m not in set(PoolMode)]
        if unknown:
            raise ModelError(f"{file}: pooling_mode: unknown mode {unknown[0]!r}; "
                             f"expected one of {', '.join(PoolMode)}")
        modes, where = [PoolMode(m) for m in named], "pooling_mode"
    else:
        on = [key for key in LEGACY_KEYS if getattr(keys, key)]
        modes, where = [LEGACY_KEYS[key] for key in on], " and ".join(on)
        if not on:
            raise ModelError(f"{file}: no pooling mode is true; expected exactly one of {', '.join(LEGACY_KEYS)} "
                             "(tinyplm never assumes one)")
    if len(modes) != 1:
        raise ModelError(f"{file}: {where}: {len(modes)} pooling modes ({', '.join(modes)}); tinyplm pools one "
                         "way (ST's concatenation of several modes is not supported)")
    dimension = keys.embedding_dimension or keys.word_embedding_dimension
    return Pooling(modes[0], include_prompt=keys.include_prompt, dimension=dimension)


def _read_dense(model_dir: Path, path: str) -> DenseSpec:
    """A Dense module's config (its weights must be there too; they are read when loading)."""
    file = model_dir / path / "config.json"
    if not file.is_file():
        raise ModelError(f"{file}: missing; a Dense module needs its config.json (in_features, out_features, ...)")
    keys = _settings(_DenseKeys, file)
    if not any((model_dir / path / w).is_file() for w in DENSE_WEIGHTS):
        raise ModelError(f"{model_dir / path}: the Dense module has no weights (expected {' or '.join(DENSE_WEIGHTS)})")
    return DenseSpec(keys.in_features, keys.out_features, keys.bias, activation_name(keys.activation_function, file),
                     path)


def activation_name(name: str, file: Path | str = "Dense config") -> str:
    """``name`` (any ``torch.`` path to an activation class) as a key of :data:`ACTIVATIONS`;
    raises ``ModelError`` naming ``file`` for an activation tinyplm does not build."""
    by_class = {cls.__name__: key for key, cls in ACTIVATIONS.items()}
    found = by_class.get(name.rsplit(".", 1)[-1]) if name.startswith("torch.") else None
    if found is None:
        raise ModelError(f"{file}: activation_function: {name!r} is not supported (tinyplm builds "
                         f"{', '.join(ACTIVATIONS)})")
    return found


def _check_prompt(keys: _ModelKeys, file: Path) -> None:
    """Refuse a default prompt: ST would prepend it to every text, where tinyplm puts prompts only
    before retrieval queries and documents (``embed-eval``); and a default naming no prompt, which
    ST refuses to load."""
    if keys.default_prompt_name and keys.default_prompt_name not in keys.prompts:
        raise ModelError(f"{file}: default_prompt_name: {keys.default_prompt_name!r} names no prompt of "
                         f"'prompts' ({', '.join(map(repr, keys.prompts)) or 'none'}); sentence-transformers "
                         "refuses to load it: drop the key, or name one of them")
    if keys.default_prompt_name and keys.prompts.get(keys.default_prompt_name):
        raise ModelError(f"{file}: default_prompt_name: ST prepends the prompt {keys.default_prompt_name!r} to "
                         "every text; tinyplm prepends no prompt to every text")


def pool(hidden: Tensor, mask: Tensor, pooling: Pooling) -> Tensor:
    """Pool ``hidden`` ``(batch, seq, hidden)`` under ``mask`` ``(batch, seq)`` as ``pooling`` says
    (:func:`tinyplm.models.pool_ops.pool`, ST's arithmetic)."""
    return pool_mode(hidden, mask, pooling.mode)
