"""Save and load classic students: config.json + model.safetensors + their tokenizer.

A saved dir holds ``config.json`` (``model_type: tinyplm_family``, the shape and labels),
``model.safetensors`` (every tensor, the TF-IDF idf and coefficients included; nothing pickled)
and the tokenizer: ``word_tokenizer.json`` (word and n-gram models) or the transformer's own
files (``feature_bilstm`` and the static archs). :func:`load_family` rebuilds the module from
the config and loads the weights strictly, so a reloaded model gives identical logits. A model
may store a tensor otherwise than it holds it (a static table in fp16 or int8:
``FamilyModule.saved_state`` / ``load_saved_state``); loading rebuilds the float tensor.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from tinyplm.errors import ModelError
from tinyplm.models.classic.config import MODEL_TYPE, STATIC_ARCHS, TEACHER_TOKENIZED, FamilyConfig
from tinyplm.models.classic.words import TOKENIZER_FILE, WordTokenizer
from tinyplm.models.finite import refuse_nonfinite_weights
from tinyplm.models.onnx import FORMAT_KEY, ONNX_FILE, OrtClassifier
from tinyplm.tasks.heads import head_of_name

WEIGHTS = "model.safetensors"


def build_module(config: FamilyConfig) -> nn.Module:
    """The (untrained) module of ``config.arch``, its parameter counts recorded in its config."""
    from tinyplm.models.classic.lstm import LstmClassifier
    from tinyplm.models.classic.tfidf import TfidfClassifier

    if config.arch == "tfidf_lr":
        model = TfidfClassifier(config)
    elif config.arch in ("lstm", "bilstm"):
        model = LstmClassifier(config)
    elif config.arch == "elmo_bilstm":
        from tinyplm.models.classic.elmo import ElmoBiLstm

        model = ElmoBiLstm(config)
    elif config.arch == "feature_bilstm":
        from tinyplm.models.classic.features import FeatureBiLstm

        model = FeatureBiLstm(config)
    elif config.arch in STATIC_ARCHS:
        from tinyplm.models.classic.static import StaticBag, StaticBiLstm, StaticCnn

        model = {"static": StaticBag, "static_cnn": StaticCnn, "static_bilstm": StaticBiLstm}[config.arch](config)
    else:
        raise ModelError(f"classic arch {config.arch!r} cannot be built by this version of tinyplm")
    model.record_params()
    return model


def is_family(model) -> bool:
    """True for a classic student in PyTorch (its config's ``model_type``; an ONNX graph of
    one is an ``OrtClassifier``)."""
    return isinstance(model, nn.Module) and getattr(getattr(model, "config", None), "model_type", None) == MODEL_TYPE


def is_family_dir(path: Path) -> bool:
    """True when ``path/config.json`` names a classic student (False for anything else, a
    damaged file included: the ordinary checks report those)."""
    try:
        doc = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("model_type") == MODEL_TYPE


def family_tokenizer_files(cfg: dict) -> tuple[str, ...]:
    """The tokenizer file a classic student's dir holds instead of a transformer's (its word
    vocabulary), given its config.json; none for any other model."""
    return (TOKENIZER_FILE,) if cfg.get("model_type") == MODEL_TYPE else ()


def save_family(model: nn.Module, folder: Path) -> None:
    """Write config.json and model.safetensors of ``model`` into ``folder`` (the caller writes the
    tokenizer and makes the folder appear atomically: ``models.io.save_model``)."""
    from safetensors.torch import save_file

    model.config.architectures = [type(model).__name__]
    model.record_params()
    state = model.saved_state()  # first: a static table is rounded to its stored precision here
    model.config.save_pretrained(folder)
    save_file(state, str(Path(folder) / WEIGHTS), metadata={"format": "pt"})


def load_family(path: Path, labels: tuple[str, ...], is_regression: bool = False, head: str = "sequence"):
    """A saved classic student and its tokenizer -> (model in eval mode, tokenizer).

    Raises ``ModelError`` naming the file when config.json cannot be read as a classic-model config, the
    weights are missing or do not fit it, the tokenizer is missing or larger than the model's
    vocabulary, or the task is not sentence classification with the model's number of labels."""

    path = Path(path)
    if not head_of_name(str(head)).row.classic or is_regression:
        raise ModelError(f"{path}: a classic student classifies sentences; this task needs a {head} "
                         f"{'regression ' if is_regression else ''}head")
    try:
        config = FamilyConfig.from_pretrained(str(path))
    except (OSError, ValueError, TypeError) as exc:
        why = f"{exc.__class__.__name__}: {exc}"
        raise ModelError(f"{path / 'config.json'}: not a classic-model config ({why})") from None
    if config.num_labels != len(labels):
        raise ModelError(f"{path}: its classifier has {config.num_labels} outputs but the task needs {len(labels)}")
    if getattr(config, FORMAT_KEY, None) == "onnx":  # exported: run by ONNX Runtime
        if not (path / ONNX_FILE).is_file():
            raise ModelError(f"{path / 'config.json'}: says {FORMAT_KEY}: onnx, but {path} holds no {ONNX_FILE}")
        return OrtClassifier(path / ONNX_FILE, config), load_family_tokenizer(path, config)
    if getattr(config, FORMAT_KEY, None) == "openvino":  # a static student on OpenVINO
        from tinyplm.models.openvino import load_openvino_dir

        return load_openvino_dir(path, config), load_family_tokenizer(path, config)
    model = build_module(config)
    load_weights(model, path)
    return model.eval(), load_family_tokenizer(path, config)


def load_weights(model: nn.Module, path: Path) -> None:
    """``path``'s ``model.safetensors`` into ``model`` (its ``load_saved_state``). Raises
    ``ModelError`` naming the file when it is missing or does not fit ``path``'s config.json, and
    naming the weight when one is not a number (:mod:`tinyplm.models.finite`)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    weights = Path(path) / WEIGHTS
    if not weights.is_file():
        raise ModelError(f"{path}: no {WEIGHTS}")
    try:
        model.load_saved_state(load_file(str(weights)))
    except (RuntimeError, OSError, SafetensorError) as exc:
        why = " ".join(str(exc).split())[:300]
        raise ModelError(f"{weights}: does not fit {Path(path) / 'config.json'} ({why})") from None
    refuse_nonfinite_weights(model, path)


def load_family_tokenizer(path: Path, config: FamilyConfig):
    """The tokenizer saved with a classic student: its word vocabulary, or (feature_bilstm and the
    static archs) the transformer's tokenizer. Raises ``ModelError``, also when a static student's
    tokenizer gives ids past the model's ``vocab_size``."""
    if config.arch in TEACHER_TOKENIZED and not (path / TOKENIZER_FILE).is_file():
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
        except Exception as exc:  # transformers raises many types for broken tokenizer files
            raise ModelError(f"{path}: cannot load the transformer's tokenizer ({exc.__class__.__name__})") from None
        if config.arch in STATIC_ARCHS and len(tok) > config.vocab_size:
            raise ModelError(f"{path}: its tokenizer has {len(tok)} word pieces but the model reads "
                             f"{config.vocab_size} (vocab_size in config.json); the tokenizer is not this model's")
        return tok
    tok = WordTokenizer.load(path)
    if len(tok) > config.vocab_size:
        raise ModelError(f"{path / TOKENIZER_FILE}: has {len(tok)} tokens but the model's vocab_size is "
                         f"{config.vocab_size}; the vocabulary does not belong to this model")
    return tok
