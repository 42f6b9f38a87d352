"""A command stopped by SIGTERM outside training (measuring, a runtime step, a report) died with
the signal's default: exit -15 and not a word. Now it stops as Ctrl-C does (atomic writes clean up)
and says so, exit 143; Ctrl-C says the same, exit 130."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

# Ctrl-C as at a terminal: a process started in the background (CI's runner) inherits SIGINT ignored
BUSY = ("import importlib, signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "a = importlib.import_module('tinyplm.cli.app')\n"
        "a.app = lambda: (print('ready', flush=True), time.sleep(60))\na.main()\n")


@pytest.mark.parametrize(("sent", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_a_signal_outside_training_is_said_and_exits_as_the_shell_expects(sent: int, code: int, name: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        proc.send_signal(sent)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert f"interrupted ({name}): what was written is kept (run, finetune, distill, pretrain and sweep" in err


def test_main_called_in_process_gives_the_callers_handler_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Called in-process (the tests' CLI helper, a notebook), main left its SIGTERM handler behind:
    a later training in the same process found another handler than the one it had replaced."""
    import importlib

    app_module = importlib.import_module("tinyplm.cli.app")
    monkeypatch.setattr(app_module, "app", lambda: None)
    before = signal.getsignal(signal.SIGTERM)
    app_module.main()
    assert signal.getsignal(signal.SIGTERM) is before
