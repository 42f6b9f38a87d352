"""int8 quantization with ONNX Runtime: dynamic (weights int8, activations quantized per batch at
run time) and static (activation ranges calibrated on training examples beforehand).

Both export the PyTorch model to ONNX first and quantize the graph's MatMul weights (the Linear
layers: nearly all of a BERT's compute and bytes); embeddings, LayerNorm and softmax stay fp32.
The result is an :class:`~tinyplm.models.onnx.OrtClassifier` (an
:class:`~tinyplm.models.onnx.OrtEmbedder` for an embedding model: pooling, Dense and normalisation
in the graph, calibrated on its texts), so it is measured, saved and reloaded like any other
stage; it cannot be trained further, so an ONNX step ends a ``compress`` list. Weights are
quantized to 7 bits (``reduce_range``) where this CPU's int8 products would saturate (x86
without VNNI: ``tinyplm.models.int8_cpu``), unless the step says.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tinyplm.models.int8_cpu import reduce_range as resolve_reduce_range
from tinyplm.models.onnx import OrtClassifier, export_onnx, graph_feed, ort_model
from tinyplm.tasks.encoding import Encoded, collate, model_inputs

QUANTIZED_OPS = ["MatMul"]


def onnx_fp32(model: torch.nn.Module, work: Path) -> OrtClassifier:
    """The model exported to ONNX (fp32) and loaded with onnxruntime."""
    path = export_onnx(model, Path(work) / "model.onnx")
    return ort_model(path, model)


def dynamic_int8(model: torch.nn.Module, work: Path, per_channel: bool = True,
                 embeddings: bool = False, reduce_range: bool | None = None) -> OrtClassifier:
    """ONNX Runtime dynamic quantization: int8 MatMul weights (per output channel by default), and
    with ``embeddings`` the embedding tables too (their Gather ops: most of a small model's bytes).
    ``reduce_range``: 7-bit weights (default: where this CPU saturates, see ``models.int8_cpu``)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    prepared = _prepared(model, Path(work))
    out = Path(work) / "model.onnx"
    quantize_dynamic(str(prepared), str(out), weight_type=QuantType.QInt8, per_channel=per_channel,
                     reduce_range=resolve_reduce_range(reduce_range),
                     op_types_to_quantize=QUANTIZED_OPS + (["Gather"] if embeddings else []))
    prepared.unlink()
    return ort_model(out, model)


def _prepared(model: torch.nn.Module, work: Path) -> Path:
    """fp32 export, then onnxruntime's pre-processing (graph optimisation, shape inference),
    which quantization expects."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    fp32 = export_onnx(model, work / "fp32.onnx")
    prepared = work / "prepared.onnx"
    quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=True)
    fp32.unlink()
    return prepared


def _input_names(path: Path) -> set[str]:
    """The input names of the ONNX graph at ``path``."""
    import onnx

    return {i.name for i in onnx.load(str(path), load_external_data=False).graph.input}


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over ``examples`` training examples, feeding the
    inputs the graph has (``names``: a family without token types has no ``token_type_ids``)."""

    def __init__(self, enc: Encoded, examples: int, batch_size: int, seed: int, names: set[str]) -> None:
        order = torch.randperm(len(enc), generator=torch.Generator().manual_seed(seed))[:examples].tolist()
        self._batches = [graph_feed(names, **model_inputs(collate(enc, order[i:i + batch_size])))
                         for i in range(0, len(order), batch_size)]
        self._it = iter(self._batches)

    def get_next(self):
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = iter(self._batches)


def static_int8(model: torch.nn.Module, enc: Encoded, work: Path, *, examples: int = 256, batch_size: int = 8,
                method: str = "minmax", per_channel: bool = True, seed: int = 0,
                embeddings: bool = False, reduce_range: bool | None = None) -> OrtClassifier:
    """ONNX Runtime static quantization (QDQ): int8 weights and uint8 activations whose ranges are
    calibrated on ``examples`` random training examples with ``method`` (minmax, entropy, percentile);
    ``reduce_range`` as in :func:`dynamic_int8`."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    prepared = _prepared(model, Path(work))
    out = Path(work) / "model.onnx"
    quantize_static(
        str(prepared), str(out), _Calibration(enc, examples, batch_size, seed, _input_names(prepared)),
        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
        per_channel=per_channel, calibrate_method=methods[method], reduce_range=resolve_reduce_range(reduce_range),
        op_types_to_quantize=QUANTIZED_OPS + (["Gather"] if embeddings else []),
        calibration_providers=["CPUExecutionProvider"],
    )
    prepared.unlink()
    return ort_model(out, model)
