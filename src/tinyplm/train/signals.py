"""Stop training cleanly on SIGINT/SIGTERM: the handler only sets a flag (it owns no logic); the
loop sees it after the current step, writes a checkpoint and raises ``errors.Interrupted``.

A process may also set a wall-clock deadline (:func:`deadline`, a sweep trial's budget): past it,
the flag reads as SIGALRM and training stops the same way."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_deadline: float | None = None  # time.monotonic() after which training stops (see deadline())


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """While active, training in this process stops (with a checkpoint, ``Interrupted`` for
    SIGALRM) at its first step after ``seconds`` from now; ``None``: no deadline."""
    global _deadline
    previous = _deadline
    _deadline = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline = previous


class StopFlag:
    """While active (a context manager), SIGINT and SIGTERM set :attr:`signum` instead of killing
    the process; the previous handlers come back on exit. Outside the main thread (where Python
    cannot install handlers) it does nothing and the signals act as before."""

    def __init__(self) -> None:
        self._signum: int | None = None
        self._previous: dict[int, object] = {}

    @property
    def signum(self) -> int | None:
        """The stop signal received, SIGALRM once a :func:`deadline` passed, else None."""
        if self._signum is None and _deadline is not None and time.monotonic() >= _deadline:
            return int(signal.SIGALRM)
        return self._signum

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._signum is not None and signum == signal.SIGINT:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self._signum = signum

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
