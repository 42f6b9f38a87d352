"""OpenVINO: a classifier converted to OpenVINO IR and run by its CPU plugin.

:func:`to_openvino` converts a PyTorch classifier to an ``openvino.Model`` through our ONNX export
(the same graph, batch and sequence axes dynamic, that ONNX Runtime runs; converting the ONNX
file needs nothing beyond ``openvino`` itself). :class:`OvClassifier` runs such a model and answers
the calls the evaluation and speed code make of a ``transformers`` model, like
:class:`~tinyplm.models.onnx.OrtClassifier`.

Precision is a property of the compiled model, not of the file: on a CPU with native bf16 (AMX,
AVX512-BF16) the plugin runs f32 graphs in bf16 by default (``auto``); ``f32`` asks for f32
(``EXECUTION_MODE_HINT=ACCURACY``). An NNCF-quantized graph runs its MatMuls in int8 and the rest
in that precision. What ran is read back from the compiled model (:attr:`OvClassifier.precision`)
and recorded, never assumed.

**Int8-stored weights.** A float model may store its weight matrices in int8 (NNCF weight
compression, ``weights: int8`` of the ``openvino`` step): about 4x fewer bytes on disk. Left as
they are, the plugin widens them on every call (its weight-decompression kernels, made for large
language models), which cost a small student a share of the float model's throughput
(docs/results/code-choices.md). An ``OvClassifier`` with ``widen`` folds them into float
constants once, before compiling (OpenVINO's ``ConstantFolding`` pass on a copy), so the model runs
at the float model's speed from a file of the int8 model's size; ``config.json`` records
``widen_weights``.

A model dir in OpenVINO form holds ``model.xml`` + ``model.bin``, ``config.json`` (with
``tinyplm_format: openvino`` and ``tinyplm_runtime``: runtime, precision, quantization, version)
and the tokenizer; :func:`tinyplm.models.loading.load_classifier` returns an ``OvClassifier``.
An embedding model's graph runs as an :class:`OvEmbedder` (its vectors out, as
:class:`~tinyplm.models.onnx.OrtEmbedder`), whose dir also holds the sentence-transformers files;
:func:`ov_model` picks the class for the model a graph was made from.

**Streams.** Every timing here runs one batch at a time on one stream of all threads (the
plugin's latency mode). A server may run several batches at once instead
(:attr:`OvClassifier.streams`): the plugin then splits the threads among that many streams and
each calling thread gets its own infer request, so two batches proceed side by side, each on its
own share of the cores. On 2 cores that paid only for unbatched serving (measured in
:mod:`tinyplm.serve.batcher`), so ``tinyplm serve`` uses one stream unless ``--streams`` says.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from tinyplm.errors import ModelError
from tinyplm.models.onnx import (
    FORMAT_KEY,
    SentenceGraph,
    SentenceParts,
    export_onnx,
    graph_config,
    graph_feed,
    graph_num_parameters,
    save_sentence_graph,
    sentence_layout,
)

OV_XML = "model.xml"
OV_BIN = "model.bin"
RUNTIME_KEY = "tinyplm_runtime"
#: How a model with int8-stored weights says so in its ``quantization`` (and so in the run record's
#: runtime detail, which the model card reads).
WIDENED = "int8-stored weights (widened when compiled)"
PRECISIONS = ("auto", "f32", "bf16")


@lru_cache(maxsize=1)
def core():
    """The process-wide ``openvino.Core`` (plugins load once)."""
    import openvino as ov

    return ov.Core()


def version() -> str:
    import openvino as ov

    return ov.get_version()


def to_openvino(model: torch.nn.Module, work: Path):
    """``model`` (fp32 PyTorch) as an ``openvino.Model``, converted from its ONNX export in ``work``."""
    import openvino as ov

    Path(work).mkdir(parents=True, exist_ok=True)
    onnx = export_onnx(model, Path(work) / "for-openvino.onnx")
    try:
        return ov.convert_model(str(onnx))
    finally:
        onnx.unlink(missing_ok=True)


def compile_config(precision: str, threads: int, streams: int = 1) -> dict[str, str]:
    """CPU plugin properties: ``streams`` streams sharing ``threads`` threads (one stream, batches
    run one at a time, is how every model here is timed; see the module docstring) and the
    precision asked for (``auto`` leaves the plugin's default)."""
    if precision not in PRECISIONS:
        raise ModelError(f"OpenVINO precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if streams < 1:
        raise ModelError(f"OpenVINO streams must be at least 1, got {streams}")
    hint = "LATENCY" if streams == 1 else "THROUGHPUT"
    config = {"PERFORMANCE_HINT": hint, "NUM_STREAMS": str(streams),
              "INFERENCE_NUM_THREADS": str(max(threads, streams))}
    if precision == "f32":
        config.update(EXECUTION_MODE_HINT="ACCURACY", INFERENCE_PRECISION_HINT="f32")
    elif precision == "bf16":
        config["INFERENCE_PRECISION_HINT"] = "bf16"
    return config


def save_openvino(ov_model, folder: Path, precision: str) -> Path:
    """Write ``model.xml``/``model.bin`` into ``folder``. f32 weights stay f32 on disk for an ``f32``
    model; otherwise the plugin computes in bf16 (or int8) anyway, so they are stored as fp16
    (OpenVINO's default)."""
    import openvino as ov

    folder.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov_model, str(folder / OV_XML), compress_to_fp16=precision != "f32")
    return folder / OV_XML


def runtime_record(precision: str, ran: str, quantization: str | None,
                   widen: bool = False) -> dict[str, str | bool | None]:
    """What ``config.json`` records about an OpenVINO model: asked and actual precision, and whether
    its int8-stored weights are widened before compiling (module docstring)."""
    return {"runtime": "openvino", "precision": precision, "inference_precision": ran,
            "quantization": quantization, "widen_weights": widen, "version": version()}


def widened(ov_model):
    """A copy of ``ov_model`` with every constant subgraph folded (int8-stored weights become the
    float constants they decompress to); ``ov_model`` itself is left as it is, to be saved small."""
    from openvino.passes import ConstantFolding, Manager

    copy = ov_model.clone()
    manager = Manager()
    manager.register_pass(ConstantFolding())
    manager.run_passes(copy)
    return copy


class OvClassifier:
    """An OpenVINO classifier behind the interface of a ``transformers`` classifier.

    ``source`` is a path to ``model.xml`` or an in-memory ``openvino.Model``; ``config`` is the
    Hugging Face config of the model it came from (labels, shape: parameter counts are read off it).
    ``widen``: fold int8-stored weights into float constants before compiling (module docstring).
    """

    def __init__(self, source, config, precision: str = "auto", quantization: str | None = None,
                 widen: bool = False) -> None:
        self.config, self.precision_asked, self.quantization = config, precision, quantization
        self.widen = widen
        self.path = Path(source) if isinstance(source, (str, Path)) else None
        self.model = self._read(source)
        self.training = False
        self.streams = 1  # batches that may run at once, each from its own thread (module docstring)
        self._threads = 0
        self._streams = 0
        self._compiled = None
        self._folded = None  # the widened copy of self.model, made once (widen only)
        self._local = threading.local()  # this thread's infer request, for the compiled model it came from
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def _read(self, source):
        if self.path is None:
            return source
        try:
            return core().read_model(str(self.path))
        except Exception as exc:  # openvino raises RuntimeError subclasses for broken IR files
            raise ModelError(f"{self.path}: OpenVINO cannot read it ({exc.__class__.__name__}: "
                             f"{' '.join(str(exc).split())[:300]})") from None

    def _ensure_compiled(self):
        """Compile for torch's current thread count (speed runs set it) and :attr:`streams` on first
        use or when either changed -> the compiled model."""
        threads, streams = torch.get_num_threads(), self.streams
        with self._lock:  # two serving threads must not compile twice
            if self._compiled is None or (threads, streams) != (self._threads, self._streams):
                config = compile_config(self.precision_asked, threads, streams)
                if self.widen and self._folded is None:
                    self._folded = widened(self.model)
                compiled = core().compile_model(self._folded if self.widen else self.model, "CPU", config)
                self._names = {name for port in compiled.inputs for name in port.get_names()}
                self._threads, self._streams, self._compiled = threads, streams, compiled
            return self._compiled

    def _infer_request(self):
        """This thread's infer request on the current compiled model (created on first use)."""
        compiled = self._ensure_compiled()
        local = self._local
        if getattr(local, "compiled", None) is not compiled:
            local.compiled, local.request = compiled, compiled.create_infer_request()
        return compiled, local.request

    @property
    def int8_matmuls(self) -> bool:
        """True when the graph was quantized (NNCF leaves FakeQuantize nodes the plugin runs in int8)."""
        return any(op.get_type_name() == "FakeQuantize" for op in self.model.get_ops())

    @property
    def precision(self) -> str:
        """The precision the plugin runs non-quantized parts in (``f32`` or ``bf16``)."""
        ran = self._ensure_compiled().get_property("INFERENCE_PRECISION_HINT")
        return ran.get_type_name() if hasattr(ran, "get_type_name") else str(ran)

    def _run(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
        """The graph's one output for a batch: ``(batch, ...)`` float32."""
        compiled, request = self._infer_request()
        result = request.infer(graph_feed(self._names, input_ids, attention_mask, token_type_ids))
        return np.array(result[compiled.output(0)], dtype=np.float32)  # copy: the request reuses it

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None, **_) -> SimpleNamespace:
        return SimpleNamespace(logits=torch.from_numpy(self._run(input_ids, attention_mask, token_type_ids)))

    def eval(self) -> OvClassifier:
        return self

    def train(self, mode: bool = True) -> OvClassifier:
        if mode:
            raise ModelError("an OpenVINO model cannot be trained; compress steps after an OpenVINO step are "
                             "not possible")
        return self

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Parameters of the model the graph came from, as its config describes them."""
        return graph_num_parameters(self.config, exclude_embeddings)


def load_openvino_dir(path: Path, config, sentence: SentenceParts | None = None) -> OvClassifier:
    """The model of an OpenVINO model dir (a transformer's or a static student's), compiled in its
    recorded precision, with ``config`` (its config.json, read); with ``sentence`` (an embedding
    model's dir) an :class:`OvEmbedder`. Raises ``ModelError`` naming a missing
    ``model.xml``/``model.bin``."""
    for name in (OV_XML, OV_BIN):
        if not (path / name).is_file():
            raise ModelError(f"{path / 'config.json'}: says {FORMAT_KEY}: openvino, but {path} holds no {name} "
                             f"(an OpenVINO model is {OV_XML} and {OV_BIN} together)")
    record = getattr(config, RUNTIME_KEY, None) or {}
    how = (record.get("precision", "auto"), record.get("quantization"), bool(record.get("widen_weights", False)))
    if sentence is not None:
        return OvEmbedder(path / OV_XML, config, sentence, *how)
    return OvClassifier(path / OV_XML, config, *how)


class OvEmbedder(SentenceGraph, OvClassifier):
    """An embedding model's OpenVINO graph (pooling, Dense and normalisation inside, as
    :class:`~tinyplm.models.onnx.OrtEmbedder`'s) behind the ``SentenceEncoder``'s interface:
    ``model(input_ids, attention_mask, token_type_ids)`` -> vectors ``(batch, dim)`` float32."""

    def __init__(self, source, config, sentence: SentenceParts, precision: str = "auto",
                 quantization: str | None = None, widen: bool = False) -> None:
        super().__init__(source, config, precision, quantization, widen)
        self.sentence = sentence

    def save_to(self, tokenizer, path: Path) -> Path:
        """The model dir at ``path`` (:func:`~tinyplm.models.onnx.save_sentence_graph`): IR files and a
        config.json recording how it runs, as :func:`tinyplm.models.io.save_model` writes a classifier's."""

        def write(folder: Path) -> None:
            save_openvino(self.model, folder, self.precision_asked)
            setattr(self.config, RUNTIME_KEY, runtime_record(self.precision_asked, self.precision, self.quantization,
                                                             self.widen))

        out = save_sentence_graph(self, tokenizer, path, "openvino", write)
        self.path = Path(path) / OV_XML
        return out


def ov_model(source, parent: torch.nn.Module, precision: str = "auto", quantization: str | None = None,
             widen: bool = False) -> OvClassifier:
    """The OpenVINO model of ``source`` (an ``openvino.Model`` or a ``model.xml``) made from
    ``parent``: an :class:`OvEmbedder` for an embedding model, else an :class:`OvClassifier`."""
    if sentence_layout(parent) is None:
        return OvClassifier(source, parent.config, precision, quantization, widen)
    return OvEmbedder(source, graph_config(parent), SentenceParts.of(parent), precision, quantization, widen)
