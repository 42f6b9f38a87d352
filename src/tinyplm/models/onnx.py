"""ONNX export of a classifier and an ONNX Runtime model that stands in for it.

:func:`export_onnx` writes ``model.onnx`` (inputs ``input_ids``, ``attention_mask``,
``token_type_ids``; output ``logits``; batch and sequence axes dynamic) with the TorchScript
exporter (``dynamo=False``: it needs no onnxscript and handles the ``transformers`` BERT).
:class:`OrtClassifier` runs such a file with onnxruntime and answers the calls the evaluation
and speed code make of a ``transformers`` model (``model(**inputs).logits``, ``eval``,
``num_parameters``), so an exported or ORT-quantized model is measured by the same code.

A model dir in ONNX form holds ``model.onnx``, ``config.json`` (with ``tinyplm_format: onnx``)
and the tokenizer; :func:`tinyplm.models.loading.load_classifier` returns an ``OrtClassifier``
for it.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from tinyplm.errors import ModelError
from tinyplm.tasks.heads import Head

ONNX_FILE = "model.onnx"
FORMAT_KEY = "tinyplm_format"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17
#: config key of [parameters, parameters outside embedding tables] where the shape alone does not
#: give them (classic students: LSTMs, TF-IDF), so their graphs report the same counts.
PARAMS_KEY = "tinyplm_params"


class _Logits(torch.nn.Module):
    """``model(ids, mask, types)``'s logits as one plain tensor output for the exporter (a span
    head's start and end logits stacked, as :func:`~tinyplm.models.infer.output_logits`)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        from tinyplm.models.infer import output_logits

        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return output_logits(out)


def export_onnx(model: torch.nn.Module, path: Path, seq_len: int = 16) -> Path:
    """Export ``model`` (fp32, eval) to ``path`` (written to a temp name, then renamed) -> path."""
    path = Path(path)
    if any(p.dtype == torch.bfloat16 for p in model.parameters()) or _has_int4(model):
        from tinyplm.models.quantized import dequantized

        # ONNX Runtime's CPU kernels lack bf16 arithmetic, and the exporter cannot read packed
        # 4-bit weights: export the same model in fp32 (int4 is how it is stored, not computed)
        model = dequantized(model)
    was_training = model.training
    ids = torch.ones((2, seq_len), dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, seq_len // 2:] = 0  # padding in the sample: an all-ones mask lets transformers skip masking,
    sample = (ids, mask, torch.zeros_like(ids))  # and the trace would then ignore padding for good
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    names = getattr(model.config, "architectures", None) or [type(model).__name__]
    per_token = Head.of_architectures(names).per_position
    axes["logits"] = {0: "batch", 1: "sequence"} if per_token else {0: "batch"}
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    attn = getattr(model.config, "_attn_implementation", None)
    try:
        if attn is not None:  # sdpa's mask handling traces to ops older opsets lack; eager exports cleanly
            model.config._attn_implementation = "eager"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python control flow on shapes
            # the wrapper must be in eval mode too: the exporter restores the wrapper's mode afterwards
            torch.onnx.export(_Logits(model).eval(), sample, str(tmp), input_names=list(INPUTS),
                              output_names=["logits"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    finally:
        if attn is not None:
            model.config._attn_implementation = attn
        model.train(was_training)
    os.replace(tmp, path)
    return path


def _has_int4(model: torch.nn.Module) -> bool:
    from tinyplm.models.quantized import Int4Linear

    return any(isinstance(m, Int4Linear) for m in model.modules())


def ort_session(path: Path, threads: int | None = None):
    """An onnxruntime CPU session for ``path`` (intra-op threads = torch's unless given)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or torch.get_num_threads()
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for broken files
        raise ModelError(f"{path}: onnxruntime cannot load it ({exc.__class__.__name__}: {exc})") from None


def graph_feed(names: set[str], input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               token_type_ids: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """The int64 arrays an exported graph takes, for the inputs it has (``names``): a missing
    attention mask means every position counts, missing token types mean segment 0. Shared by the
    ONNX Runtime and OpenVINO classifiers, which run the same exported graph."""
    feed = {"input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids) if attention_mask is None else attention_mask,
            "token_type_ids": torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids}
    return {k: v.cpu().numpy().astype(np.int64) for k, v in feed.items() if k in names}


class OrtClassifier:
    """An ONNX classifier behind the interface of a ``transformers`` sequence classifier."""

    def __init__(self, path: Path, config) -> None:
        self.path = Path(path)
        self.config = config
        self.training = False
        self._threads = torch.get_num_threads()
        self._session = ort_session(self.path)
        self._names = {i.name for i in self._session.get_inputs()}

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None, **_) -> SimpleNamespace:
        if torch.get_num_threads() != self._threads:  # follow torch's thread setting (speed runs set it)
            self._threads = torch.get_num_threads()
            self._session = ort_session(self.path, self._threads)
        arrays = graph_feed(self._names, input_ids, attention_mask, token_type_ids)
        (logits,) = self._session.run(["logits"], arrays)
        return SimpleNamespace(logits=torch.from_numpy(logits))

    def eval(self) -> OrtClassifier:
        return self

    def train(self, mode: bool = True) -> OrtClassifier:
        if mode:
            raise ModelError(f"{self.path}: an ONNX model cannot be trained; "
                             "compress steps after an ONNX step are not possible")
        return self

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Parameters of the model the graph was exported from (see :func:`graph_num_parameters`)."""
        return graph_num_parameters(self.config, exclude_embeddings)


def graph_num_parameters(config, exclude_embeddings: bool = False) -> int:
    """Parameters of the model a graph (ONNX, OpenVINO) was made from, as its config describes them
    (quantization changes their bytes, not their number); optionally without the embedding tables."""
    from tinyplm.models.shape import embedding_params, params_from_config

    counted = getattr(config, PARAMS_KEY, None)  # a classic student records its own counts
    if counted:
        return int(counted[1] if exclude_embeddings else counted[0])
    total = params_from_config(config)
    return total - embedding_params(config) if exclude_embeddings else total
