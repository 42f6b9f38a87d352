"""Which kind of CPU this is, as the results pages name them, and what that means for int8.

A speed figure holds on the kind of CPU it was measured on (docs/results/index.md, "CPU kinds"):
which runtime is fastest, and so every "x the teacher", changes with the CPU's instructions. A run
says up front which kind it is on, records it (``results.json``'s ``info.machine``) and, where
int8 matrix products gain little (x86 without VNNI: products are added in 16 bits,
:mod:`tinyplm.models.int8_cpu`), says so: the runtime steps still time every candidate form and keep
the fastest one measured there, which on such a CPU may be a float form.

The kinds are data in :data:`KINDS` (first match wins), read from ``/proc/cpuinfo``'s flags.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import lru_cache

from tinyplm.models.int8_cpu import X86, cpu_flags, cpuinfo_text, saturates


@dataclass(frozen=True)
class KindRow:
    """One kind of CPU: the flags it must have, its ``name`` and the results pages' ``tag`` for the
    machines the project measured on (None where no figure was measured on that kind)."""

    requires: frozenset[str]
    name: str
    tag: str | None = None


#: x86 kinds, most capable first; a CPU is the first row whose flags it has.
KINDS: tuple[KindRow, ...] = (
    KindRow(frozenset({"amx_int8"}), "AMX (int8 and bf16 tiles), AVX-512 VNNI", "SPR-AMX"),
    KindRow(frozenset({"avx512_vnni", "avx512_bf16"}), "AVX-512 VNNI + BF16, no AMX", "EPYC-AVX512"),
    KindRow(frozenset({"avx512_vnni"}), "AVX-512 VNNI, no native bf16"),
    KindRow(frozenset({"avx_vnni"}), "AVX-VNNI, no AVX-512"),
    KindRow(frozenset({"avx512f"}), "AVX-512 without VNNI"),
    KindRow(frozenset({"avx2"}), "AVX2 only: no VNNI, no native bf16", "EPYC-AVX2"),
)

#: What is said where int8 gains little.
INT8_NOTE = ("int8 gains little on this CPU: it has no VNNI, so int8 kernels add products in 16 bits "
             "(7-bit weights keep them from saturating); each runtime step times every candidate form "
             "here and keeps the fastest, which may be a float one")


@dataclass(frozen=True)
class CpuKind:
    """This machine: the CPU's ``model`` name, its ``kind`` (:data:`KINDS`, or the architecture off
    x86), the results pages' ``tag`` for that kind (None if none), and ``int8_note`` where int8
    gains little here (None otherwise)."""

    model: str
    kind: str
    tag: str | None = None
    int8_note: str | None = None

    def line(self, label: str = "CPU") -> str:
        """One line for a run's output: the CPU, its kind, and the tag of figures measured on it."""
        return f"{label}: {self.model} ({self.described()})"

    def lines(self, label: str = "CPU") -> list[str]:
        """:meth:`line`, then the int8 note where there is one."""
        return [self.line(label)] + ([f"note: {self.int8_note}"] if self.int8_note else [])

    def described(self) -> str:
        """The kind, with the results pages' tag where figures were measured on this kind."""
        return f"{self.kind}; tagged {self.tag} in docs/results" if self.tag else self.kind


def classify(model: str, machine: str, flags: frozenset[str]) -> CpuKind:
    """The :class:`CpuKind` of a CPU named ``model``, of architecture ``machine`` (``platform.machine()``),
    with ``/proc/cpuinfo`` ``flags``."""
    note = INT8_NOTE if flags and saturates(machine, flags) else None
    if machine.lower() not in X86:
        return CpuKind(model or machine, f"{machine or 'unknown architecture'}, not x86", None, note)
    row = next((r for r in KINDS if r.requires <= flags), None)
    kind = row.name if row else ("x86 without AVX2" if flags else "x86, flags unreadable")
    return CpuKind(model or machine, kind, row.tag if row else None, note)


def cpu_model(cpuinfo: str) -> str:
    """The first ``model name`` line of ``/proc/cpuinfo`` text ("" if none)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return " ".join(value.split())
    return ""


@lru_cache(maxsize=1)
def cpu_kind() -> CpuKind:
    """:func:`classify` for this machine."""
    text = cpuinfo_text()
    return classify(cpu_model(text) or platform.processor(), platform.machine(), cpu_flags(text))
