"""Save models atomically in Hugging Face format, and fingerprint saved models.

A saved model directory holds config.json, model.safetensors and the tokenizer files, so
``AutoModelForSequenceClassification.from_pretrained(dir)`` and ``AutoTokenizer.from_pretrained(dir)``
load it with nothing else.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from tinyplm.files import COMPLETE_MARK, replace_dir
from tinyplm.models import roles
from tinyplm.models.classic.io import is_family, save_family
from tinyplm.models.onnx import FORMAT_KEY, ONNX_FILE, OrtClassifier
from tinyplm.models.openvino import OV_BIN, OV_XML, RUNTIME_KEY, OvClassifier, runtime_record, save_openvino
from tinyplm.models.quantized import is_quantized, quantized_state
from tinyplm.models.shape import SHAPE_KEY, record_shape, unique_state

if TYPE_CHECKING:  # transformers' model classes take seconds to import; predict and serve need none here
    from transformers import PreTrainedModel


def save_model(model: PreTrainedModel, tokenizer, path: Path) -> Path:
    """Write model + tokenizer to ``path`` atomically (temp dir, then rename). A model with a layout of
    its own saves itself through its ``save_to(tokenizer, path)`` (a
    :class:`~tinyplm.models.sentence.SentenceEncoder`: the sentence-transformers layout).

    An existing complete directory at ``path`` is replaced only after the new one is written.
    """
    if callable(getattr(model, "save_to", None)):  # a model with its own layout (a SentenceEncoder)
        return model.save_to(tokenizer, path)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if is_family(model):  # a classic student (LSTM, TF-IDF ...): its own config and weights
        save_family(model, tmp)
    elif isinstance(model, OrtClassifier):  # an ONNX model: the graph file, its config, the tokenizer
        shutil.copyfile(model.path, tmp / ONNX_FILE)
        setattr(model.config, FORMAT_KEY, "onnx")
        model.config.save_pretrained(tmp)
        model.path = path / ONNX_FILE  # where it will live after the rename below
    elif isinstance(model, OvClassifier):  # OpenVINO IR (xml + bin) and a config saying how it runs
        save_openvino(model.model, tmp, model.precision_asked)
        setattr(model.config, FORMAT_KEY, "openvino")
        record = runtime_record(model.precision_asked, model.precision, model.quantization, model.widen)
        setattr(model.config, RUNTIME_KEY, record)
        model.config.save_pretrained(tmp)
        model.path = path / OV_XML
    elif is_quantized(model):  # quantized weights as plain tensors at their true size
        from safetensors.torch import save_file

        record_shape(model)
        save_file(quantized_state(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        model.config.architectures = [type(model).__name__]  # what save_pretrained would record
        model.config.save_pretrained(tmp)
    else:
        if roles.is_encoder(model):
            record_shape(model)  # per-layer heads/FFN, ranks, sharing travel with the weights
        if getattr(model.config, SHAPE_KEY, None):  # our structure: one copy of each shared tensor
            from safetensors.torch import save_file

            save_file(unique_state(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
            model.config.architectures = [type(model).__name__]  # what save_pretrained would record
            model.config.save_pretrained(tmp)
        else:
            model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / COMPLETE_MARK).write_text("ok\n")
    return replace_dir(tmp, path)


def is_complete(path: Path) -> bool:
    """True if ``path`` is a model directory written completely by :func:`save_model`."""
    return (Path(path) / COMPLETE_MARK).is_file()


#: The files of a model dir (and of each sentence-transformers module folder) whose bytes make
#: its fingerprint, in order: config and weights in each saved form (PyTorch, ONNX, OpenVINO IR).
#: Tokenizer files are left out (a cache keys its token ids by their own fingerprint).
WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", ONNX_FILE, OV_XML, OV_BIN)
#: Weights saved in shards, with their index.
SHARD_PATTERNS = ("model-*-of-*.safetensors", "pytorch_model-*-of-*.bin", "*.index.json")
#: A sentence-transformers layout's own files: which modules, how it pools, its prompts and limits.
LAYOUT_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def fingerprint(path: Path, legacy: bool = False) -> str:
    """sha256 over the weight and config files of a model dir (identifies a teacher for caches and
    for reusing a finished run), in whichever form it is saved: PyTorch (sharded too), ONNX or
    OpenVINO IR (graph and weights); for a sentence-transformers layout also its module list,
    settings and every module's folder (pooling, Dense, Normalize ...), which change the vectors
    as much as the encoder does. ``legacy``: the config and single weight files of the root alone,
    as fingerprints recorded before the layout and shards were read (a finished run records one)."""
    h = hashlib.sha256()
    for name, f in _fingerprint_files(Path(path), legacy):
        h.update(name.encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _fingerprint_files(root: Path, legacy: bool) -> list[tuple[str, Path]]:
    """(name in the hash, file) of what :func:`fingerprint` reads, in a fixed order."""
    def own(folder: Path) -> list[Path]:
        found = [folder / n for n in WEIGHT_FILES]
        if not legacy:
            found += sorted({f for pattern in SHARD_PATTERNS for f in folder.glob(pattern)})
            found += [folder / n for n in LAYOUT_FILES]
        return [f for f in found if f.is_file()]

    files = own(root)
    if not legacy:
        for module in _module_folders(root):
            files += [f for f in own(module) if f not in files]
    return [(f.relative_to(root).as_posix(), f) for f in files]


def _module_folders(root: Path) -> list[Path]:
    """The folders a sentence-transformers ``modules.json`` lists under ``root`` (its root module's
    own files are the root's); none when it has none or it cannot be read."""
    import json

    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        paths = [str(m.get("path") or "") for m in modules if isinstance(m, dict)]
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    return [root / p for p in paths if p and (root / p).is_dir()]
