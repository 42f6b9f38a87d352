"""A tiny run tracked from the command line (``--track`` and ``tracking.tensorboard``), read back
from MLflow and TensorBoard; the same command without tracking imports neither; tracking asked for
without its package stops before the run dir is made."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

import helpers_warm as warm
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import assert_bad_input, cli
from helpers_track import mlflow_client, tensorboard_scalars, tracking_info

STUDENT = {"name": "small", "shape": {"layers": 1, "hidden": 32, "heads": 2, "ffn": 37},
           "train": {**TINY_TRAIN, "epochs": 1, "log_every": 1, "eval_every": 2}}


@pytest.fixture(autouse=True)
def _file_store_allowed(monkeypatch) -> None:
    """Each test starts without the file-store opt-out tinyplm sets for file: URIs."""
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)


def _recipe(tmp: Path, **sections) -> Path:
    raw = tiny_recipe(tmp, make_tiny_model_dir(tmp / "teacher"), make_tiny_glue(tmp / "glue", n_train=64, n_dev=16),
                      students=[STUDENT], **sections)
    raw["teacher"]["finetune"].update(log_every=2, eval_every=4)  # 16 steps: 8 loss points, 4 dev checks
    return write_recipe(tmp / "recipe.yaml", raw)


def test_a_tracked_run_reads_back_from_mlflow_and_tensorboard(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    recipe = _recipe(tmp_path, tracking={"tensorboard": True})
    result = cli(["run", recipe, "--track"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    run_dir = tmp_path / "runs" / "tiny"
    where = tracking_info(run_dir)
    assert where["mlflow"]["tracking_uri"] == (tmp_path / "runs" / "mlruns").as_uri()  # --track's default
    client = mlflow_client(where["mlflow"]["tracking_uri"])
    run_id = where["mlflow"]["run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "tiny"

    params = run.data.params
    assert params["task.name"] == "sst2" and params["students.0.name"] == "small"
    assert float(params["teacher.finetune.lr"]) == TINY_TRAIN["lr"]
    assert not [k for k in params if k.startswith("tracking")]  # how it is observed is not the recipe

    loss = client.get_metric_history(run_id, "teacher/train/loss")
    assert [m.step for m in loss] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert [m.step for m in client.get_metric_history(run_id, "teacher/dev/accuracy")] == [4, 8, 12, 16]
    assert len(client.get_metric_history(run_id, "small/train/lr")) == 4
    metrics = run.data.metrics
    for stage in ("teacher", "small"):
        assert 0 <= metrics[f"{stage}/final/accuracy"] <= 1
        assert metrics[f"{stage}/size/params"] > 0 and metrics[f"{stage}/speed/throughput_sent_per_s"] > 0
    assert metrics["final_model/final/accuracy"] == metrics["small/final/accuracy"]
    assert run.data.tags["tinyplm.final_model"] == "small"

    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"results.json", "summary.md", "report.html", "config.resolved.yaml", "plots", "model"} <= artifacts
    assert "config.json" in {Path(a.path).name for a in client.list_artifacts(run_id, "model")}
    stored = json.loads(Path(client.download_artifacts(run_id, "results.json", str(tmp_path / "dl"))).read_text())
    assert stored == json.loads((run_dir / "results.json").read_text())

    scalars = tensorboard_scalars(run_dir / "tensorboard")
    assert [step for step, _ in scalars["teacher/train/loss"]] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert "small/final/accuracy" in scalars
    assert "tracking" not in yaml.safe_load((run_dir / "config.resolved.yaml").read_text())


def test_tracking_without_mlflow_installed_stops_before_the_run_dir_is_made(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if it were not installed
    recipe = _recipe(tmp_path)
    result = cli(["run", recipe, "--track"], cwd=tmp_path)
    assert_bad_input(result, "tracking.mlflow (or --track)", "pip install 'mlflow-skinny'")
    assert not (tmp_path / "runs").exists()
    assert_bad_input(cli(["validate", recipe, "tracking.mlflow=true", "--no-inputs"], cwd=tmp_path),
                     "tracking.mlflow")


def test_a_misspelled_tracking_key_is_named(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, tracking={"mlfow": True})
    assert_bad_input(cli(["validate", recipe, "--no-inputs"], cwd=tmp_path), "tracking.mlfow", "'mlflow'")


PROBE = """
import json, sys
from tinyplm.cli import main
sys.argv = ["tinyplm", "run", sys.argv[1]]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print("LOADED", json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mlflow", "tensorboardX"))))
"""


def test_an_untracked_run_imports_neither_mlflow_nor_tensorboardx(tmp_path: Path) -> None:
    """A process of its own; launched warm (tests/helpers_warm.py), it holds what the launcher
    imported too, which is more than a run imports, and none of it is MLflow or TensorBoardX."""
    recipe = _recipe(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TINYPLM_CACHE": str(tmp_path / "cache")}
    proc = warm.run([sys.executable, str(probe), str(recipe)], cwd=tmp_path, env=env, capture_output=True,
                    text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "LOADED []" in proc.stdout, proc.stdout
    assert (tmp_path / "runs" / "tiny" / "results.json").is_file()
    assert not (tmp_path / "runs" / "mlruns").exists() and not (tmp_path / "runs" / "tiny" / "tensorboard").exists()
    assert not (tmp_path / "runs" / "tiny" / "logs" / "tracking.json").exists()


@pytest.mark.parametrize("command", ["run", "finetune", "distill"])
def test_every_command_that_runs_a_recipe_takes_track(tmp_path: Path, command: str) -> None:
    result = cli([command, "--help"], cwd=tmp_path)
    assert result.returncode == 0 and "--track" in result.stdout, result.output


def test_a_tracking_place_that_is_a_file_stops_the_run_before_its_dir_is_made(tmp_path: Path) -> None:
    """The MLflow file store or TensorBoard folder is a file: refused by validate and by run before the
    run dir is claimed (it was refused once claimed, and the next run was told to --resume)."""
    recipe = _recipe(tmp_path)
    (tmp_path / "taken").write_text("not a folder", encoding="utf-8")
    for key in ("tracking.mlflow", "tracking.tensorboard"):
        assert_bad_input(cli(["validate", recipe, f"{key}={tmp_path / 'taken'}"], cwd=tmp_path),
                         f"{key}: {tmp_path / 'taken'}: is a file")
    result = cli(["run", recipe, f"tracking.mlflow={tmp_path / 'taken' / 'mlruns'}"], cwd=tmp_path)
    assert_bad_input(result, "tracking.mlflow:", "is a file, so the MLflow file store")
    assert not (tmp_path / "runs").exists()
