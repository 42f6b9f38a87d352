"""Observers of the training loop: a rich progress bar and the JSONL log. They own no logic."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

#: Called with each record written to a log file (see :func:`observe_log`).
LogObserver = Callable[[dict[str, Any]], None]
_observers: dict[Path, list[LogObserver]] = {}


@contextmanager
def observe_log(path: Path, observer: LogObserver) -> Iterator[None]:
    """Within the block, call ``observer(record)`` after each record any :class:`JsonlLog` of
    this process writes to ``path`` (the run's tracker reads ``logs/train.jsonl`` so). Observers
    only read: what they raise is theirs to handle."""
    key = Path(path).resolve()
    _observers.setdefault(key, []).append(observer)
    try:
        yield
    finally:
        _observers[key].remove(observer)
        if not _observers[key]:
            del _observers[key]


class JsonlLog:
    """Appends one JSON object per line to ``path`` (flushed each write) when enabled and given;
    each record also goes to the path's observers (:func:`observe_log`)."""

    def __init__(self, path: Path | None, stage: str, enabled: bool = True) -> None:
        self.path, self.stage, self.enabled = Path(path) if path else None, stage, enabled and path is not None
        if self.enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, **record: Any) -> None:
        if not self.enabled:
            return
        entry = {"stage": self.stage, "time": round(time.time(), 3), **record}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
        if _observers:
            for observer in list(_observers.get(self.path.resolve(), ())):
                observer(entry)


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
