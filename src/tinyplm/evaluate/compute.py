"""How close a stage runs to the machine's limit: useful FLOPs per sentence from the model's shape,
times the measured sentences/s, against this CPU's theoretical peak for the precision that ran.

FLOPs count the encoder's matrix products on real tokens (padding is not useful work): per layer
and token, Q, K, V and the attention output (``2 * 4 * hidden * heads * head_dim``), the FFN
(``2 * 2 * hidden * ffn``) and the attention itself (``2 * 2 * seq * heads * head_dim``), with
the per-layer heads and FFN widths of a pruned model. Embedding lookups, LayerNorm, softmax and
the classifier are left out (they are small).

The peak is ``cores x clock x FLOPs per cycle per core`` for the precision's best instructions on
this CPU, read from its flags: fp32 FMA (AVX2: 32, AVX-512: 64), bf16 (AMX: 1024, AVX512-BF16:
128, else computed in fp32), int8 (AMX: 2048, AVX512-VNNI: 256, AVX-VNNI / AVX2: 128). ``cores`` is
the threads the model ran on, the clock is ``/proc/cpuinfo``'s. These are datasheet-style upper
bounds: a 10% share is already good for small matrices.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tinyplm.models.int8_cpu import cpu_flags, cpuinfo_text

#: FLOPs per cycle per core, best instructions first: (flag that must be present, FLOPs)
PEAK_TABLE: dict[str, tuple[tuple[str, int], ...]] = {
    "fp32": (("avx512f", 64), ("fma", 32), ("avx", 16)),
    "bf16": (("amx_bf16", 1024), ("avx512_bf16", 128), ("avx512f", 64), ("fma", 32)),
    "int8": (("amx_int8", 2048), ("avx512_vnni", 256), ("avx_vnni", 128), ("avx2", 128)),
}


@dataclass(frozen=True)
class Peak:
    """A theoretical peak: FLOP/s and how it was derived."""

    flops_per_s: float
    basis: str


@lru_cache(maxsize=1)
def cpu_flags_and_clock() -> tuple[frozenset[str], float]:
    """The CPU's feature flags and clock in GHz from ``/proc/cpuinfo`` (empty and 0 if unreadable)."""
    text = cpuinfo_text()
    mhz = 0.0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz" and not mhz:
            try:
                mhz = float(value)
            except ValueError:
                mhz = 0.0
    return cpu_flags(text), mhz / 1000


def peak(precision: str, threads: int) -> Peak | None:
    """This CPU's peak for ``precision`` (fp32, bf16 or int8) on ``threads`` cores; None if unknown."""
    flags, ghz = cpu_flags_and_clock()
    table = PEAK_TABLE.get(precision)
    if not table or ghz <= 0:
        return None
    for flag, per_cycle in table:
        if flag in flags:
            return Peak(threads * ghz * 1e9 * per_cycle,
                        f"{threads} cores x {ghz:.2f} GHz x {per_cycle} {precision} FLOPs/cycle ({flag})")
    return None


def flops_per_token(shape: dict, hidden: int, seq_len: float) -> float:
    """Encoder FLOPs per real token (see the module docstring) of a model of ``shape``
    (``models.shape_of``: layers, heads, ffn and, pruned, heads_per_layer / ffn_per_layer)."""
    layers = int(shape.get("layers", 0))
    head_dim = hidden // max(1, int(shape.get("heads", 1)))
    heads = shape.get("heads_per_layer") or [int(shape.get("heads", 0))] * layers
    ffn = shape.get("ffn_per_layer") or [int(shape.get("ffn", 0))] * layers
    total = 0.0
    for h, f in zip(heads, ffn, strict=True):
        a = h * head_dim
        total += 2 * 4 * hidden * a + 2 * 2 * hidden * f + 2 * 2 * seq_len * a
    return total


def effective_rate(shape: dict | None, hidden: int | None, mean_tokens: float, sent_per_s: float,
                   precision: str, threads: int) -> dict[str, float | str] | None:
    """GFLOP/s of useful work and its share of the peak for ``precision``; None without a
    transformer shape (none, or no attention heads: a classic LSTM or TF-IDF)."""
    if not shape or not shape.get("heads") or not hidden or sent_per_s <= 0 or mean_tokens <= 0:
        return None
    flops = flops_per_token(shape, hidden, mean_tokens) * mean_tokens * sent_per_s
    top = peak(precision, threads)
    out: dict[str, float | str] = {"gflops_per_s": round(flops / 1e9, 2), "precision": precision}
    if top is not None:
        out.update(peak_gflops_per_s=round(top.flops_per_s / 1e9, 1), share_of_peak=round(flops / top.flops_per_s, 4),
                   peak_basis=top.basis)
    return out
