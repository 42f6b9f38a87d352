"""Observers of the training loop: a rich progress bar and the JSONL log. They own no logic."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
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
    """Appends one JSON object per line to ``path`` (flushed each write) when enabled and given."""

    def __init__(self, path: Path | None, stage: str, enabled: bool = True) -> None:
        self.path, self.stage, self.enabled = Path(path) if path else None, stage, enabled and path is not None
        if self.enabled:
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


@dataclass
class Meter:
    """Running loss and training-only examples/s between two log lines."""

    loss: float = 0.0
    n: int = 0
    examples: int = 0
    seconds: float = 0.0

    def add(self, loss: float, examples: int, seconds: float) -> None:
        self.loss, self.n = self.loss + loss, self.n + 1
        self.examples, self.seconds = self.examples + examples, self.seconds + seconds

    def pop(self) -> tuple[float, float]:
        """(mean loss, examples/s) since the last pop; resets."""
        out = (self.loss / max(1, self.n), self.examples / max(1e-9, self.seconds))
        self.loss, self.n, self.examples, self.seconds = 0.0, 0, 0, 0.0
        return out
