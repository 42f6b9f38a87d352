"""Opening a run's tracking: is its package there, where does it go, which run does it continue.

``check_available(spec)`` and ``check_places(spec, run_dir)`` run before any work (no import of
mlflow or tensorboardX when tracking is off). ``open_tracker`` opens the backends once the run dir
is claimed, logs the parameters and keeps where the run went in ``RUN_DIR/logs/tracking.json``, so
a ``--resume`` continues the same MLflow run (and a resume that turns tracking on first sends the
curves already in ``logs/train.jsonl``).

Default places (``true``): MLflow at ``$MLFLOW_TRACKING_URI`` when that is set, else the local file
store ``mlruns/`` beside the run dir (``runs/tiny`` -> ``runs/mlruns``, shared by every run under
``runs/``); TensorBoard in ``RUN_DIR/tensorboard``. A value without a scheme is a folder, taken
relative to the working directory.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from importlib import import_module
from pathlib import Path

from tinyplm.config.tracking import TrackingSpec
from tinyplm.files import check_creatable, write_json_atomic
from tinyplm.track.base import Backend, RunStatus, TrackingError
from tinyplm.track.points import Point, event_points
from tinyplm.track.tracker import Tracker

#: recipe key -> (module imported, package to install)
PACKAGES = {"mlflow": ("mlflow", "mlflow-skinny"), "tensorboard": ("tensorboardX", "tensorboardX")}
TRACKING_FILE = Path("logs") / "tracking.json"
EXTRA = "pip install 'tinyplm[track]' (in a checkout: pip install -e '.[track]')"


def _asked(spec: TrackingSpec) -> list[str]:
    return [key for key in PACKAGES if getattr(spec, key)]


def check_available(spec: TrackingSpec) -> None:
    """Raise ``TrackingError`` naming the recipe key (and ``--track`` for MLflow) and the install
    command when a backend the recipe turns on cannot be imported; import nothing when none is on."""
    for key in _asked(spec):
        module, package = PACKAGES[key]
        try:
            import_module(module)
        except ImportError as exc:
            flag = " (or --track)" if key == "mlflow" else ""
            raise TrackingError(f"tracking.{key}{flag}: needs the {module} package, which cannot be imported "
                                f"({exc}); install it with: pip install '{package}', or {EXTRA}") from None


def check_places(spec: TrackingSpec, run_dir: Path) -> None:
    """Raise a ``TinyplmError`` naming the recipe key when a place ``spec`` sends the run in
    ``run_dir`` to cannot be used, before the run dir is claimed: an MLflow file store or a
    TensorBoard folder that is a file or under one, or where nothing can be made (nothing is made
    here), and an MLflow server that does not answer or a store MLflow cannot open
    (:func:`mlflow_problem`). A database store, which opening would make, is opened with the run."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    if spec.mlflow:
        uri = mlflow_uri(spec.mlflow, run_dir)
        try:
            parts = urlsplit(uri)
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError as exc:
            raise TrackingError(f"tracking.mlflow: {uri!r} is not a URI that can be read ({exc}); give e.g. "
                                "http://host:5000, file:/path, sqlite:///path.db or a folder") from None
        scheme = parts.scheme
        if scheme == "file":
            check_creatable(Path(url2pathname(parts.path)), "MLflow file store", flag="tracking.mlflow")
        elif scheme.split("+")[0] not in DATABASES and uri not in _ANSWERED:  # a server, or a scheme MLflow lacks
            if (problem := mlflow_problem(uri)) is not None:
                raise TrackingError(f"tracking.mlflow: {problem}")
            _ANSWERED.add(uri)
    if spec.tensorboard:
        check_creatable(tensorboard_dir(spec.tensorboard, run_dir), "TensorBoard folder", flag="tracking.tensorboard")


SQLITE = "sqlite:///"
#: Stores of a database, which opening would make or migrate: opened with the run, never probed before.
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")


def mlflow_uri(value: bool | str, run_dir: Path) -> str:
    """The tracking URI ``tracking.mlflow`` names for a run in ``run_dir`` (see the module docstring),
    with a store in a local folder or file made absolute: a plain folder (in the recipe or in
    ``$MLFLOW_TRACKING_URI``), a relative ``file:`` or ``sqlite:///`` path. The URI is kept in
    ``logs/tracking.json``, so a ``--resume`` from another folder finds the same store."""
    if value is True:
        env = os.environ.get("MLFLOW_TRACKING_URI")
        text = env or (Path(run_dir).resolve().parent / "mlruns").as_uri()
    else:
        text = str(value)
    if ":" not in text and text != "databricks":
        return Path(text).resolve().as_uri()
    if text.startswith("file:") and not text.startswith("file:/"):
        return Path(text[len("file:"):]).resolve().as_uri()
    rest = text[len(SQLITE):] if text.startswith(SQLITE) else None
    if rest and rest != ":memory:" and not rest.startswith("/"):
        return SQLITE + str(Path(rest).resolve())
    return text



#: MLflow servers that answered this process's check: a sweep's preflight of each distinct trial
#: asks once per server, not once per trial.
_ANSWERED: set[str] = set()

