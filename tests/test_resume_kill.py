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

import helpers_warm as warm
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
    res = warm.run(_cmd(path, straight), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]

    killed = tmp_path / "killed"
    proc = warm.popen(_cmd(path, killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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

    res = warm.run(_cmd(path, killed, "--resume"), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert any('"event": "resume"' in line for line in (killed / "logs" / "train.jsonl").read_text().splitlines())

    a = load_file(str(straight / "teacher" / "model.safetensors"))
    b = load_file(str(killed / "teacher" / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] == b[key]).all(), key
    metric = lambda d: json.loads((d / "results.json").read_text())["stages"][0]["metrics"]  # noqa: E731
    assert metric(straight) == metric(killed)


def _wait_for_step(log: Path, proc: subprocess.Popen, step: int) -> None:
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        lines = log.read_text().splitlines() if log.is_file() else []
        if any(json.loads(x).get("event") == "train" and json.loads(x)["step"] >= step for x in lines):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run ended (or stalled) before step {step}")


def test_sigterm_then_resume_continues_from_that_step_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    """SIGTERM mid-training: exit 143 after a checkpoint of the current step (none was due); while
    it ran, a second `run --resume` on the same dir was refused naming the first; `--resume` then
    continues from the interrupted step and ends with the weights of an uninterrupted run."""
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=512)
    recipe = tiny_recipe(tmp_path, model, glue)
    # 320 steps, no periodic checkpoints: the interrupt's checkpoint is the only one (the run is paused
    # with SIGSTOP as soon as the 20 ms poll sees step 1 logged, hundreds of steps before its end)
    recipe["teacher"]["finetune"] = {**TINY_TRAIN, "epochs": 10, "log_every": 1}
    path = write_recipe(tmp_path / "r.yaml", recipe)
    env = {**os.environ, "TINYPLM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    straight = tmp_path / "straight"
    res = warm.run(_cmd(path, straight), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]

    stopped = tmp_path / "stopped"
    proc = warm.popen(_cmd(path, stopped), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = stopped / "logs" / "train.jsonl"
    _wait_for_step(log, proc, 1)
    # Paused (SIGSTOP) mid-loop so that on a fast CPU training cannot end while the second writer
    # starts up; SIGTERM then waits, pending, until SIGCONT lets the loop's handler take it.
    os.kill(proc.pid, signal.SIGSTOP)
    second = warm.run(_cmd(path, stopped, "--resume"), env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 2 and f"in use by pid {proc.pid}" in second.stderr, second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    os.kill(proc.pid, signal.SIGTERM)
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    events = [json.loads(x) for x in log.read_text().splitlines()]
    stop = next(e for e in events if e["event"] == "interrupted")
    assert 1 <= stop["step"] < 320 and f"SIGTERM at step {stop['step']}" in err
    assert (stopped / "checkpoints" / "teacher" / f"step-{stop['step']:06d}").is_dir()

    res = warm.run(_cmd(path, stopped, "--resume"), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    events = [json.loads(x) for x in log.read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "resume"] == [stop["step"]]
    a = load_file(str(straight / "teacher" / "model.safetensors"))
    b = load_file(str(stopped / "teacher" / "model.safetensors"))
    for key in a:
        assert (a[key] == b[key]).all(), key
