"""ONNX export of a classifier or an embedding model, and an ONNX Runtime model that stands in for it.

:func:`export_onnx` writes ``model.onnx`` (inputs ``input_ids``, ``attention_mask``,
``token_type_ids``; output ``logits``; batch and sequence axes dynamic) with the TorchScript
exporter (``dynamo=False``: it needs no onnxscript and handles the ``transformers`` BERT).
:class:`OrtClassifier` runs such a file with onnxruntime and answers the calls the evaluation
and speed code make of a ``transformers`` model (``model(**inputs).logits``, ``eval``,
``num_parameters``), so an exported or ORT-quantized model is measured by the same code.

A model dir in ONNX form holds ``model.onnx``, ``config.json`` (with ``tinyplm_format: onnx``)
and the tokenizer; :func:`tinyplm.models.loading.load_classifier` returns an ``OrtClassifier``
for it.

**Embedding models.** A :class:`~tinyplm.models.sentence.SentenceEncoder` exports whole: pooling
over the attention mask, its Dense layers and the L2 normalisation are in the graph, whose one
output ``sentence_embedding`` is the vectors ``(batch, dim)``. :class:`OrtEmbedder` runs it behind
the ``SentenceEncoder``'s interface (``model(ids, mask, types)`` -> vectors, ``dim``, ``layout``)
and saves itself (:func:`save_sentence_graph`) as the graph, config.json, the tokenizer and the
sentence-transformers files (modules.json, pooling, Dense, normalise), so the dir describes
itself; :func:`tinyplm.models.embedder.load_embedder` loads it back. :func:`ort_model` picks the
class for the model a graph was exported from.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from tinyplm.errors import ModelError
from tinyplm.files import COMPLETE_MARK, replace_dir
from tinyplm.models.layout_files import layout_json, with_paths
from tinyplm.models.pooling import SentenceLayout
from tinyplm.tasks.heads import Head

ONNX_FILE = "model.onnx"
FORMAT_KEY = "tinyplm_format"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17
#: config key of [parameters, parameters outside embedding tables] where the shape alone does not
#: give them (classic students: LSTMs, TF-IDF; an embedding model's Dense layers), so their graphs
#: report the same counts.
PARAMS_KEY = "tinyplm_params"
#: The output of a classifier's graph, and of an embedding model's (sentence-transformers' name).
LOGITS_OUTPUT = "logits"
SENTENCE_OUTPUT = "sentence_embedding"


def sentence_layout(model: object) -> SentenceLayout | None:
    """The sentence-transformers layout of an embedding model (a ``SentenceEncoder``, or a graph
    made from one), or None for any other model."""
    layout = getattr(model, "layout", None)
    return layout if isinstance(layout, SentenceLayout) else None


def _graph_output(model: torch.nn.Module) -> tuple[str, dict[int, str]]:
    """The output name and its dynamic axes of ``model``'s graph: an embedding model's vectors
    ``(batch, dim)``; a classifier's logits ``(batch, labels)``, or ``(batch, seq, labels)`` for a
    head with a sequence axis."""
    if sentence_layout(model) is not None:
        return SENTENCE_OUTPUT, {0: "batch"}
    names = getattr(model.config, "architectures", None) or [type(model).__name__]
    per_token = Head.of_architectures(names).per_position
    return LOGITS_OUTPUT, ({0: "batch", 1: "sequence"} if per_token else {0: "batch"})


class _Logits(torch.nn.Module):
    """``model(ids, mask, types)``'s logits as one plain tensor output for the exporter (a span
    head's start and end logits stacked, an embedding model's vectors, as
    :func:`~tinyplm.models.infer.output_logits`)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        from tinyplm.models.infer import output_logits

        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return output_logits(out)


