"""What the serve benchmarks (serve_load.py, serve_agreement.py) share: a real ``tinyplm serve``
subprocess (:class:`Server`) and a plain asyncio HTTP client that drives it (:func:`drive`).

Not a benchmark itself; imported as a sibling module (``from _serving import Server, drive``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- a server subprocess


class Server:
    """``tinyplm serve MODEL ARGS`` on a free loopback port; its stderr is kept (the port, the event
    loop and HTTP parser it runs, and the summary it prints when it stops). With ``api_key`` the
    server requires it (given as ``TINYPLM_API_KEY``, so it shows in no command line)."""

    def __init__(self, model: str, args: list[str], api_key: str | None = None) -> None:
        cmd = [sys.executable, "-m", "tinyplm.cli", "serve", model, "--port", "0", *args]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if api_key:
            env["TINYPLM_API_KEY"] = api_key
        self.api_key = api_key
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self.stack = ""  # e.g. "uvloop loop, httptools parser", from the startup line
        self.polls = 0  # answers to our own /ready polls (the server counts them too)
        self.signalled = False
        self._port = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            found = re.search(r"listening on (http://\S+?)(?: |$)", line)
            if found:
                self.url = found.group(1)
                stack = re.search(r"(\w+ loop, \w+ parser)", line)
                self.stack = stack.group(1) if stack else "asyncio loop, h11 parser (not printed)"
                self._port.set()

    def wait_ready(self, timeout: float = 300) -> None:
        """Wait for the port, then for ``/ready``; raises ``RuntimeError`` with the server's output."""
        if not self._port.wait(timeout):
            raise RuntimeError("the server did not start:\n" + "\n".join(self.lines[-20:]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
                status = httpx.get(self.url + "/ready", headers=headers, timeout=5).status_code
                self.polls += 1
                if status == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the server never became ready:\n" + "\n".join(self.lines[-20:]))

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def terminate(self) -> None:
        """Send SIGTERM once (a second one is not a graceful stop's business)."""
        if not self.signalled and self.proc.poll() is None:
            self.signalled = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 60) -> dict:
        """SIGTERM (unless sent already), wait; -> exit code and the summary the server printed."""
        self.terminate()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        time.sleep(0.1)  # the reader thread takes the last lines
        summary = next((json.loads(line.split("stopped: ", 1)[1]) for line in self.lines if "stopped: " in line), None)
        return {"exit_code": code, "summary": summary, "stack": self.stack}


# --------------------------------------------------------------------------- the load generator


@dataclass
class Record:
    """One request as the client saw it."""

    index: int
    status: int | None = None  # None: no answer (error or client timeout)
    error: str | None = None
    latency_s: float = 0.0
    timing: dict = field(default_factory=dict)  # Server-Timing durations, ms
    batch: int = 0
    label: str | None = None


def _timing(header: str) -> dict:
    out = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";dur=")
        if rest:
            out[name] = float(rest)
    return out


class Connection:
    """A keep-alive HTTP/1.1 connection that writes each request in one piece and reads
    ``Content-Length`` answers (all that ``tinyplm serve`` sends): a few dozen microseconds of CPU
    per request, where httpx spends milliseconds, which on a shared 2-core machine would come out of
    the server's share."""

    def __init__(self, host: str, port: int, api_key: str | None = None) -> None:
        self.host, self.port = host, port
        self.auth = f"authorization: Bearer {api_key}\r\n" if api_key else ""
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, dict, bytes]:
        """(status, lower-cased headers, body); raises ``OSError``/``asyncio.IncompleteReadError``."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n{self.auth}"
                f"content-length: {len(body)}\r\n\r\n").encode()
        try:
            self.writer.write(head + body)
            lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
            payload = await self.reader.readexactly(int(headers.get("content-length", 0)))
        except BaseException:
            self.close()
            raise
        if headers.get("connection") == "close":
            self.close()
        return int(lines[0].split()[1]), headers, payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def drive(url: str, texts: list[str], count: int, concurrency: int, timeout: float = 60.0,
                stop_at: int | None = None, on_stop=None, warm_up: int = 0, on_start=None,
                api_key: str | None = None) -> list[Record]:
    """``count`` POST /predict requests (text ``i`` cycling through ``texts``) from ``concurrency``
    clients, each on its own keep-alive connection, after ``warm_up`` untimed requests on the same
    connections (so no timed request pays for a new connection; ``on_start`` is called when the
    timed part begins); ``on_stop`` is called once
    ``stop_at`` requests have ended (the SIGTERM test); ``api_key`` is sent as a bearer token."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conns = [Connection(host, int(port), api_key) for _ in range(concurrency)]
    try:
        if warm_up:
            await _run(conns, texts, [Record(i) for i in range(warm_up)], timeout)
        if on_start is not None:
            on_start()
        return await _run(conns, texts, [Record(i) for i in range(count)], timeout, stop_at, on_stop)
    finally:
        for conn in conns:
            conn.close()


async def _run(conns: list[Connection], texts: list[str], records: list[Record], timeout: float,
               stop_at: int | None = None, on_stop=None) -> list[Record]:
    """``records`` sent by one worker per connection, each taking the next unsent one."""
    bodies = [json.dumps({"text": t}).encode() for t in texts]
    next_index, ended = 0, 0

    async def worker(conn: Connection) -> None:
        nonlocal next_index, ended
        while next_index < len(records):
            rec = records[next_index]
            next_index += 1
            start = time.perf_counter()
            try:
                body = bodies[rec.index % len(bodies)]
                status, headers, payload = await asyncio.wait_for(conn.post("/predict", body), timeout)
                rec.status, rec.batch = status, int(headers.get("x-batch-size", 0))
                rec.timing = _timing(headers.get("server-timing", ""))
                if status == 200:
                    rec.label = json.loads(payload)["prediction"].get("label")
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                rec.error = type(exc).__name__
            rec.latency_s = time.perf_counter() - start
            ended += 1
            if on_stop is not None and ended == stop_at:
                on_stop()

    await asyncio.gather(*(worker(conn) for conn in conns))
    return records
