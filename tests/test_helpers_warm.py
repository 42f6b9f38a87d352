"""The tests' warm launcher (helpers_warm.py) gives what a cold ``subprocess`` launch gives: the
same output, exit status, working directory, environment and argv, and a pid of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import helpers_warm as warm

SCRIPT = """
import json, os, sys
data = sys.stdin.read()
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("WARM_PROBE"), "stdin": data,
                  "pid": os.getpid(), "main": __name__}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def _cold_and_warm(script: Path, cwd: Path, code: int) -> tuple[subprocess.CompletedProcess, ...]:
    env = {**os.environ, "WARM_PROBE": "yes"}
    cmd = [sys.executable, str(script), str(code), "two words"]
    cold = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, input="in\n", timeout=120)
    hot = warm.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, input="in\n", timeout=120)
    return cold, hot


@pytest.mark.parametrize("code", [0, 3])
def test_a_warm_launch_is_what_a_cold_one_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    monkeypatch.delenv(warm.COLD, raising=False)
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "here").mkdir()
    cold, hot = _cold_and_warm(script, tmp_path / "here", code)
    assert (hot.returncode, hot.stderr) == (cold.returncode, cold.stderr) == (code, "to stderr\n")
    a, b = json.loads(cold.stdout), json.loads(hot.stdout)
    assert b["pid"] not in (a["pid"], os.getpid())
    assert {k: v for k, v in b.items() if k != "pid"} == {k: v for k, v in a.items() if k != "pid"}
    assert b["argv"] == [str(code), "two words"] and b["stdin"] == "in\n" and b["main"] == "__main__"


def test_a_signal_is_a_negative_status_and_a_cli_error_its_exit_code(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm.COLD, raising=False)
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n", encoding="utf-8")
    proc = warm.popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert isinstance(proc, warm.WarmProcess)
    assert proc.stdout.readline() == "up\n" and proc.poll() is None
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL and time.monotonic() - started < 30
    proc.stdout.close()
    refused = warm.run([sys.executable, "-m", "tinyplm.cli", "validate", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "none.yaml: recipe file not found" in refused.stderr


def test_an_ended_child_keeps_its_pid_until_its_status_is_read(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """As a ``Popen`` child stays a zombie until ``wait``: a kill sent after it ended but before
    the test read its status is not an error (it was, while the launcher reaped at once)."""
    monkeypatch.delenv(warm.COLD, raising=False)
    script = tmp_path / "quick.py"
    script.write_text("pass\n", encoding="utf-8")
    proc = warm.popen([sys.executable, str(script)])
    deadline = time.monotonic() + 60
    while proc.pid not in proc._launcher.exits:  # ended, and the launcher said so
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)  # the zombie: no ProcessLookupError
    assert proc.wait(30) == 0
    while time.monotonic() < deadline:  # reaped once read
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError(f"pid {proc.pid} was never reaped")


def test_cold_launches_when_asked_or_for_commands_it_does_not_know(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm.COLD, raising=False)
    for cmd in (["true"], [sys.executable, "-c", "pass"]):  # not a module or script of this interpreter
        proc = warm.popen(cmd)
        assert isinstance(proc, subprocess.Popen) and proc.wait(60) == 0
    script = tmp_path / "ok.py"
    script.write_text("pass\n", encoding="utf-8")
    monkeypatch.setenv(warm.COLD, "1")
    proc = warm.popen([sys.executable, str(script)])
    assert isinstance(proc, subprocess.Popen) and proc.wait(60) == 0
