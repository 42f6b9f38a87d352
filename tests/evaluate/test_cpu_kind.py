"""The CPU kind a run names: read from /proc/cpuinfo's flags, the tags the results pages use for the
kinds the project measured on, and the int8 note exactly where int8 products saturate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyplm.evaluate.cpu_kind import INT8_NOTE, KINDS, classify, cpu_model
from tinyplm.models.int8_cpu import cpu_flags, saturates

REPO = Path(__file__).resolve().parents[2]
CPUINFO = ("processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: {model}\n"
           "flags\t\t: fpu sse2 avx avx2 fma {extra}\nbugs\t\t: none\n")
KNOWN = ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_int8", "amx_bf16", "amx_tile"]


@pytest.mark.parametrize(("model", "extra", "tag", "slow_int8"), [
    ("Intel(R) Xeon(R) Platinum 8480+", "avx512f avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16", "SPR-AMX", False),
    ("AMD EPYC 9R14", "avx512f avx512_vnni avx512_bf16", "EPYC-AVX512", False),
    ("AMD EPYC 7R32", "", "EPYC-AVX2", True),
    ("Intel(R) Core(TM) i7-1165G7", "avx512f avx512_vnni", None, False),  # no native bf16: no project tag
    ("Intel(R) Core(TM) i7-12700H", "avx_vnni", None, False),
    ("Intel(R) Xeon(R) Gold 6148", "avx512f avx512bw", None, True),  # AVX-512 without VNNI
])
def test_the_project_kinds_from_cpuinfo(model: str, extra: str, tag: str | None, slow_int8: bool) -> None:
    text = CPUINFO.format(vendor="x", model=f"  {model}  ", extra=extra)
    kind = classify(cpu_model(text), "x86_64", cpu_flags(text))
    assert kind.model == model and kind.tag == tag
    assert (kind.int8_note == INT8_NOTE) is slow_int8 and (kind.int8_note is None) is not slow_int8
    assert kind.line().startswith(f"CPU: {model} (") and (tag is None or f"tagged {tag}" in kind.line())


def test_every_tag_is_a_kind_of_the_results_pages() -> None:
    """A tag the run prints is one docs/results/index.md explains (its CPU kinds table)."""
    page = (REPO / "docs" / "results" / "index.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| ([A-Z0-9-]+) \|", page.split("## CPU kinds", 1)[1], flags=re.M)
    tags = [row.tag for row in KINDS if row.tag]
    assert len(tags) == 3 and set(tags) <= set(table)


def test_off_x86_and_unreadable() -> None:
    arm = classify("", "aarch64", frozenset({"fp", "asimd", "asimddp"}))
    assert arm.model == "aarch64" and "not x86" in arm.kind and arm.tag is None and arm.int8_note is None
    blind = classify("Some CPU", "x86_64", frozenset())
    assert blind.int8_note is None and "unreadable" in blind.kind  # unknown is not "slow"
    assert cpu_model("processor\t: 0\n") == ""


@given(st.sets(st.sampled_from(KNOWN)), st.sampled_from(["x86_64", "AMD64", "aarch64"]))
def test_kind_follows_the_flags(flags: set[str], machine: str) -> None:
    """The first row of KINDS whose flags the CPU has; int8 note exactly where products saturate;
    a CPU with more of the listed instructions never gets a less capable row."""
    flags = frozenset(flags)
    kind = classify("cpu", machine, flags)
    assert (kind.int8_note is not None) == (bool(flags) and saturates(machine, flags))
    if machine == "aarch64":
        assert kind.tag is None
        return
    rows = [i for i, row in enumerate(KINDS) if row.requires <= flags]
    if rows:
        assert kind.kind == KINDS[rows[0]].name and kind.tag == KINDS[rows[0]].tag
        more = classify("cpu", machine, flags | {"amx_int8"})
        assert more.tag == "SPR-AMX" and more.int8_note is None
    else:
        assert kind.tag is None and kind.kind.startswith("x86")
