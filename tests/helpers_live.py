"""A live ``tinyplm serve`` process for tests: started on a free loopback port, its stderr kept."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

import helpers_warm as warm


class LiveServer:
    """``tinyplm serve MODEL ARGS --port 0`` as a subprocess (a context manager: stopped with SIGTERM
    on exit); ``url`` once listening, ``lines`` every line it wrote to stderr."""

    def __init__(self, model: Path, *args: str, env: dict | None = None) -> None:
        cmd = [sys.executable, "-m", "tinyplm.cli", "serve", str(model), "--port", "0", "--threads", "1", *args]
        self.proc = warm.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
        self.lines: list[str] = []
        self.url = ""
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            found = re.search(r"listening on (http://\S+?)(?: |$)", line)
            if found:
                self.url = found.group(1)
                self._listening.set()

    def wait_ready(self, headers: dict | None = None, timeout: float = 120) -> LiveServer:
        """Wait until ``/ready`` answers 200; raises ``AssertionError`` with the server's output."""
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the server did not start:\n" + self.output())
        while time.monotonic() < deadline:
            if httpx.get(self.url + "/ready", headers=headers, timeout=10).status_code == 200:
                return self
            time.sleep(0.1)
        raise AssertionError("the server never became ready:\n" + self.output())

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then wait for the exit code (and the last lines of its output)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(5)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
