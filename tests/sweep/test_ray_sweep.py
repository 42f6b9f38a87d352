"""A real sweep on a real Ray cluster: ``ray start --head`` in a subprocess, ``tinyplm sweep
--address`` against it, one trial's worker killed mid-training (the trial is retried and finishes
from its checkpoint), then ``--resume`` runs nothing again."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers_warm as warm
from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import cli
from tinyplm.files import lock_state

pytestmark = [pytest.mark.slow, pytest.mark.ray]
ray = pytest.importorskip("ray", reason="the cluster extra (ray[tune]) is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_head(exe: Path, env: dict[str, str], temp: Path, tries: int = 3) -> int:
    """``ray start --head`` on a free port -> the port. A port found free can be taken before Ray
    binds it (Ray also opens ports of its own), so up to ``tries`` ports are tried; when none
    starts, the test fails with what Ray printed each time instead of a bare exit status."""
    said = []
    for _ in range(tries):
        port = _free_port()
        done = subprocess.run([str(exe), "start", "--head", f"--port={port}", "--num-cpus=2",
                               "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            return port
        said.append(f"port {port}, exit {done.returncode}:\n{(done.stderr or done.stdout)[-3000:]}")
        subprocess.run([str(exe), "stop", "--force"], env=env, capture_output=True, timeout=120)
    pytest.fail(f"ray start --head failed {tries} times:\n" + "\n---\n".join(said))


@pytest.fixture
def ray_head(tmp_path: Path) -> Iterator[str]:
    """A Ray head started as a user would (``ray start --head``), stopped at the end. Ray 2.59+
    starts it with token authentication; RAY_AUTH_MODE=token (set here for this process and the
    commands it starts) makes a client send the token. Ray 2.59's ``ray start`` wrote one to
    ~/.ray/auth_token when there was none, 2.60's refuses to start without one; so the test gives
    the head and its clients one token of its own (RAY_AUTH_TOKEN, which both versions read)."""
    exe = Path(sys.executable).with_name("ray")
    temp = Path("/tmp") / f"ray-{os.getpid()}"  # Ray's socket paths must stay short
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    port = _start_head(exe, env, temp)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(exe), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
        os.environ.pop("RAY_AUTH_MODE", None)
        os.environ.pop("RAY_AUTH_TOKEN", None)


def _sweep_files(tmp_path: Path) -> tuple[Path, Path]:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    # Trials train for a few seconds each (a time budget, not steps), long enough to kill one mid-way.
    train = {"epochs": 500, "budget_minutes": 0.12, "batch_size": 16, "lr": 3.0e-3, "precision": "fp32",
             "eval_every": 0, "checkpoint_every": 20}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=16),
                         students=[{"name": "st", "teacher_layers": [0], "train": train}])
    recipe["teacher"]["finetune"] = None  # the tiny teacher as it is: trials train only their student
    space = {"name": "tiny", "output_dir": str(tmp_path / "sweep"), "stage": "last", "max_failures": 2,
             "params": {"students.0.train.seed": {"grid": [1, 2]}}}  # two trials, run side by side
    return write_recipe(tmp_path / "r.yaml", recipe), write_recipe(tmp_path / "space.yaml", space)


def _kill_one_training_worker(trials: Path, deadline: float) -> Path:
    """SIGKILL the Ray worker of the first trial seen training its student past a checkpoint (its
    run dir locked by the worker); returns that trial's run dir."""
    while time.monotonic() < deadline:
        for run_dir in sorted(trials.glob("t-*")) if trials.is_dir() else []:
            live, holder = lock_state(run_dir)
            log = run_dir / "logs" / "train.jsonl"
            started = log.is_file() and any('"stage": "st"' in line and '"event": "checkpoint"' in line
                                            for line in log.read_text(encoding="utf-8").splitlines())
            if live and holder is not None and started:
                os.kill(holder.pid, signal.SIGKILL)
                return run_dir
        time.sleep(0.2)
    raise AssertionError(f"no trial was seen training in {trials}")


def _check_tracked(sweep: Path, keys: list[str]) -> None:
    """MLflow holds the sweep as a finished parent run (the space as parameters, the table as an
    artifact) with one finished child run per trial, the trial's curves and results in it."""
    from helpers_track import mlflow_client, tracking_info

    parent = tracking_info(sweep)["mlflow"]
    client = mlflow_client(parent["tracking_uri"])
    run = client.get_run(parent["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["search"] == "grid"
    assert "sweep.json" in {a.path for a in client.list_artifacts(parent["run_id"])}
    children = client.search_runs([run.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent['run_id']}'")
    assert sorted(c.info.run_name for c in children) == sorted(f"tiny-{k}" for k in keys)
    assert all(c.info.status == "FINISHED" for c in children)
    trial = tracking_info(sweep / "trials" / keys[0])["mlflow"]["run_id"]
    assert client.get_metric_history(trial, next(k for k in client.get_run(trial).data.metrics if "loss" in k))


def test_a_sweep_on_a_ray_cluster_survives_a_killed_worker_and_resumes(tmp_path: Path, ray_head: str) -> None:
    recipe, space = _sweep_files(tmp_path)
    cmd = [sys.executable, "-m", "tinyplm", "sweep", str(recipe), "--space", str(space), "--address", ray_head,
           "--max-concurrent", "2", "--cpus-per-trial", "1", "--track"]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = warm.popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    killed = _kill_one_training_worker(tmp_path / "sweep" / "trials", time.monotonic() + 240)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    table = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert [t["status"] for t in table["trials"]] == ["finished"] * 2
    assert {t["values"]["students.0.train.seed"] for t in table["trials"]} == {1, 2}
    events = [json.loads(line) for line in (killed / "logs" / "train.jsonl").read_text().splitlines()]
    assert any(e.get("event") == "resume" and e.get("stage") == "st" for e in events), \
        "the killed trial's run did not continue from its checkpoint"
    assert stdout.strip().splitlines()[-1].endswith("sweep.json")
    done = {t["key"]: (killed.parent / t["key"] / "results.json").stat().st_mtime_ns for t in table["trials"]}
    _check_tracked(tmp_path / "sweep", [t["key"] for t in table["trials"]])

    again = cli(["sweep", str(recipe), "--space", str(space), "--address", ray_head, "--resume"], cwd=tmp_path,
                subprocess=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {k: (killed.parent / k / "results.json").stat().st_mtime_ns for k in done} == done  # nothing re-ran
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["trials"] == table["trials"]

    refused = cli(["sweep", str(recipe), "--space", str(space), "--address", ray_head], cwd=tmp_path,
                  subprocess=True)
    assert refused.returncode == 2 and "--resume continues it" in refused.stderr
