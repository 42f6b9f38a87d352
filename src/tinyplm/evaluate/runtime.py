"""What runtime and precision a model runs in, read off the model object (never assumed)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from torch import nn

#: ONNX operators that only appear in int8-quantized graphs.
INT8_OPS = frozenset({"DynamicQuantizeLinear", "MatMulInteger", "QLinearMatMul", "QuantizeLinear"})


@dataclass(frozen=True)
class RuntimeInfo:
    """``runtime``: torch, onnxruntime or openvino. ``precision``: what the matrix products run in
    (fp32, bf16, int8); ``detail`` says more (int8 weights only, int4 storage, ...)."""

    runtime: str
    precision: str
    detail: str = ""


@lru_cache(maxsize=64)
def _onnx_ops(path: str) -> frozenset[str]:
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    return frozenset(node.op_type for node in graph.node)


def describe(model: nn.Module) -> RuntimeInfo:
    """The runtime and precision of a model as tinyplm runs it."""
    from tinyplm.models.onnx import OrtClassifier
    from tinyplm.models.openvino import OvClassifier
    from tinyplm.models.quantized import QUANT_KEY

    if isinstance(model, OvClassifier):
        float_part = model.precision
        if model.int8_matmuls:
            return RuntimeInfo("openvino", "int8", f"int8 MatMuls, the rest {float_part}")
        return RuntimeInfo("openvino", float_part, model.quantization or "")
    if isinstance(model, OrtClassifier):
        ops = _onnx_ops(str(Path(model.path)))
        if ops & INT8_OPS:
            kind = "dynamic" if "DynamicQuantizeLinear" in ops or "MatMulInteger" in ops else "static"
            return RuntimeInfo("onnxruntime", "int8", f"int8 MatMuls ({kind} activations)")
        return RuntimeInfo("onnxruntime", "fp32")
    scheme = (getattr(getattr(model, "config", None), QUANT_KEY, None) or {}).get("scheme")
    if scheme == "int8_dynamic":
        return RuntimeInfo("torch", "int8", "torch.ao dynamic int8 Linear layers")
    if scheme == "bf16":
        return RuntimeInfo("torch", "bf16")
    if scheme == "int4_weight":
        return RuntimeInfo("torch", "fp32", "int4 weights, dequantized at every call")
    return RuntimeInfo("torch", "fp32")
