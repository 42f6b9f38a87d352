"""Static students in a tiny run through the real CLI: a SIF bag (int8 table) distilled from the
teacher's logits on task data, a CNN (fp16 table) with Tang et al.'s logit MSE on augmented
data and a BiLSTM (int8 table); all in results.json and summary.md beside the teacher, and `tinyplm predict` on a saved
one gives the labels `tinyplm evaluate` scores, with the run's accuracy, and the serving
predictor the same labels. A recipe asking for more
PCA components than the teacher's width is refused before the teacher trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_mlm_dir, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import cli
from tinyplm.config import load_recipe
from tinyplm.errors import RecipeError
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.run import run

pytestmark = pytest.mark.slow

SHORT = {**TINY_TRAIN, "max_steps": 6, "lr": 1e-2, "weight_decay": 0.0}


def _recipe(tmp_path: Path) -> Path:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    students = [
        {"name": "static", "family": {"arch": "static", "static": {"dims": 16, "hidden": 8, "table_dtype": "int8"}},
         "objective": {"kd_weight": 1.0, "hard_weight": 0.5, "temperature": 2.0}, "train": SHORT},
        {"name": "static-cnn", "family": {"arch": "static_cnn", "encoder": "finetuned",
                                          "static": {"dims": 16, "filters": [[2, 8], [3, 8]], "table_dtype": "fp16"}},
         "stages": [{"data": "augmented", "objective": {"kd_weight": 0, "logit_mse": 1}, "train": SHORT}]},
        {"name": "static-bilstm", "family": {"arch": "static_bilstm", "hidden": 8, "pooling": "mean",
                                             "static": {"dims": 16, "table_dtype": "int8"}},
         "objective": {"kd_weight": 1.0}, "train": SHORT},
    ]
    recipe = tiny_recipe(tmp_path, model, glue, students=students)
    recipe["teacher"]["finetune"]["max_steps"] = 4
    recipe["augment"] = {"mlm": str(make_tiny_mlm_dir(tmp_path / "mlm")), "copies": 2, "max_examples": 20}
    return write_recipe(tmp_path / "r.yaml", recipe)


def test_static_students_run_predict_and_evaluate_alike(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    got = cli(["run", recipe], cwd=tmp_path)
    assert got.returncode == 0, got.output
    run_dir = Path(load_recipe(recipe).output_dir)
    stages = {s["name"]: s for s in json.loads((run_dir / "results.json").read_text())["stages"]}
    assert {"teacher", "static", "static-cnn", "static-bilstm"} <= set(stages)
    bag, cnn, lstm = stages["static"], stages["static-cnn"], stages["static-bilstm"]
    tables = {s["name"]: s["info"]["classic"]["table"] for s in (bag, cnn, lstm)}  # results.json as written
    assert bag["shape"] == {"arch": "static", "dims": 16, "rows": tables["static"]["pieces"], "table": "int8",
                            "weighting": "sif", "hidden": 8}
    assert cnn["shape"]["widths"] == [2, 3] and cnn["shape"]["table"] == "fp16"
    assert lstm["shape"] == {"arch": "static_bilstm", "dims": 16, "rows": tables["static-bilstm"]["pieces"],
                             "table": "int8", "layers": 1, "hidden": 8, "pooling": "mean"}
    assert cnn["info"]["training"][0]["data"] == "augmented" and cnn["info"]["training"][0]["examples"] == 20 * 3 + 44
    assert tables["static-cnn"]["pieces"] >= tables["static"]["pieces"]  # the copies' pieces are kept too
    for s in (bag, cnn, lstm):
        assert s["throughput_sent_per_s"] > 0 and s["disk_bytes"] > 0 and s["params"] > 0
        assert 0 < s["info"]["training"][0]["trainable_params"] <= s["info"]["training"][0]["total_params"]
    rows = {line.split("|")[1].strip(" *") for line in (run_dir / "summary.md").read_text().splitlines()
            if line.startswith("| ")}
    assert {"teacher", "static", "static-cnn", "static-bilstm"} <= rows  # a row each in the report's table
    dev = tmp_path / "glue" / "SST-2" / "dev.tsv"
    gold = [row.split("\t")[1] for row in dev.read_text().splitlines()[1:]]
    for name in ("static", "static-cnn", "static-bilstm"):
        folder = run_dir / stages[name]["model_dir"]
        predicted = cli(["predict", folder, "-i", dev, "-o", tmp_path / f"{name}.jsonl"], cwd=tmp_path)
        assert predicted.returncode == 0, predicted.output
        rows = [json.loads(x) for x in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        accuracy = sum(str(r["label_id"]) == g for r, g in zip(rows, gold, strict=True)) / len(gold)
        scored = cli(["evaluate", folder, "--task", "sst2", "--data-dir", tmp_path / "glue", "--max-length", "32",
                      "--json"], cwd=tmp_path)
        assert scored.returncode == 0, scored.output
        assert json.loads(scored.stdout)["metrics"]["accuracy"] == pytest.approx(accuracy)
        assert stages[name]["metrics"]["accuracy"] == pytest.approx(accuracy)
        served = Predictor.load(folder, batch_size=3, split_by_length=True)  # as `tinyplm serve` batches
        texts = [row.split("\t")[0] for row in dev.read_text().splitlines()[1:]]
        assert [x.label for x in served.predict([TextInput(t) for t in texts])] == [r["label"] for r in rows]


def test_more_pca_dims_than_the_encoders_width_is_refused_before_the_teacher_trains(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    student = {"name": "wide", "family": {"arch": "static", "static": {"dims": 64}}, "train": SHORT}
    recipe = tiny_recipe(tmp_path, model, make_tiny_glue(tmp_path / "glue", 16, 8), students=[student])
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    with pytest.raises(RecipeError, match="student wide: family.static.dims 64 is more than the hidden size 32"):
        run(cfg)
    assert not (tmp_path / "runs").exists()


def test_static_students_on_other_runtimes_predict_as_they_measured(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    students = [{"name": "cnn", "family": {"arch": "static_cnn", "static": {"dims": 16, "filters": [[2, 8]]}},
                 "objective": {"kd_weight": 1.0, "hard_weight": 0.5}, "train": SHORT,
                 "compress": [{"kind": "runtime", "candidates": ["openvino", "onnx_dynamic_int8"], "max_drop": 0.99,
                               "control_examples": 10, "calibration_examples": 8}]},
                {"name": "bag", "family": {"arch": "static", "static": {"dims": 16, "table_dtype": "int8"}},
                 "objective": {"kd_weight": 1.0}, "train": SHORT,
                 "compress": [{"kind": "openvino", "embeddings": True}]},
                {"name": "lstm", "family": {"arch": "static_bilstm", "hidden": 8, "static": {"dims": 16}},
                 "objective": {"kd_weight": 1.0}, "train": SHORT,
                 "compress": [{"kind": "runtime", "candidates": ["openvino", "onnx_dynamic_int8"], "max_drop": 0.99,
                               "control_examples": 10, "calibration_examples": 8}]}]
    recipe = tiny_recipe(tmp_path, model, glue, students=students)
    recipe["teacher"]["finetune"]["max_steps"] = 4
    path = write_recipe(tmp_path / "r.yaml", recipe)
    got = cli(["run", path], cwd=tmp_path)
    assert got.returncode == 0, got.output
    run_dir = Path(load_recipe(path).output_dir)
    stages = {s["name"]: s for s in json.loads((run_dir / "results.json").read_text())["stages"]}
    fast = stages["cnn.runtime"]
    assert fast["parent"] == "cnn" and fast["runtime"] in ("openvino", "onnxruntime")
    assert fast["shape"] == {**stages["cnn"]["shape"]}  # the student's own shape, on another runtime
    chosen = fast["info"]["compress"]["details"]["chosen_by"]
    assert set(chosen["candidates"]) == {"openvino", "onnx_dynamic_int8"}
    assert fast["info"]["compress"]["agreement"]["agreement"] >= 0.9  # the same arithmetic on another runtime
    bag = stages["bag.openvino"]  # its int8 table compressed by NNCF, its vector of piece weights left alone
    assert bag["runtime"] == "openvino" and bag["info"]["compress"]["details"]["int8"] == "embeddings"
    assert bag["info"]["compress"]["agreement"]["agreement"] >= 0.9
    lstm = stages["lstm.runtime"]  # its LSTMs exported and converted like the CNN's convolutions
    assert lstm["runtime"] in ("openvino", "onnxruntime") and lstm["shape"] == stages["lstm"]["shape"]
    assert lstm["info"]["compress"]["agreement"]["agreement"] >= 0.9
    dev = tmp_path / "glue" / "SST-2" / "dev.tsv"
    gold = [row.split("\t")[1] for row in dev.read_text().splitlines()[1:]]
    for stage in (fast, bag, lstm):  # loaded back from their dirs (ONNX or OpenVINO) by tinyplm predict
        out = tmp_path / f"{stage['name']}.jsonl"
        predicted = cli(["predict", run_dir / stage["model_dir"], "-i", dev, "-o", out], cwd=tmp_path)
        assert predicted.returncode == 0, predicted.output
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        accuracy = sum(str(r["label_id"]) == g for r, g in zip(rows, gold, strict=True)) / len(gold)
        assert stage["metrics"]["accuracy"] == pytest.approx(accuracy)


def test_a_static_student_takes_only_runtime_steps(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    for arch, step, expected in (("static", {"kind": "prune_heads", "keep": 0.5}, "compress step prune_heads: a "
                                  "'static' student takes only a runtime step"),
                                 ("bilstm", {"kind": "openvino"}, "a 'bilstm' student takes no compress steps")):
        students = [{"name": "s", "family": {"arch": arch}, "compress": [step]}]
        path = write_recipe(tmp_path / f"{arch}.yaml", tiny_recipe(tmp_path, model, glue, students=students))
        with pytest.raises(RecipeError, match=expected):
            load_recipe(path)
