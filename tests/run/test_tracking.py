"""run.tracking.tracked: the MLflow run ends as the tinyplm run did, and records written to the run's
log inside the block are tracked."""

from __future__ import annotations

import signal
from contextlib import nullcontext
from pathlib import Path

import pytest

from helpers_track import mlflow_client, tracking_info
from tinyplm.config import validate_recipe
from tinyplm.errors import DataError, Interrupted
from tinyplm.run.inputs import RunPaths
from tinyplm.run.tracking import recipe_params, tracked
from tinyplm.train.progress import JsonlLog


@pytest.mark.parametrize(("error", "status"), [
    (None, "FINISHED"), (Interrupted(signal.SIGTERM, 3, None), "KILLED"), (DataError("bad row"), "FAILED")])
def test_the_tracked_run_ends_as_the_run_did(tmp_path: Path, error: Exception | None, status: str) -> None:
    cfg = validate_recipe({"name": "t", "tracking": {"mlflow": str(tmp_path / "mlruns")}})
    paths = RunPaths(tmp_path / "run")
    with pytest.raises(type(error)) if error else nullcontext():
        with tracked(cfg, paths, resumed=False):
            JsonlLog(paths.log, "teacher").write(event="train", step=5, loss=0.25, lr=1e-3)
            if error:
                raise error
    where = tracking_info(paths.root)["mlflow"]
    client = mlflow_client(where["tracking_uri"])
    run = client.get_run(where["run_id"])
    assert run.info.status == status
    assert run.data.metrics["teacher/train/loss"] == 0.25
    assert run.data.params == recipe_params(cfg) and run.data.params["name"] == "t"
