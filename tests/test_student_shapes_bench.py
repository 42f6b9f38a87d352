"""benchmarks/student_shapes.py: shapes parsed and built as asked, and one end-to-end run on a tiny
teacher and tiny data (the benchmark's own runs time real shapes on SST-2)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoConfig

from conftest import make_tiny_glue, make_tiny_model_dir
from tinyplm.models.shape import layer_shape

pytest.importorskip("openvino")
import student_shapes as bench  # noqa: E402

positive = st.integers(1, 4096)


@given(st.text(st.characters(codec="ascii", exclude_characters="=,"), min_size=1), positive, positive, positive,
       st.none() | positive)
def test_a_well_formed_shape_reads_back_as_written(name: str, layers: int, heads: int, ffn: int,
                                                   hidden: int | None) -> None:
    text = f"{name}={layers},{heads},{ffn}" + (f",{hidden}" if hidden else "")
    assert bench.parse_shape(text) == bench.StudentShape(name, layers, heads, ffn, hidden)


@pytest.mark.parametrize("text", ["L3", "=3,9,512", "L3=3,9", "L3=3,9,512,384,1", "L3=3,0,512", "L3=3,x,512",
                                  "L3=3,-1,512"])
def test_a_malformed_shape_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=LAYERS,HEADS,FFN"):
        bench.parse_shape(text)


@settings(deadline=None, max_examples=10)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 40))
def test_a_built_shape_has_the_layers_heads_and_ffn_asked(tmp_path_factory, layers: int, heads: int,
                                                          ffn: int) -> None:
    cfg = AutoConfig.from_pretrained(make_tiny_model_dir(tmp_path_factory.mktemp("t")))  # 4 heads of width 8
    model = bench.build(bench.StudentShape("s", layers, heads, ffn), cfg)
    assert layer_shape(model) == {"heads": [heads] * layers, "ffn": [ffn] * layers}


def test_a_narrower_width_keeps_the_teacher_head_width_and_too_many_heads_are_refused(tmp_path: Path) -> None:
    cfg = AutoConfig.from_pretrained(make_tiny_model_dir(tmp_path / "t"))  # hidden 32, 4 heads of width 8
    model = bench.build(bench.StudentShape("narrow", 1, 2, 16, hidden=16), cfg)
    assert model.config.hidden_size == 16 and layer_shape(model)["heads"] == [2]
    with pytest.raises(ValueError, match="at most 2"):
        bench.build(bench.StudentShape("wide", 1, 3, 16, hidden=16), cfg)
    with pytest.raises(ValueError, match="multiple of 8"):
        bench.build(bench.StudentShape("odd", 1, 1, 16, hidden=12), cfg)


def test_a_run_times_every_shape_in_every_runtime_against_the_teacher(tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:
    teacher, glue = make_tiny_model_dir(tmp_path / "teacher"), make_tiny_glue(tmp_path / "glue", 32, 40)
    out = tmp_path / "shapes.json"
    monkeypatch.setattr(sys, "argv", ["student_shapes.py", "--teacher", str(teacher), "--data-dir", str(glue),
                                      "--shape", "one=1,2,16", "--shape", "same=2,4,37", "--runtimes",
                                      "openvino,onnx_int8,torch", "--rounds", "1", "--max-length", "32",
                                      "--out", str(out)])
    assert bench.main() == out
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    data = json.loads(out.read_text())
    rows = {r["name"]: r for r in data["rows"]}
    assert list(rows) == ["teacher", "one", "same"] and data["sentences"] == 40
    teacher_row = rows["teacher"]
    assert (teacher_row["layers"], teacher_row["heads"], teacher_row["ffn"]) == (2, 4, 37)
    for row in rows.values():
        assert set(row["sent_per_s"]) == {"openvino", "onnx_int8", "torch"} and min(row["sent_per_s"].values()) > 0
        assert row["fastest"] == max(row["sent_per_s"], key=row["sent_per_s"].get)
        best = row["sent_per_s"][row["fastest"]]
        assert row["x_teacher_fp32"] == pytest.approx(best / teacher_row["sent_per_s"]["torch"], abs=0.01)
        assert row["x_teacher_best"] == pytest.approx(best / max(teacher_row["sent_per_s"].values()), abs=0.01)
        assert sum(row["openvino_op_shares"].values()) == pytest.approx(1.0, abs=0.01)
        assert "FullyConnected" in row["openvino_op_shares"] or "MatMul" in row["openvino_op_shares"]
    assert rows["teacher"]["x_teacher_best"] == 1.0


def test_an_unknown_runtime_is_refused_before_any_work(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["student_shapes.py", "--shape", "L1=1,1,8", "--runtimes", "openvino,tensorrt",
                                      "--teacher", "/nonexistent"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--runtimes 'openvino,tensorrt'" in capsys.readouterr().err


@pytest.mark.parametrize("shapes", [["a=1,1,8", "a=2,1,8"], ["teacher=1,1,8"]])
def test_shape_names_that_would_overwrite_a_row_are_refused(shapes: list[str], monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["student_shapes.py", *(x for s in shapes for x in ("--shape", s)),
                                      "--teacher", "/nonexistent"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--shape names must differ" in capsys.readouterr().err
