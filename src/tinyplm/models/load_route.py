"""How a saved model dir loads, read from its ``config.json``: plain transformers where its config
says everything, tinyplm's loader where it does not, or the runtime it was exported to.

A pruned model keeps a plain Hugging Face config whenever its shape allows (every layer with all
its heads and one FFN width, nothing factorized, shared or stored quantized:
:func:`tinyplm.models.shape.record_shape` then drops ``tinyplm_shape``), so
``AutoModelForSequenceClassification.from_pretrained(dir)`` builds it. Removing attention heads
leaves each layer's attention narrower than the hidden size, which no ``transformers`` config can
state (its head width is always hidden / heads; transformers 5 also dropped ``pruned_heads``), so
such a model records ``tinyplm_shape`` and loads with :func:`tinyplm.models.load_classifier`, as
does a model with quantized weights (``tinyplm_quant``) or a classic (LSTM, TF-IDF...) student.
An exported model (``tinyplm_format``: ``onnx`` or ``openvino``) loads in its runtime alone.

:func:`load_route` is what the model cards, the README and a test that loads every saved stage of
a run go by; it reads the file only (no weights, no imports of the runtimes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tinyplm.errors import ModelError
from tinyplm.models.classic.io import MODEL_TYPE as CLASSIC_TYPE
from tinyplm.models.onnx import FORMAT_KEY
from tinyplm.models.quantized import QUANT_KEY
from tinyplm.models.shape import SHAPE_KEY


class Loader(StrEnum):
    """What loads a saved model dir."""

    TRANSFORMERS = "transformers"  # AutoModelFor...from_pretrained(dir)
    TINYPLM = "tinyplm"  # tinyplm.models.load_classifier(dir, labels, is_regression)
    OPENVINO = "openvino"  # openvino.Core().compile_model(dir/model.xml)
    ONNXRUNTIME = "onnxruntime"  # onnxruntime.InferenceSession(dir/model.onnx)


@dataclass(frozen=True)
class LoadRoute:
    """``loader`` loads the dir; ``why`` says why not plain transformers (empty when it is)."""

    loader: Loader
    why: str = ""


def route_of_config(config: dict) -> LoadRoute:
    """The :class:`LoadRoute` of a parsed ``config.json`` (see the module docstring)."""
    fmt = config.get(FORMAT_KEY)
    if fmt == "openvino":
        return LoadRoute(Loader.OPENVINO, "exported to OpenVINO IR (model.xml + model.bin)")
    if fmt == "onnx":
        return LoadRoute(Loader.ONNXRUNTIME, "exported to ONNX (model.onnx)")
    if config.get("model_type") == CLASSIC_TYPE:
        return LoadRoute(Loader.TINYPLM, "a classic (non-transformer) student")
    if config.get(QUANT_KEY):
        return LoadRoute(Loader.TINYPLM, f"its weights are stored quantized ({QUANT_KEY} in config.json)")
    shape = config.get(SHAPE_KEY)
    if shape:
        return LoadRoute(Loader.TINYPLM, _shape_reason(shape))
    return LoadRoute(Loader.TRANSFORMERS)


def _shape_reason(shape: dict) -> str:
    if {"ranks", "embedding_rank"} & set(shape):
        what = "low-rank (factorized) layers"
    elif "share" in shape:
        what = "layers sharing weights"
    elif len(set(shape.get("heads", ()))) > 1 or len(set(shape.get("ffn", ()))) > 1:
        what = "layers pruned to different sizes"
    else:
        what = "attention heads removed (a head width other than hidden / heads)"
    return f"{what} ({SHAPE_KEY} in config.json), which no transformers config can describe"


def load_route(model_dir: Path) -> LoadRoute:
    """The :class:`LoadRoute` of a saved model dir; raises ``ModelError`` naming ``config.json``
    when it is missing or not a JSON object."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read it ({exc.__class__.__name__}); expected a model's config") from None
    if not isinstance(config, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return route_of_config(config)
