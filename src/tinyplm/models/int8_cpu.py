"""Whether int8 matrix products saturate on this CPU, and the 7-bit weights that avoid it.

On x86 CPUs without VNNI (AVX2 only, or AVX-512 without its VNNI extension: many laptops, AMD
before Zen 4), ONNX Runtime's and OpenVINO's uint8 x int8 kernels multiply with ``VPMADDUBSW``,
which adds two products into a signed 16-bit lane: ``2 * 255 * 127`` does not fit, and large
activations against large weights saturate: on such a CPU the int8 logits of tiny random models
moved far from their fp32 logits, and much less with 7-bit weights (the figures: docs/compress.md).
CPUs with VNNI
(AVX512-VNNI, AVX-VNNI, AMX) accumulate in 32 bits and do not saturate; ARM CPUs use their own
dot products. Weights quantized to 7 bits (ONNX Runtime's ``reduce_range``, NNCF's
``OverflowFix.ENABLE``) leave the headroom, at a small cost in weight precision, so they are the
default only where the CPU that quantizes (and measures) the model saturates.

A model quantized on a VNNI CPU and deployed on one without can saturate there: set
``reduce_range: true`` on the step for such a deployment.
"""

from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path

#: ``/proc/cpuinfo`` flags of x86 int8 dot products that accumulate in 32 bits.
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
X86 = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})


@lru_cache(maxsize=1)
def cpuinfo_text() -> str:
    """``/proc/cpuinfo``, read once per process ("" if unreadable)."""
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The first ``flags`` line of ``/proc/cpuinfo`` (or of the given text); empty if unreadable."""
    if cpuinfo is None:
        cpuinfo = cpuinfo_text()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def saturates(machine: str, flags: frozenset[str]) -> bool:
    """True for an x86 ``machine`` whose ``flags`` name no VNNI instruction (see the module docstring)."""
    return machine.lower() in X86 and not flags & VNNI_FLAGS


@lru_cache(maxsize=1)
def int8_saturates() -> bool:
    """:func:`saturates` for this machine."""
    return saturates(platform.machine(), cpu_flags())


def reduce_range(setting: bool | None) -> bool:
    """Whether to quantize weights to 7 bits: ``setting`` when given, else where this CPU saturates."""
    return int8_saturates() if setting is None else setting