def export_onnx(model: torch.nn.Module, path: Path, seq_len: int = 16) -> Path:
    """Export ``model`` (fp32, eval) to ``path`` (written to a temp name, then renamed) -> path.
    The sample traced has padding in one row, so masking (attention, an embedding model's pooling)
    is traced as it runs on padded batches."""
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
    output, output_axes = _graph_output(model)
    axes[output] = output_axes
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    attn = getattr(model.config, "_attn_implementation", None)
    try:
        if attn is not None:  # sdpa's mask handling traces to ops older opsets lack; eager exports cleanly
            model.config._attn_implementation = "eager"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python control flow on shapes
            # the wrapper must be in eval mode too: the exporter restores the wrapper's mode afterwards
            torch.onnx.export(_Logits(model).eval(), sample, str(tmp), input_names=list(INPUTS),
                              output_names=[output], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
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

    output = LOGITS_OUTPUT  # the graph output it runs

    def __init__(self, path: Path, config) -> None:
        self.path = Path(path)
        self.config = config
        self.training = False
        self._threads = torch.get_num_threads()
        self._session = ort_session(self.path)
        self._names = {i.name for i in self._session.get_inputs()}

    def _run(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
        """The graph's one output for a batch: ``(batch, ...)`` float32."""
        if torch.get_num_threads() != self._threads:  # follow torch's thread setting (speed runs set it)
            self._threads = torch.get_num_threads()
            self._session = ort_session(self.path, self._threads)
        arrays = graph_feed(self._names, input_ids, attention_mask, token_type_ids)
        (out,) = self._session.run([self.output], arrays)
        return out

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None, **_) -> SimpleNamespace:
        return SimpleNamespace(logits=torch.from_numpy(self._run(input_ids, attention_mask, token_type_ids)))

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


# ---------------------------------------------------------------------------------------------
# embedding models


@dataclass(frozen=True)
class SentenceParts:
    """What an embedding model's graph keeps of the ``SentenceEncoder`` it was made from, to
    describe itself: the ``layout`` as saved (Transformer at the root, each Dense in its folder)
    and each Dense layer's weights (``linear.weight``, ``linear.bias``), which are inside the graph
    too but make the sentence-transformers files whole."""

    layout: SentenceLayout
    dense: tuple[dict[str, torch.Tensor], ...] = ()

    @classmethod
    def of(cls, model: torch.nn.Module) -> SentenceParts:
        """The parts of a ``SentenceEncoder`` (its layout, a copy of its Dense weights)."""
        dense = tuple({k: v.detach().cpu().float().clone().contiguous() for k, v in layer.state_dict().items()}
                      for layer in model.dense)
        return cls(with_paths(model.layout), dense)

    @property
    def dim(self) -> int:
        """The width of the vectors."""
        return int(self.layout.dim)

    def write(self, folder: Path) -> None:
        """Write the sentence-transformers files of :attr:`layout` and the Dense weights into ``folder``."""
        from safetensors.torch import save_file

        for name, value in layout_json(self.layout).items():
            file = folder / name
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
        for spec, state in zip(self.layout.dense, self.dense, strict=True):
            save_file(state, str(folder / spec.path / "model.safetensors"), metadata={"format": "pt"})


def graph_config(model: torch.nn.Module):
    """A copy of an embedding model's encoder config for its graph, recording the model's parameter
    counts (:data:`PARAMS_KEY`: all, and all but the embedding tables, as ``num_parameters`` counts
    them): the encoder's config alone would count a classifier instead of the pooling and Dense
    layers. The copy keeps the PyTorch model's config free of the graph's keys."""
    config = copy.deepcopy(model.config)
    params = {id(p): p.numel() for p in model.parameters()}  # a tensor shared by two modules counts once
    tables = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    total = sum(params.values())
    setattr(config, PARAMS_KEY, [total, total - sum(n for i, n in params.items() if i in tables)])
    return config


class SentenceGraph:
    """What an embedding model's graph (ONNX Runtime or OpenVINO) answers as a ``SentenceEncoder``
    does, mixed in before its runtime class: ``layout`` and ``dim`` from its ``sentence`` parts, and
    ``model(input_ids, attention_mask, token_type_ids)`` -> vectors ``(batch, dim)``."""

    sentence: SentenceParts

    @property
    def layout(self) -> SentenceLayout:
        return self.sentence.layout

    @property
    def dim(self) -> int:
        return self.sentence.dim

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None, **_) -> torch.Tensor:
        return torch.from_numpy(self._run(input_ids, attention_mask, token_type_ids))


class OrtEmbedder(SentenceGraph, OrtClassifier):
    """An embedding model's ONNX graph (pooling, Dense and normalisation inside: module docstring)
    behind the ``SentenceEncoder``'s interface: ``model(input_ids, attention_mask, token_type_ids)``
    -> vectors ``(batch, dim)`` float32; ``sentence`` holds its layout and Dense weights."""

    output = SENTENCE_OUTPUT

    def __init__(self, path: Path, config, sentence: SentenceParts) -> None:
        super().__init__(path, config)
        self.sentence = sentence

    def save_to(self, tokenizer, path: Path) -> Path:
        """The model dir at ``path`` (:func:`save_sentence_graph`); the model reads its graph there after."""
        def write(folder: Path) -> None:
            shutil.copyfile(self.path, folder / ONNX_FILE)

        out = save_sentence_graph(self, tokenizer, path, "onnx", write)
        self.path = Path(path) / ONNX_FILE
        return out


def ort_model(path: Path, source: torch.nn.Module) -> OrtClassifier:
    """The ONNX Runtime model of the graph at ``path`` exported from ``source``: an
    :class:`OrtEmbedder` for an embedding model, else an :class:`OrtClassifier`."""
    if sentence_layout(source) is None:
        return OrtClassifier(path, source.config)
    return OrtEmbedder(path, graph_config(source), SentenceParts.of(source))


def save_sentence_graph(model, tokenizer, out: Path, form: str, write_graph: Callable[[Path], None]) -> Path:
    """Write an embedding model's graph dir at ``out``: the graph files (``write_graph(folder)``),
    ``config.json`` (its config with ``tinyplm_format: form``), the tokenizer, the
    sentence-transformers files with the Dense weights (:meth:`SentenceParts.write`) and the mark of
    a complete save. Written beside ``out`` and renamed into place, as every model dir. Returns ``out``."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():  # left by a save that was killed
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    write_graph(tmp)
    setattr(model.config, FORMAT_KEY, form)
    model.config.save_pretrained(tmp)
    model.sentence.write(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / COMPLETE_MARK).write_text("ok\n")
    return replace_dir(tmp, out)
