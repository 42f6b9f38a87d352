"""Reading back what a tracked run wrote: MLflow runs through ``MlflowClient`` and TensorBoard
event files through their record format (tensorboardX's protobuf; no tensorboard package needed)."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def tracking_info(run_dir: Path) -> dict:
    """``RUN_DIR/logs/tracking.json``: where the run was tracked."""
    return json.loads((Path(run_dir) / "logs" / "tracking.json").read_text(encoding="utf-8"))


def mlflow_client(uri: str):
    """A client of the store at ``uri``; a file store is opted in as the tracking backend does
    (MLflow 3 refuses one unless MLFLOW_ALLOW_FILE_STORE is set)."""
    import os

    from mlflow.tracking import MlflowClient

    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

    return MlflowClient(tracking_uri=uri)


def tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``log_dir``: tag -> [(step, value), ...] in file order."""
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at + 12 <= len(data):  # uint64 length, uint32 crc, payload, uint32 crc
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out
