"""Observers of the training loop: a rich progress bar and the JSONL log. They own no logic."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class JsonlLog:
    """Appends one JSON object per line to ``path`` (flushed each write) when enabled."""

    def __init__(self, path: Path, stage: str, enabled: bool = True) -> None:
        self.path, self.stage, self.enabled = Path(path), stage, enabled
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, **record: Any) -> None:
        if not self.enabled:
            return
        line = json.dumps({"stage": self.stage, "time": round(time.time(), 3), **record})
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def make_progress(enabled: bool) -> Progress:
    """A progress bar showing steps, loss, examples/s, elapsed time and ETA (stderr)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TextColumn("{task.fields[eps]:.0f} ex/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=not enabled,
        transient=False,
    )
