"""SIGKILL a training run mid-way, resume it, and get the same weights and metric as a straight run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe

pytestmark = pytest.mark.slow


def _cmd(recipe: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tinyplm.cli", "run", str(recipe), "--run-dir", str(run_dir), *extra]


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=512)
    finetune = {**TINY_TRAIN, "epochs": 8, "eval_every": 32, "checkpoint_every": 32}
    recipe = tiny_recipe(tmp_path, model, glue)
    recipe["teacher"]["finetune"] = finetune  # 256 steps
    path = write_recipe(tmp_path / "r.yaml", recipe)
    env = {**os.environ, "TINYPLM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    straight = tmp_path / "straight"
    res = subprocess.run(_cmd(path, straight), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(path, killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = killed / "checkpoints" / "teacher"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        done = sorted(p.name for p in ckpts.glob("step-*")) if ckpts.is_dir() else []
        if done and done[-1] >= "step-000064":
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "results.json").exists() and not (killed / "teacher").exists()
    log = (killed / "logs" / "train.jsonl").read_text().splitlines()
    last_step = max(json.loads(line).get("step", 0) for line in log)
    assert 64 <= last_step < 256

    res = subprocess.run(_cmd(path, killed, "--resume"), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert any('"event": "resume"' in line for line in (killed / "logs" / "train.jsonl").read_text().splitlines())

    a = load_file(str(straight / "teacher" / "model.safetensors"))
    b = load_file(str(killed / "teacher" / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] == b[key]).all(), key
    metric = lambda d: json.loads((d / "results.json").read_text())["stages"][0]["metrics"]  # noqa: E731
    assert metric(straight) == metric(killed)
