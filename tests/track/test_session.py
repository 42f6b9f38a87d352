"""Opening tracking: packages checked first, default places, parent runs, resumed runs, and a store
that fails mid-run leaving the run alone."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest

from helpers_track import mlflow_client, tensorboard_scalars, tracking_info
from tinyplm.config import TrackingSpec
from tinyplm.track import (
    RunStatus,
    Tracker,
    TrackingError,
    check_available,
    check_places,
    mlflow_uri,
    open_tracker,
    tensorboard_dir,
)

PARAMS = {"name": "t", "teacher.finetune.lr": "3e-05"}


def test_nothing_is_imported_or_checked_when_tracking_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import tinyplm.track.session as session

    monkeypatch.setitem(sys.modules, "mlflow", None)  # importing it would fail
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    tried: list[str] = []
    monkeypatch.setattr(session, "import_module", tried.append)
    assert check_available(TrackingSpec()) is None
    assert tried == []  # not even looked for
    check_available(TrackingSpec(tensorboard=True))
    assert tried == ["tensorboardX"]  # the same check does look once a backend is on


@pytest.mark.parametrize(("spec", "fragments"), [
    (TrackingSpec(mlflow=True), ("tracking.mlflow (or --track)", "pip install 'mlflow-skinny'", "tinyplm[track]")),
    (TrackingSpec(tensorboard=True), ("tracking.tensorboard", "pip install 'tensorboardX'")),
])
def test_a_backend_asked_for_and_not_installed_names_the_key_and_the_install(
        monkeypatch: pytest.MonkeyPatch, spec: TrackingSpec, fragments: tuple[str, ...]) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(TrackingError) as caught:
        check_available(spec)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_default_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "runs" / "tiny"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert mlflow_uri(True, run_dir) == (tmp_path / "runs" / "mlruns").as_uri()  # beside the run dir
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert mlflow_uri(True, run_dir) == "http://127.0.0.1:5000"  # MLflow's own variable wins for `true`
    monkeypatch.chdir(tmp_path)
    assert mlflow_uri("store", run_dir) == (tmp_path / "store").as_uri()  # a folder: a file store
    # a store in a local folder or file is kept absolute: a --resume from elsewhere finds it again
    assert mlflow_uri("sqlite:///x.db", run_dir) == f"sqlite:///{tmp_path / 'x.db'}"
    assert mlflow_uri(f"sqlite:///{tmp_path / 'y.db'}", run_dir) == f"sqlite:///{tmp_path / 'y.db'}"
    assert mlflow_uri("file:rel", run_dir) == (tmp_path / "rel").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "envrel")  # a plain folder in the environment, as in the recipe
    assert mlflow_uri(True, run_dir) == (tmp_path / "envrel").as_uri()
    assert tensorboard_dir(True, run_dir) == run_dir / "tensorboard"
    assert tensorboard_dir("tb", run_dir) == Path("tb")


def test_a_child_run_and_a_resumed_run_stay_one_mlflow_run(tmp_path: Path) -> None:
    spec, run_dir = TrackingSpec(mlflow=str(tmp_path / "mlruns"), experiment="sweep"), tmp_path / "runs" / "a"
    parent = open_tracker(spec, tmp_path / "runs" / "sweep", run_name="sweep", params={})
    parent_id = parent.info["mlflow"]["run_id"]
    child = open_tracker(spec, run_dir, run_name="a", params=PARAMS, parent_run_id=parent_id)
    child_id = child.info["mlflow"]["run_id"]
    child.close(RunStatus.KILLED)
    again = open_tracker(spec, run_dir, run_name="a", params=PARAMS, resume=True)
    assert again.info["mlflow"]["run_id"] == child_id == tracking_info(run_dir)["mlflow"]["run_id"]
    again.close(RunStatus.FINISHED)
    parent.close(RunStatus.FINISHED)
    client = mlflow_client(mlflow_uri(spec.mlflow, run_dir))
    run = client.get_run(child_id)
    assert run.data.tags["mlflow.parentRunId"] == parent_id and run.info.status == "FINISHED"
    assert run.data.params == PARAMS
    fresh = open_tracker(spec, run_dir, run_name="a", params=PARAMS)  # not a resume: a new run
    assert fresh.info["mlflow"]["run_id"] != child_id
    fresh.close(RunStatus.FINISHED)
    assert client.get_experiment_by_name("sweep") is not None


def test_a_missing_parent_run_fails_before_the_run_naming_the_key(tmp_path: Path) -> None:
    spec = TrackingSpec(mlflow=str(tmp_path / "mlruns"))
    with pytest.raises(TrackingError, match="tracking.mlflow: cannot open"):
        open_tracker(spec, tmp_path / "run", run_name="a", params={}, parent_run_id="0" * 32)


def test_a_resume_that_turns_tracking_on_sends_the_curves_logged_before(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    lines = [{"stage": "teacher", "time": 1.0, "event": "train", "step": s, "loss": 1.0 / s, "lr": 0.1}
             for s in (1, 2, 3)]
    (run_dir / "logs" / "train.jsonl").write_text("\n".join(map(json.dumps, lines)) + '\n{"stage": "teach')
    spec = TrackingSpec(mlflow=str(tmp_path / "mlruns"), tensorboard=True)
    tracker = open_tracker(spec, run_dir, run_name="a", params=PARAMS, resume=True)
    tracker.close(RunStatus.FINISHED)
    history = mlflow_client(mlflow_uri(spec.mlflow, run_dir)).get_metric_history(
        tracking_info(run_dir)["mlflow"]["run_id"], "teacher/train/loss")
    assert [m.step for m in history] == [1, 2, 3]
    assert [s for s, _ in tensorboard_scalars(run_dir / "tensorboard")["teacher/train/loss"]] == [1, 2, 3]


def test_a_resume_sent_to_another_store_sends_it_the_curves_logged_before(tmp_path: Path) -> None:
    """The first attempt went to one MLflow store, the resume to another: the new store's run gets the
    curves written before (it got only those after the resume); the same store's run is not sent them
    twice."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    lines = [{"stage": "teacher", "time": 1.0, "event": "train", "step": s, "loss": 1.0 / s, "lr": 0.1}
             for s in (1, 2)]
    (run_dir / "logs" / "train.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    first = TrackingSpec(mlflow=str(tmp_path / "first"))
    tracker = open_tracker(first, run_dir, run_name="a", params=PARAMS)
    for line in lines:  # the first attempt saw them as they were written
        tracker.on_event(line)
    tracker.close(RunStatus.KILLED)
    for spec in (first, TrackingSpec(mlflow=str(tmp_path / "second"))):
        again = open_tracker(spec, run_dir, run_name="a", params=PARAMS, resume=True)
        again.close(RunStatus.FINISHED)
        history = mlflow_client(mlflow_uri(spec.mlflow, run_dir)).get_metric_history(
            tracking_info(run_dir)["mlflow"]["run_id"], "teacher/train/loss")
        assert [m.step for m in history] == [1, 2], spec.mlflow


class _Broken:
    name = "broken"
    info: dict[str, str] = {}

    def __init__(self) -> None:
        self.closed: list[RunStatus] = []

    def log_points(self, points) -> None:
        raise ConnectionError("server went away")

    def close(self, status: RunStatus) -> None:
        self.closed.append(status)


def test_a_store_failing_mid_run_is_reported_once_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    broken = _Broken()
    tracker = Tracker([broken])
    event = {"stage": "teacher", "time": 1.0, "event": "train", "step": 1, "loss": 0.5}
    with caplog.at_level(logging.WARNING, logger="tinyplm.track"):
        tracker.on_event(event)
        tracker.on_event(event)
    assert [r.getMessage() for r in caplog.records] == [
        "tracking: broken failed (ConnectionError: server went away); the run goes on without it"]
    assert not tracker.enabled
    tracker.close(RunStatus.FINISHED)
    assert broken.closed == [RunStatus.FAILED]


def test_tensorboard_gets_scalars_and_the_recipe(tmp_path: Path) -> None:
    tracker = open_tracker(TrackingSpec(tensorboard=str(tmp_path / "tb")), tmp_path / "run", run_name="a",
                           params=PARAMS)
    for step in (1, 2):
        tracker.on_event({"stage": "s", "time": 1.0, "event": "eval", "step": step, "metrics": {"f1": step / 4}})
    tracker.close(RunStatus.FINISHED)
    assert tensorboard_scalars(tmp_path / "tb") == {"s/dev/f1": [(1, 0.25), (2, 0.5)]}
    assert tracking_info(tmp_path / "run") == {"tensorboard": {"log_dir": str(tmp_path / "tb")}}


def test_an_mlflow_server_that_does_not_answer_is_refused_in_seconds(tmp_path: Path) -> None:
    """MLflow itself retries a server where nothing listens for minutes; the first contact is
    bounded, and what went wrong named with the key."""
    import time

    started = time.monotonic()
    with pytest.raises(TrackingError, match=r"tracking.mlflow: nothing answers at http://127.0.0.1:1 \("):
        open_tracker(TrackingSpec(mlflow="http://127.0.0.1:1"), tmp_path / "run", run_name="r", params=PARAMS)
    assert time.monotonic() - started < 30
    (tmp_path / "afile").write_text("x")
    under_a_file = (tmp_path / "afile" / "mlruns").as_uri()
    with pytest.raises(TrackingError, match=rf"tracking.mlflow: cannot open {under_a_file} \("):
        open_tracker(TrackingSpec(mlflow=under_a_file), tmp_path / "run", run_name="r", params=PARAMS)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("value", "said"), [
    ("https://[::1", "'https://[::1' is not a URI that can be read (Invalid IPv6 URL)"),
    ("http://localhost:notaport", "'http://localhost:notaport' is not a URI that can be read"),
])
def test_a_tracking_uri_that_cannot_be_read_is_named(tmp_path: Path, value: str, said: str) -> None:
    """A malformed URI was a ValueError traceback from validate and run."""
    with pytest.raises(TrackingError, match=re.escape(f"tracking.mlflow: {said}")):
        check_places(TrackingSpec(mlflow=value), tmp_path / "run")