#: Seconds the first contact with an MLflow store may take (MLflow itself retries an HTTP server
#: that does not answer for minutes).
PROBE_SECONDS = 5.0


def mlflow_problem(uri: str, timeout: float = PROBE_SECONDS) -> str | None:
    """Why the MLflow store at ``uri`` cannot be used, in one line (None when it answers): an
    HTTP server is given ``timeout`` seconds to accept a connection and answer one request, with no
    retries; a folder or other store is opened as a run would open it."""
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.scheme in ("http", "https") and not _proxied(parts.scheme, parts.hostname or ""):
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
                pass
        except (OSError, ValueError) as exc:
            why = f"no answer in {timeout:g} s" if isinstance(exc, TimeoutError) else (
                getattr(exc, "strerror", None) or str(exc))
            return f"nothing answers at {uri} ({str(why).lower()})"
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    bounded = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(timeout)))}
    before = {k: os.environ.get(k) for k in bounded}
    os.environ.update(bounded)
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as exc:  # whatever the store raises: its first line says why
        text = str(exc).strip()
        return f"cannot open {uri} ({text.splitlines()[0] if text else type(exc).__name__})"
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return None


def _proxied(scheme: str, host: str) -> bool:
    """Whether requests to ``host`` go through a proxy (``HTTP(S)_PROXY``): then only the proxy can
    be reached by a plain connection, and MLflow's own bounded request is the check."""
    from urllib.request import getproxies, proxy_bypass

    return scheme in getproxies() and not proxy_bypass(host)


def tensorboard_dir(value: bool | str, run_dir: Path) -> Path:
    """The folder ``tracking.tensorboard`` names for a run in ``run_dir``."""
    return Path(run_dir) / "tensorboard" if value is True else Path(str(value))


def open_tracker(spec: TrackingSpec, run_dir: Path, *, run_name: str, params: Mapping[str, str],
                 resume: bool = False, parent_run_id: str | None = None) -> Tracker:
    """Open the backends ``spec`` turns on for the run in ``run_dir`` and log ``params`` to them.

    A new MLflow run is named ``run_name`` and, with ``parent_run_id``, made a child of that run
    (a sweep's trials); with ``resume`` the MLflow run this run dir started is reopened when it is in
    the same store, and a store or folder the run was not sent to before (tracking turned on, or moved)
    is first sent the curves already in ``logs/train.jsonl``. Raises ``TrackingError`` naming the
    recipe key when a store cannot be opened.
    """
    run_dir = Path(run_dir)
    stored = _stored(run_dir) if resume else {}
    backends: list[Backend] = []
    try:
        for key in _asked(spec):
            backends.append(_open(key, spec, run_dir, run_name, stored, parent_run_id))
            try:
                backends[-1].log_params(params)
                if resume and backends[-1].info != stored.get(key):  # a store that has not seen the curves
                    backends[-1].log_points(_logged_points(run_dir / "logs" / "train.jsonl"))  # written before
            except Exception as exc:
                raise TrackingError(f"tracking.{key}: cannot log to {backends[-1].info} ({exc})") from exc
    except TrackingError:
        Tracker(backends).close(RunStatus.FAILED)
        raise
    tracker = Tracker(backends)
    write_json_atomic(run_dir / TRACKING_FILE, tracker.info)
    return tracker


def _open(key: str, spec: TrackingSpec, run_dir: Path, run_name: str, stored: dict,
          parent_run_id: str | None) -> Backend:
    """One backend, its errors as ``TrackingError`` naming the key and the place."""
    place = ""
    try:
        if key == "mlflow":
            from tinyplm.track.mlflow_backend import MlflowBackend

            place = mlflow_uri(spec.mlflow, run_dir)
            problem = mlflow_problem(place)
            if problem is not None:
                raise TrackingError(f"tracking.mlflow: {problem}")
            earlier = stored.get("mlflow", {})
            stored_uri = earlier.get("tracking_uri")  # kept relative by runs tracked before stores were made absolute
            if isinstance(stored_uri, str) and mlflow_uri(stored_uri, run_dir) == place and earlier.get("run_id"):
                return MlflowBackend(place, spec.experiment, run_name, run_id=earlier["run_id"])
            return MlflowBackend(place, spec.experiment, run_name, parent_run_id=parent_run_id)
        from tinyplm.track.tensorboard_backend import TensorBoardBackend

        place = str(tensorboard_dir(spec.tensorboard, run_dir))
        return TensorBoardBackend(Path(place))
    except TrackingError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TrackingError(f"tracking.{key}: cannot open {place or key} ({first})") from exc


def _stored(run_dir: Path) -> dict:
    """Where an earlier attempt of this run was tracked (``logs/tracking.json``), else {}."""
    try:
        data = json.loads((run_dir / TRACKING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _logged_points(log_path: Path) -> list[Point]:
    """The curve points of every whole record in a ``train.jsonl`` (a line cut by a kill is skipped)."""
    if not log_path.is_file():
        return []
    points: list[Point] = []
    for line in log_path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            points.extend(event_points(event))
    return points
