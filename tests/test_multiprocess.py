"""The same training loop under `accelerate launch` with two CPU processes (gloo), including a
layer-wise stage whose projection lives outside the student and whose classifier gets no gradient."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helpers_warm as warm
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe

pytestmark = pytest.mark.slow


def test_two_process_distillation_matches_one_process(tmp_path: Path) -> None:
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip("accelerate launcher not installed next to this python")
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue")
    # a layer-wise stage (classifier unused, projection trained outside the encoder) then KD
    student = {"name": "student", "shape": {"layers": 2, "hidden": 16, "heads": 4, "ffn": 37},
               "stages": [
                   {"name": "layers", "objective": {"kd_weight": 0, "hidden": 1, "attention_kl": 1},
                    "train": {**TINY_TRAIN, "epochs": 2}},
                   {"name": "kd", "objective": {"temperature": 2.0, "kd_weight": 1.0, "hard_weight": 0.5},
                    "train": {**TINY_TRAIN, "epochs": 6}}]}
    recipe = tiny_recipe(tmp_path, model, glue, students=[student])
    path = write_recipe(tmp_path / "r.yaml", recipe)
    env = {**os.environ, "TINYPLM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    one = warm.run([sys.executable, "-m", "tinyplm.cli", "run", str(path), "--run-dir", str(tmp_path / "one")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr[-2000:]
    # On a CPU-only machine accelerate starts several processes only through its torchrun
    # launcher (--multi_gpu); it then picks the gloo backend (DistributedType.MULTI_CPU).
    two = subprocess.run(
        [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29533",
         "-m", "tinyplm.cli", "run", str(path), "--run-dir", str(tmp_path / "two")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    r1 = json.loads((tmp_path / "one" / "results.json").read_text())
    r2 = json.loads((tmp_path / "two" / "results.json").read_text())
    assert r1["info"]["processes"] == 1 and r2["info"]["processes"] == 2
    acc1 = {s["name"]: s["metrics"]["accuracy"] for s in r1["stages"]}
    acc2 = {s["name"]: s["metrics"]["accuracy"] for s in r2["stages"]}
    assert acc1["teacher"] >= 0.9 and acc2["teacher"] >= 0.9
    assert abs(acc1["student"] - acc2["student"]) <= 0.1
    # both processes trained the same number of global steps
    steps = lambda d: max(json.loads(l).get("step", 0) for l in (d / "logs/train.jsonl").read_text().splitlines())  # noqa: E731,E741
    assert steps(tmp_path / "one") == steps(tmp_path / "two")
