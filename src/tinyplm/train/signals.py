"""Stop training cleanly on SIGINT/SIGTERM: the handler only sets a flag (it owns no logic); the
loop sees it after the current step, writes a checkpoint and raises ``errors.Interrupted``."""

from __future__ import annotations

import signal
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopFlag:
    """While active (a context manager), SIGINT and SIGTERM set :attr:`signum` instead of killing
    the process; the previous handlers come back on exit. Outside the main thread (where Python
    cannot install handlers) it does nothing and the signals act as before."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self.signum = signum

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