def test_a_store_mlflow_cannot_open_is_refused_before_the_run_dir_is_claimed(tmp_path: Path) -> None:
    """A scheme MLflow has no store for was refused when the run opened its tracking, after the run
    dir was claimed: the corrected command was then refused as a run left unfinished."""
    with pytest.raises(TrackingError, match=r"tracking.mlflow: cannot open my:store \("):
        check_places(TrackingSpec(mlflow="my:store"), tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_stops_answering_costs_a_bounded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own limits (120 s a request, seven tries with growing waits) held a run's training
    loop for minutes at each call to a server that had stopped answering; the backend bounds them
    unless the environment sets them (here made short, to keep the test quick)."""
    import socket
    import time

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    import tinyplm.track.mlflow_backend as backend

    monkeypatch.setattr(backend, "REQUEST_LIMITS", {"MLFLOW_HTTP_REQUEST_TIMEOUT": "1",
                                                    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1"})
    for key in backend.REQUEST_LIMITS:
        monkeypatch.delenv(key, raising=False)
    backend.bound_requests()
    with socket.socket() as silent:  # takes connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        start = time.monotonic()
        with pytest.raises(Exception, match="timed out|Max retries"):
            MlflowClient(f"http://127.0.0.1:{silent.getsockname()[1]}").log_batch("r", metrics=[Metric("m", 1.0, 0, 0)])
        assert time.monotonic() - start < 15
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "77")
    backend.bound_requests()
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "77"  # the user's own setting is kept


def test_places_are_checked_without_making_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyplm.errors import TinyplmError

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # mlflow: true is the folder beside the run

    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    with pytest.raises(TinyplmError, match="tracking.mlflow: .*taken: is a file"):
        check_places(TrackingSpec(mlflow=str(tmp_path / "taken")), tmp_path / "run")
    with pytest.raises(TinyplmError, match="tracking.tensorboard: .*taken: is a file"):
        check_places(TrackingSpec(tensorboard=str(tmp_path / "taken")), tmp_path / "run")
    check_places(TrackingSpec(mlflow=True, tensorboard=True), tmp_path / "runs" / "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_a_sqlite_store_keeps_its_runs_files_beside_the_database(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's default for a database store is ./mlruns of the working directory: a run started in
    another folder left its model and plots there."""
    from tinyplm.track.mlflow_backend import MlflowBackend
    from tinyplm.track.points import Artifact

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    backend = MlflowBackend(uri, "exp", "a")
    (tmp_path / "summary.md").write_text("# a run", encoding="utf-8")
    backend.log_artifacts([Artifact(tmp_path / "summary.md", "summary.md")])
    backend.close(RunStatus.FINISHED)
    assert list(elsewhere.iterdir()) == []
    assert list((tmp_path / "store" / "mlartifacts").rglob("summary.md"))


def test_a_server_is_asked_once_per_process_and_a_proxied_one_through_its_proxy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's preflight of each distinct trial contacted the server once per trial (seconds each
    against a slow one); a server reached through HTTP(S)_PROXY was refused, its plain connection
    tried directly."""
    import socket

    import tinyplm.track.session as session

    asked = []
    monkeypatch.setattr(session, "mlflow_problem", lambda uri, timeout=5.0: asked.append(uri))
    for trial in ("a", "b", "c"):
        check_places(TrackingSpec(mlflow="http://mlflow.example:5000"), tmp_path / trial)
    assert asked == ["http://mlflow.example:5000"]
    monkeypatch.undo()

    def no_direct_connection(*args, **kwargs):
        raise AssertionError("a proxied server was connected to directly")

    monkeypatch.setattr(socket, "create_connection", no_direct_connection)
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # a proxy that refuses: MLflow's request says so
    problem = session.mlflow_problem("http://mlflow.example:5000", timeout=2)
    assert problem is not None and problem.startswith("cannot open http://mlflow.example:5000 (")


def test_a_resume_spelling_its_run_dir_otherwise_does_not_send_tensorboard_the_curves_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt ran with a relative --out, the resume with the absolute path: the same
    TensorBoard folder read as another one and got every point logged before a second time."""
    monkeypatch.chdir(tmp_path)
    run_dir = Path("run")
    (run_dir / "logs").mkdir(parents=True)
    lines = [{"stage": "teacher", "time": 1.0, "event": "train", "step": s, "loss": 1.0 / s, "lr": 0.1}
             for s in (1, 2)]
    (run_dir / "logs" / "train.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    tracker = open_tracker(TrackingSpec(tensorboard=True), run_dir, run_name="a", params=PARAMS)
    for line in lines:
        tracker.on_event(line)
    tracker.close(RunStatus.KILLED)
    import tinyplm.track.session as session

    resent = []
    monkeypatch.setattr(session, "_logged_points", lambda path: resent.append(path) or [])
    again = open_tracker(TrackingSpec(tensorboard=True), tmp_path / "run", run_name="a", params=PARAMS, resume=True)
    again.close(RunStatus.FINISHED)
    assert resent == []
    again = open_tracker(TrackingSpec(tensorboard=str(tmp_path / "elsewhere")), run_dir, run_name="a", params=PARAMS,
                         resume=True)  # another folder is still sent them
    again.close(RunStatus.FINISHED)
    assert len(resent) == 1


def test_a_run_tracked_with_a_relative_store_is_resumed_in_the_same_mlflow_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local stores are now kept absolute in logs/tracking.json; a run whose file says the relative
    form it was given (tracked before that) is still resumed in its MLflow run, not a new one."""
    import json

    monkeypatch.chdir(tmp_path)
    spec, run_dir = TrackingSpec(mlflow="file:mlruns"), tmp_path / "runs" / "a"
    first = open_tracker(spec, run_dir, run_name="a", params=PARAMS)
    run_id = first.info["mlflow"]["run_id"]
    first.close(RunStatus.KILLED)
    assert tracking_info(run_dir)["mlflow"]["tracking_uri"] == (tmp_path / "mlruns").as_uri()
    stored = run_dir / "logs" / "tracking.json"
    stored.write_text(json.dumps({"mlflow": {"tracking_uri": "file:mlruns", "run_id": run_id}}))
    again = open_tracker(spec, run_dir, run_name="a", params=PARAMS, resume=True)
    assert again.info["mlflow"]["run_id"] == run_id
    again.close(RunStatus.FINISHED)
