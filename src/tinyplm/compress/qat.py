"""Quantization-aware training: int8 fake quantization during recovery distillation, then int8.

While the recovery stage trains, every encoder Linear layer computes with weights rounded to an
int8 grid (one symmetric scale per output channel, ``max |w| / 127``) and with inputs rounded to a
uint8 grid over their running min/max; gradients pass the rounding unchanged (straight-through
estimator). The weights learn to live on the grid. :meth:`FakeQuant.finish` then bakes the rounded
weights in and converts the model with ONNX Runtime (static int8 by default, its activation ranges
calibrated on training examples; its per-channel weight scales equal the ones trained with here).

Written here rather than with ``torch.ao``'s eager QAT: that needs stubs around every quantized
module and its converted modules cannot be exported to ONNX; these hooks are a few lines.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from tinyplm.models.quantized import encoder_linear_names


def fake_quant_weight(w: Tensor) -> Tensor:
    """Per-output-channel symmetric int8 rounding with a straight-through gradient."""
    scale = (w.detach().abs().amax(dim=1, keepdim=True) / 127.0).clamp_min(1e-12)
    q = torch.clamp(torch.round(w / scale), -127, 127) * scale
    return w + (q - w).detach()


def fake_quant_input(x: Tensor, low: float, high: float) -> Tensor:
    """Per-tensor affine uint8 rounding over [low, high] with a straight-through gradient."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max(high - low, 1e-8) / 255.0
    zero = round(-low / scale)
    q = (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale
    return x + (q - x).detach()


class _WeightGrid(nn.Module):
    def forward(self, w: Tensor) -> Tensor:
        return fake_quant_weight(w)


class FakeQuant:
    """Fake-quantizes the encoder's Linear layers of ``model`` until :meth:`finish`."""

    def __init__(self, model: nn.Module, momentum: float = 0.9) -> None:
        self.names = encoder_linear_names(model)
        self.modules = [model.get_submodule(n) for n in self.names]
        self.ranges: list[list[float] | None] = [None] * len(self.modules)
        self.momentum = momentum
        self._handles = []
        for i, m in enumerate(self.modules):
            parametrize.register_parametrization(m, "weight", _WeightGrid())
            self._handles.append(m.register_forward_pre_hook(self._input_hook(i)))

    def _input_hook(self, i: int):
        def hook(module, args):
            x = args[0]
            lo, hi = float(x.detach().min()), float(x.detach().max())
            if module.training or self.ranges[i] is None:  # running range while training
                r = self.ranges[i]
                self.ranges[i] = [lo, hi] if r is None else [self.momentum * r[0] + (1 - self.momentum) * lo,
                                                              self.momentum * r[1] + (1 - self.momentum) * hi]
            return (fake_quant_input(x, *self.ranges[i]),)
        return hook

    def remove(self) -> None:
        """Bake the int8-grid weights in and drop the hooks (the model computes in float again)."""
        for handle in self._handles:
            handle.remove()
        for m in self.modules:
            parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)

    def finish(self, model: nn.Module, convert: str, enc, work: Path, examples: int,
               seed: int) -> tuple[nn.Module, dict]:
        """Remove the fake quantization and convert to int8 with ONNX Runtime -> (model, info)."""
        from tinyplm.compress.onnx_quant import dynamic_int8, static_int8

        self.remove()
        if convert == "onnx_dynamic_int8":
            out = dynamic_int8(model, work)
        else:
            out = static_int8(model, enc, work, examples=examples, seed=seed)
        return out, {"qat": "int8 weights (per channel) and inputs (per tensor) fake-quantized during recovery",
                     "converted": convert}
