"""`tinyplm export RUN_DIR --onnx`: every stage exported, parity with PyTorch printed and stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import assert_bad_input, cli
from tinyplm.config import load_recipe
from tinyplm.models import load_classifier
from tinyplm.models.onnx import OrtClassifier
from tinyplm.run import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("export")
    glue = make_tiny_glue(tmp / "glue", n_train=64, n_dev=40)
    students = [{"name": "small", "teacher_layers": [1], "train": {**TINY_TRAIN, "max_steps": 3}, "compress": [
        {"kind": "prune_ffn", "keep": 0.5, "score_batches": 2}, {"kind": "onnx_dynamic_int8"}]},
        {"name": "torchq", "init_from": "small", "stages": [], "compress": [{"kind": "dynamic_int8"}]}]
    recipe = tiny_recipe(tmp, make_tiny_model_dir(tmp / "tiny-bert"), glue, students=students)
    cfg = load_recipe(write_recipe(tmp / "r.yaml", recipe))
    run(cfg)
    return Path(cfg.output_dir)


def test_export_every_stage_with_parity(finished_run: Path) -> None:
    result = cli(["export", finished_run, "--onnx"], cwd=finished_run.parent)
    assert result.returncode == 0, result.output
    parity = {p["stage"]: p for p in json.loads((finished_run / "export" / "parity.json").read_text())}
    assert set(parity) == {"teacher", "small", "small.prune_ffn", "small.onnx_dynamic_int8", "torchq.dynamic_int8"}
    assert (parity["torchq.dynamic_int8"]["agreement"] is None
            and "not exported" in parity["torchq.dynamic_int8"]["note"])
    for name in ("teacher", "small", "small.prune_ffn"):
        assert parity[name]["examples"] == 40 and parity[name]["agreement"] >= 0.995
        assert parity[name]["max_abs_logit_diff"] < 1e-3
        assert name in result.stdout
    assert (parity["small.onnx_dynamic_int8"]["agreement"] is None
            and "already" in parity["small.onnx_dynamic_int8"]["note"])
    model, _ = load_classifier(finished_run / "export" / "small.prune_ffn", ("negative", "positive"), False)
    assert isinstance(model, OrtClassifier)


def test_export_one_stage_as_json(finished_run: Path, tmp_path: Path) -> None:
    result = cli(["export", finished_run, "--onnx", "--stage", "small", "--out", tmp_path / "e", "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["stage"] for r in rows] == ["small"] and (tmp_path / "e" / "small" / "model.onnx").is_file()


def test_export_bad_input(finished_run: Path, tmp_path: Path) -> None:
    assert_bad_input(cli(["export", tmp_path, "--onnx"], cwd=tmp_path), "not a finished tinyplm run")
    assert_bad_input(cli(["export", finished_run, "--onnx", "--stage", "nope"], cwd=tmp_path), "no stage(s) ['nope']")
    assert_bad_input(cli(["export", finished_run], cwd=tmp_path), "--onnx")


def test_a_missing_stage_folder_or_a_file_as_out_is_refused_before_any_export(finished_run: Path,
                                                                              tmp_path: Path) -> None:
    """A run copied without one stage's folder exported the stages before it, then stopped, their
    parity lost; an --out that is a file stopped with a raw FileExistsError. Both are refused first."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, ignore=shutil.ignore_patterns("export"))
    shutil.rmtree(copy / "students" / "small.prune_ffn")
    assert_bad_input(cli(["export", copy, "--onnx"], cwd=tmp_path),
                     f"the model folder of stage(s) small.prune_ffn ({copy / 'students' / 'small.prune_ffn'}) is gone")
    assert not (copy / "export").exists()
    (tmp_path / "afile").write_text("x")
    assert_bad_input(cli(["export", finished_run, "--onnx", "--stage", "small", "--out", tmp_path / "afile"],
                         cwd=tmp_path),
                     f"--out: {tmp_path / 'afile'}: is a file; the export destination must be a folder")


@pytest.mark.parametrize("out", [".", "students", "students/small"])
def test_an_out_where_the_exports_would_replace_the_run_s_models_is_refused(finished_run: Path, tmp_path: Path,
                                                                            out: str) -> None:
    """``--out RUN_DIR`` put the teacher's ONNX copy in place of RUN_DIR/teacher (its fine-tuned
    PyTorch weights gone); ``--out RUN_DIR/students`` each student's. Refused, nothing written."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, ignore=shutil.ignore_patterns("export"))
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert_bad_input(cli(["export", copy, "--onnx", "--out", copy / out], cwd=tmp_path),
                     "which would replace the run's model folder")
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
