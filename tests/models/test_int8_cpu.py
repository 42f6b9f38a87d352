"""int8 saturation: 7-bit weights are the default exactly where the CPU's int8 products saturate
(x86 without VNNI), a step's ``reduce_range`` overrides that either way, and the quantized
weights then really fit in 7 bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_model_dir, tiny_sentiment_rows
from tinyplm.config.compress import FastestRuntime, OnnxDynamicInt8, OpenVinoInt8
from tinyplm.models import int8_cpu
from tinyplm.models.int8_cpu import cpu_flags, saturates

CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma {extra}\nbugs\t\t: none\n"


@pytest.mark.parametrize(("machine", "extra", "expected"), [
    ("x86_64", "", True),  # AVX2 only: VPMADDUBSW adds pairs into 16 bits
    ("x86_64", "avx512f avx512bw", True),  # AVX-512 without VNNI saturates too
    ("x86_64", "avx512f avx512_vnni", False),
    ("x86_64", "avx_vnni", False),
    ("AMD64", "amx_int8 amx_tile", False),
    ("aarch64", "", False),  # ARM: its own dot products
])
def test_saturation_is_x86_without_vnni(machine: str, extra: str, expected: bool) -> None:
    flags = cpu_flags(CPUINFO.format(extra=extra))
    assert {"sse2", "avx2"} <= flags and "none" not in flags
    assert saturates(machine, flags) is expected


def test_the_step_setting_wins_over_the_cpu(monkeypatch) -> None:
    assert cpu_flags("processor\t: 0\n") == frozenset()
    for cpu in (True, False):
        monkeypatch.setattr(int8_cpu, "int8_saturates", lambda cpu=cpu: cpu)
        assert int8_cpu.reduce_range(None) is cpu
        assert int8_cpu.reduce_range(True) is True and int8_cpu.reduce_range(False) is False


def test_fastest_runtime_hands_its_setting_to_every_int8_candidate() -> None:
    from tinyplm.compress.runtime import candidate_step

    step = FastestRuntime(kind="runtime", reduce_range=True,
                          candidates=["onnx_dynamic_int8", "onnx_static_int8", "openvino_int8"])
    assert all(candidate_step(k, step).reduce_range is True for k in step.candidates)
    assert candidate_step("onnx_dynamic_int8", FastestRuntime(kind="runtime")).reduce_range is None
    # unset, the key is not written into a resolved recipe (runs made before it stay the same)
    assert "reduce_range" not in OnnxDynamicInt8(kind="onnx_dynamic_int8").model_dump()
    assert OpenVinoInt8(kind="openvino_int8", reduce_range=False).model_dump()["reduce_range"] is False


def _int8_weights(path: Path) -> list[np.ndarray]:
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    return [numpy_helper.to_array(t) for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]


def test_seven_bit_weights_fit_in_seven_bits(tmp_path: Path) -> None:
    from tinyplm.compress.onnx_quant import dynamic_int8, static_int8
    from tinyplm.models import load_classifier
    from tinyplm.tasks.base import Example, Split
    from tinyplm.tasks.encoding import encode_split

    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "tiny-bert"), ("0", "1"), False)
    rows = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(32, 0))]
    enc = encode_split(Split("train", rows, tmp_path / "train.tsv"), tok, 32)
    for name, make in (("dynamic", lambda work, rr: dynamic_int8(model, work, reduce_range=rr)),
                       ("static", lambda work, rr: static_int8(model, enc, work, examples=16, reduce_range=rr))):
        for bits in "87":
            (tmp_path / name / bits).mkdir(parents=True)
        full = _int8_weights(make(tmp_path / name / "8", False).path)
        seven = _int8_weights(make(tmp_path / name / "7", True).path)
        assert full and len(seven) == len(full), name
        assert max(int(np.abs(w.astype(int)).max()) for w in full) == 127, name  # per channel: the largest is 127
        assert max(int(np.abs(w.astype(int)).max()) for w in seven) <= 64, name


def test_openvino_int8_says_when_its_weights_are_seven_bit(tmp_path: Path) -> None:
    pytest.importorskip("nncf")
    from tinyplm.compress.openvino import openvino_int8
    from tinyplm.models import load_classifier
    from tinyplm.tasks.base import Example, Split
    from tinyplm.tasks.encoding import encode_split

    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "tiny-bert"), ("0", "1"), False)
    rows = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(16, 0))]
    enc = encode_split(Split("train", rows, tmp_path / "train.tsv"), tok, 32)
    made = {rr: openvino_int8(model, enc, tmp_path / str(rr), examples=8, precision="f32", reduce_range=rr)
            for rr in (True, False)}
    assert "7-bit weights (overflow fix in every layer)" in made[True].quantization
    assert "7-bit" not in made[False].quantization and made[True].int8_matmuls == made[False].int8_matmuls > 0
