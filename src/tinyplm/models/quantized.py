"""PyTorch models with quantized weights, saved at their true size and reloaded without replay.

Three schemes, recorded in ``config.tinyplm_quant = {"scheme": ..., "modules": [...], ...}``:

- ``int8_dynamic``: ``torch.ao`` dynamic quantization of the encoder's Linear layers (int8 weights,
  one scale per output channel; activations quantized per batch at run time);
- ``int4_weight``: 4-bit weight-only, group-wise symmetric (one fp16 scale per ``group_size``
  weights of a row), two weights packed per byte; :class:`Int4Linear` dequantizes at each call,
  so it saves bytes, not time;
- ``bf16``: every floating weight in bfloat16 (fast on CPUs with AMX/AVX512-BF16).

Only the encoder's Linear layers are quantized (embeddings, LayerNorm, pooler and classifier stay
fp32): that is where nearly all the compute is, and what the issue's "Linear weights" means.
The weights are written with safetensors (quantized values, scales, zero points as plain tensors:
``torch.save`` of packed int8 modules would need pickle to load).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.shape import once_each

QUANT_KEY = "tinyplm_quant"
SCHEMES = ("int8_dynamic", "int4_weight", "bf16")


def encoder_linear_names(model: nn.Module) -> list[str]:
    """Names (as in ``named_modules()``) of the encoder's ``nn.Linear`` modules, in forward order:
    each Linear role of every layer, or the Linear modules inside what replaced one (a low-rank
    pair); a module shared by several layers is named once, under its first layer."""
    names, seen = [], set()
    for i, role, module in roles.encoder_linears(model):
        base = roles.linear_name(model, i, role)
        for sub, linear in module.named_modules(prefix=base):
            if isinstance(linear, nn.Linear) and id(linear) not in seen:
                seen.add(id(linear))
                names.append(sub)
    return names


def _places(model: nn.Module, module: nn.Module) -> list[tuple[nn.Module, str]]:
    """Every (parent, attribute) under which ``model`` holds ``module``: a Linear that is itself a
    shared part (ALBERT's FFN after ``share``) sits in several layers."""
    return [(parent, leaf) for parent in model.modules() for leaf, child in parent.named_children() if child is module]


def _swap(model: nn.Module, old: nn.Module, new: nn.Module) -> None:
    """Put ``new`` wherever ``model`` holds ``old``, so that every layer sharing it runs the new one."""
    for parent, leaf in _places(model, old):
        setattr(parent, leaf, new)


# ---------------------------------------------------------------------------------------------
# int4 weight-only


class Int4Linear(nn.Module):
    """A Linear whose weight is stored as packed 4-bit integers with per-group fp16 scales.

    Rows are zero-padded to a whole number of groups (``padded = ceil(in / group_size) * group_size``).
    ``packed``: uint8 ``(out, padded / 2)``, two weights per byte (low nibble first), each ``q + 8``
    for ``q`` in [-8, 7]; ``scales``: fp16 ``(out, padded / group_size)``; weight = q * scale.
    """

    def __init__(self, in_features: int, out_features: int, group_size: int, bias: bool = True) -> None:
        super().__init__()
        if group_size % 2:
            raise ModelError(f"int4: group_size must be even (two weights per byte), got {group_size}")
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.padded = -(-in_features // group_size) * group_size
        self.register_buffer("packed", torch.zeros(out_features, self.padded // 2, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(out_features, self.padded // group_size, dtype=torch.float16))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int) -> Int4Linear:
        """Quantize ``linear``'s weight group-wise (symmetric, scale = max |w| / 7 per group)."""
        out_f, in_f = linear.weight.shape
        new = cls(in_f, out_f, group_size, linear.bias is not None)
        w = torch.zeros(out_f, new.padded)
        w[:, :in_f] = linear.weight.detach().float()
        w = w.reshape(out_f, new.padded // group_size, group_size)
        scale = (w.abs().amax(-1, keepdim=True) / 7.0).clamp_min(1e-8).half()
        q = torch.clamp(torch.round(w / scale.float()), -8, 7).to(torch.int16) + 8  # 0..15
        q = q.reshape(out_f, new.padded)
        new.packed.copy_((q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8))
        new.scales.copy_(scale.squeeze(-1))
        if linear.bias is not None:
            new.bias.data.copy_(linear.bias.detach().float())
        return new

    def weight(self) -> Tensor:
        """The dequantized fp32 weight ``(out, in)``."""
        low = (self.packed & 0x0F).to(torch.int16) - 8
        high = (self.packed >> 4).to(torch.int16) - 8
        q = torch.stack((low, high), dim=-1).reshape(self.out_features, self.padded).float()
        g = q.reshape(self.out_features, -1, self.group_size) * self.scales.float().unsqueeze(-1)
        return g.reshape(self.out_features, self.padded)[:, : self.in_features]

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(x, self.weight().to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, group_size={self.group_size}, bits=4"


def quantize_int4(model: nn.Module, group_size: int = 64) -> list[str]:
    """Replace the encoder's Linear layers by :class:`Int4Linear` in place -> their names."""
    names = encoder_linear_names(model)
    for name in names:
        old = model.get_submodule(name)
        _swap(model, old, Int4Linear.from_linear(old, group_size))
    setattr(model.config, QUANT_KEY, {"scheme": "int4_weight", "group_size": group_size, "modules": names})
    return names


def dequantized(model: nn.Module) -> nn.Module:
    """A float32 copy of ``model`` whose Int4Linear layers are plain Linear layers holding the
    dequantized weights (same outputs; for exporters that cannot read packed 4-bit weights)."""
    import copy

    out = copy.deepcopy(model).float()
    for module in list(out.modules()):
        if isinstance(module, Int4Linear):
            linear = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
            with torch.no_grad():
                linear.weight.copy_(module.weight())
                if module.bias is not None:
                    linear.bias.copy_(module.bias.float())
            _swap(out, module, linear)
    return out


# ---------------------------------------------------------------------------------------------
# int8 dynamic (torch.ao)


def quantize_int8_dynamic(model: nn.Module) -> list[str]:
    """``torch.ao`` dynamic int8 quantization (per-channel weights) of the encoder's Linear layers,
    in place -> their names."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    names = encoder_linear_names(model)
    places = {n: _places(model, model.get_submodule(n)) for n in names}
    with warnings.catch_warnings():  # torch.ao's deprecation notices (it still ships and works in 2.13)
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        quantize_dynamic(model, {n: per_channel_dynamic_qconfig for n in names}, inplace=True)
    for name in names:  # torch.ao quantizes a shared Linear once per place: one module for all again
        for parent, leaf in places[name]:
            setattr(parent, leaf, model.get_submodule(name))
    setattr(model.config, QUANT_KEY, {"scheme": "int8_dynamic", "modules": names})
    return names


def _dynamic_linears(model: nn.Module, remove_duplicate: bool = True) -> dict[str, nn.Module]:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    return {n: m for n, m in model.named_modules(remove_duplicate=remove_duplicate) if isinstance(m, DynamicLinear)}


# ---------------------------------------------------------------------------------------------
# bf16


def to_bf16(model: nn.Module) -> list[str]:
    """Every floating parameter and buffer in bfloat16, in place -> the parameter names."""
    model.to(torch.bfloat16)
    setattr(model.config, QUANT_KEY, {"scheme": "bf16", "modules": []})
    return [n for n, _ in model.named_parameters()]


# ---------------------------------------------------------------------------------------------
# save and load


def quantized_state(model: nn.Module) -> dict[str, Tensor]:
    """The tensors to save: ordinary parameters/buffers, and for each int8 dynamic Linear its int8
    weight, per-channel scales and zero points, and bias (safetensors-ready, contiguous)."""
    dynamic = _dynamic_linears(model)
    every = tuple(f"{n}." for n in _dynamic_linears(model, remove_duplicate=False))  # a tied one under each name
    state: dict[str, Tensor] = {}
    for name, value in model.state_dict().items():
        if not isinstance(value, Tensor) or name.startswith(every):
            continue
        state[name] = value
    for name, module in dynamic.items():
        w, b = module.weight(), module.bias()
        state[f"{name}.weight_int8"] = w.int_repr()
        state[f"{name}.weight_scales"] = w.q_per_channel_scales().float()
        state[f"{name}.weight_zero_points"] = w.q_per_channel_zero_points().to(torch.int64)
        if b is not None:
            state[f"{name}.bias"] = b.detach()
    return once_each({k: v.detach().contiguous() for k, v in state.items()})


def _shared_keys(model: nn.Module) -> set[str]:
    """State-dict names of ``model`` whose tensor is held under an earlier name too (tied layers)."""
    state = {k: v for k, v in model.state_dict().items() if isinstance(v, Tensor)}
    return set(state) - set(once_each(state))


def is_quantized(model: nn.Module) -> bool:
    """True for a model made by one of this module's quantize functions (or loaded as one)."""
    return bool(getattr(getattr(model, "config", None), QUANT_KEY, None))


def load_quantized(path: Path, model: nn.Module) -> nn.Module:
    """Rebuild the quantized modules of a freshly built fp32 ``model`` from ``config.tinyplm_quant``
    and load the weights of ``path/model.safetensors`` into it -> the model (eval mode).

    Raises ``ModelError`` for an unknown scheme or weights that do not fit.
    """
    from safetensors.torch import load_file

    spec = getattr(model.config, QUANT_KEY, None) or {}
    scheme = spec.get("scheme")
    if scheme not in SCHEMES:
        raise ModelError(f"{path}: config {QUANT_KEY}.scheme is {scheme!r}; expected one of {SCHEMES}")
    state = load_file(str(Path(path) / "model.safetensors"))
    if scheme == "bf16":
        model.to(torch.bfloat16)
    elif scheme == "int4_weight":
        for name in spec["modules"]:
            old = model.get_submodule(name)
            _swap(model, old, Int4Linear(old.in_features, old.out_features, spec["group_size"], old.bias is not None))
    stored = {}
    if scheme == "int8_dynamic":  # plain tensors load first; the int8 modules are made afterwards
        names = spec["modules"]
        stored = {k: state.pop(k) for k in list(state) if k.startswith(tuple(f"{n}." for n in names))}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise ModelError(f"{path}: quantized weights do not fit the config ({exc})") from None
    shared = _shared_keys(model)  # stored once, under the first layer's name
    missing = [k for k in missing if k not in shared]
    if scheme == "int8_dynamic":
        quantize_int8_dynamic(model)
        for name, module in _dynamic_linears(model).items():
            try:  # the packed int8 tensor as torch.ao stores it (no public constructor takes int8 values)
                q = torch._make_per_channel_quantized_tensor(
                    stored[f"{name}.weight_int8"], stored[f"{name}.weight_scales"].double(),
                    stored[f"{name}.weight_zero_points"], 0)
            except KeyError as exc:
                raise ModelError(f"{path}: int8 weights of {name} are missing ({exc})") from None
            module.set_weight_bias(q, stored.get(f"{name}.bias"))
        missing = [k for k in missing if not k.startswith(tuple(f"{n}." for n in spec["modules"]))]
    if missing or unexpected:
        raise ModelError(f"{path}: quantized weights do not fit the config: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    setattr(model.config, QUANT_KEY, spec)
    return model.eval()
