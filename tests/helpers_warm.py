"""Launch ``python -m tinyplm.cli ...`` (or a script) as a new process without paying its imports.

A tinyplm command spends seconds importing torch and transformers before it reads its first
argument; the tests launch a few dozen real processes (runs killed and resumed, servers, the CLI
end to end), so those imports were a large share of the suite's time. Here a *warm launcher* (a
fork server, as ``multiprocessing``'s ``forkserver`` start method works) is started once per
pytest worker: a Python process that imports the heavy modules, runs nothing, and forks one child
per launch. Each child is a real, separate process: its own pid (a test can ``os.kill`` it and a
run dir's lock names it), the test's argv, working directory and environment, its stdin/stdout/
stderr where the test asked (pipes, files, ``/dev/null``), its exit status as the test sees from
:class:`subprocess.Popen` (negative for a signal); it runs the module as ``python -m`` does
(``runpy``, ``__main__``), atexit handlers included. What differs from a cold start: the imports
happened before the fork, in an interpreter started with the environment variables that are read
at import time (:data:`IMPORT_TIME_ENV`; a launch whose values differ gets a launcher of its own).

:func:`popen` and :func:`run` take :class:`subprocess.Popen`'s and :func:`subprocess.run`'s
arguments for the commands they know (``[sys.executable, "-m", MODULE, ...]`` or
``[sys.executable, SCRIPT.py, ...]``) and hand anything else to :mod:`subprocess`. Set
``TINYPLM_TEST_COLD=1`` to launch every process cold, as before (the fidelity check of this
module: the suite passes either way). Not a library feature, so it lives in the tests: tinyplm
itself never forks a warm interpreter.

Deliberately not ``multiprocessing``'s forkserver: it starts Python functions in workers it owns,
with its own pipes and exit codes; these tests need processes that look to them like ``Popen``'s.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: Variables some library reads once, at import (thread pools, offline switches): a launch whose
#: values differ from a launcher's is served by another launcher started with its values.
IMPORT_TIME_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME",
                   "HF_HUB_DISABLE_PROGRESS_BARS", "PYTHONHASHSEED", "PYTHONPATH", "TOKENIZERS_PARALLELISM")
#: What a launcher imports before it forks: everything a tinyplm command imports at start-up that
#: starts no thread (torch's thread pools, the tokenizers' and the runtimes' start at first use).
PRELOAD = ("torch", "transformers", "tinyplm.cli.app", "tinyplm.run.pipeline", "tinyplm.inference.predictor",
           "tinyplm.serve.server")
COLD = "TINYPLM_TEST_COLD"
_MAX_MESSAGE = 1 << 20


# --- the launcher process ------------------------------------------------------------------------

def _serve(sock: socket.socket) -> None:
    """The launcher's loop: fork a child per request and report each child's exit; a child stays a
    zombie (its pid taken, as a ``Popen`` child's is until ``wait``) until the test has read its
    status and asks to reap it. Ends, killing the children left, when the test process closes its end."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up fd hears SIGCHLD
    signal.set_wakeup_fd(wake_w)
    children: dict[int, bool] = {}  # pid -> its exit reported
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select(timeout=0.5):  # the timeout: a safety net for a lost wake-up
                if key.fileobj is not sock:
                    os.read(wake_r, 4096)
                    continue
                msg, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3)
                if not msg:
                    for pid in children:
                        _quiet_kill(pid)
                        os.waitpid(pid, 0)
                    return
                req = json.loads(msg)
                if "reap" in req:
                    os.waitpid(req["reap"], 0)
                    children.pop(req["reap"], None)
                    continue
                pid = os.fork()
                if pid == 0:
                    _child(req, fds, [sock.fileno(), wake_r, wake_w])
                children[pid] = False
                for fd in fds:
                    os.close(fd)
                sock.sendall(json.dumps({"pid": pid}).encode())
            _report_exits(sock, children)


def _report_exits(sock: socket.socket, children: dict[int, bool]) -> None:
    """Tell the test of each child that has ended, leaving it unreaped (``WNOWAIT``)."""
    for pid, told in children.items():
        if told:
            continue
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None or info.si_pid == 0:
            continue
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        children[pid] = True
        sock.sendall(json.dumps({"exit": pid, "code": code}).encode())


def _quiet_kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child(req: dict, fds: list[int], close: list[int]) -> None:
    """In the forked child: become the requested command, then exit with its status (never returns)."""
    import runpy

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in close:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        os.close(fd)
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = list(req["argv"])
        if req["module"]:  # as `python -m`: the working directory first on the path
            sys.path[0] = req["cwd"]
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = str(Path(req["argv"][0]).resolve().parent)
            runpy.run_path(req["argv"][0], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
    for step in (atexit._run_exitfuncs, sys.stdout.flush, sys.stderr.flush):  # what interpreter exit does
        try:
            step()
        except BaseException:
            pass
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _launcher_main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in PRELOAD:
        __import__(name)
    sock.sendall(b'{"ready": true}')
    _serve(sock)


# --- the test side ---------------------------------------------------------------------------------

@dataclass
class _Launcher:
    """One launcher process, the socket to it, and the exits it reported."""

    proc: subprocess.Popen
    sock: socket.socket
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Condition = field(default_factory=threading.Condition)
    exits: dict[int, int] = field(default_factory=dict)
    replies: list[dict] = field(default_factory=list)

    def listen(self) -> None:
        """Reader thread: exits into ``exits``, replies to a request into ``replies``."""
        while True:
            try:
                msg = self.sock.recv(_MAX_MESSAGE)
                item = json.loads(msg) if msg else None
            except (OSError, ValueError):
                item = None
            with self.done:
                if item is None:
                    self.exits.setdefault(-1, -1)  # the launcher is gone: waiters stop waiting
                    self.done.notify_all()
                    return
                if "exit" in item:
                    self.exits[item["exit"]] = item["code"]
                else:
                    self.replies.append(item)
                self.done.notify_all()

    def reap(self, pid: int) -> None:
        """Let the launcher reap ``pid``, whose status the test has read (its pid is free after)."""
        with self.lock:
            try:
                self.sock.sendall(json.dumps({"reap": pid}).encode())
            except OSError:
                pass

    def start(self, req: dict, fds: list[int]) -> int:
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(req).encode()], fds)
            with self.done:
                if not self.done.wait_for(lambda: self.replies or -1 in self.exits, timeout=60) or not self.replies:
                    raise RuntimeError("the warm launcher did not answer (see TINYPLM_TEST_COLD in helpers_warm.py)")
                return self.replies.pop(0)["pid"]

    def close(self) -> None:
        """End the launcher: shutdown (not only close) wakes the reader thread blocked on the socket
        and tells the launcher at once, which then kills the children left and exits."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_LAUNCHERS: dict[tuple, _Launcher] = {}
_LAUNCHERS_LOCK = threading.Lock()


def _launcher(env: dict[str, str]) -> _Launcher:
    key = tuple(env.get(name) for name in IMPORT_TIME_ENV)
    with _LAUNCHERS_LOCK:
        if key not in _LAUNCHERS:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            start_env = {k: v for k, v in os.environ.items() if k not in IMPORT_TIME_ENV}
            start_env.update({k: v for k, v in zip(IMPORT_TIME_ENV, key, strict=True) if v is not None})
            proc = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                    env=start_env, stdin=subprocess.DEVNULL)
            theirs.close()
            ready = ours.recv(_MAX_MESSAGE)
            if ready != b'{"ready": true}':
                raise RuntimeError(f"the warm launcher failed to start (exit {proc.wait()}); run with {COLD}=1")
            launcher = _Launcher(proc, ours)
            threading.Thread(target=launcher.listen, daemon=True).start()
            atexit.register(launcher.close)
            _LAUNCHERS[key] = launcher
        return _LAUNCHERS[key]


class WarmProcess:
    """A launched child, with the parts of :class:`subprocess.Popen` the tests use."""

    def __init__(self, launcher: _Launcher, pid: int, args: list[str], stdin: IO | None, stdout: IO | None,
                 stderr: IO | None) -> None:
        self._launcher, self.pid, self.args = launcher, pid, args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with self._launcher.done:
            took = self._settle()
        if took:
            self._launcher.reap(self.pid)
        return self.returncode

    def _settle(self) -> bool:
        """Take the exit status if it has come (under ``done``); True when taken now (to be reaped)."""
        if self.returncode is None and self.pid in self._launcher.exits:
            self.returncode = self._launcher.exits.pop(self.pid)
            return True
        if self.returncode is None and -1 in self._launcher.exits:
            self.returncode = -signal.SIGKILL  # the launcher died, and its children with it
        return False

    def wait(self, timeout: float | None = None) -> int:
        took: list[bool] = []
        with self._launcher.done:
            self._launcher.done.wait_for(lambda: took.append(self._settle()) or self.returncode is not None, timeout)
        if any(took):
            self._launcher.reap(self.pid)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, input: str | bytes | None = None, timeout: float | None = None) -> tuple[Any, Any]:
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        got: dict[str, Any] = {}
        readers = [threading.Thread(target=lambda n=n, f=f: got.__setitem__(n, f.read()), daemon=True)
                   for n, f in (("out", self.stdout), ("err", self.stderr)) if f is not None]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        return got.get("out"), got.get("err")

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> WarmProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                f.close()
        self.wait()


def _what(cmd: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """(module, argv) for ``python -m MODULE ARGS``, (None, argv) for ``python SCRIPT.py ARGS``, else None."""
    cmd = [str(c) for c in cmd]
    if len(cmd) < 2 or Path(cmd[0]) != Path(sys.executable):
        return None
    if cmd[1] == "-m" and len(cmd) > 2 and cmd[2].split(".")[0] == "tinyplm":
        return cmd[2], [cmd[2], *cmd[3:]]
    if cmd[1].endswith(".py") and Path(cmd[1]).is_file():
        return None, cmd[1:]
    return None


def _fd(spec: Any, mode: str, opened: list[int], ours: list[tuple[str, int]], name: str,
        stdout_fd: int | None = None) -> int:
    """The child's end for one of stdin/stdout/stderr as Popen's argument ``spec`` says."""
    if spec is None or spec == subprocess.DEVNULL:
        if spec is None and name != "stdin":  # inherited, as Popen does: this process's own fd 1 or 2
            fd = os.dup(1 if name == "stdout" else 2)
            opened.append(fd)
            return fd
        fd = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
    elif spec == subprocess.PIPE:
        r, w = os.pipe()
        child, mine = (r, w) if mode == "r" else (w, r)
        ours.append((name, mine))
        fd = child
    elif spec == subprocess.STDOUT:
        fd = os.dup(stdout_fd)
    elif isinstance(spec, int):
        fd = os.dup(spec)
    else:
        fd = os.dup(spec.fileno())
    opened.append(fd)
    return fd


def popen(cmd: Sequence[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None, stdin: Any = None,
          stdout: Any = None, stderr: Any = None, text: bool = False) -> WarmProcess | subprocess.Popen:
    """``subprocess.Popen(cmd, ...)``, warm where :func:`_what` knows ``cmd`` (see the module docstring)."""
    what = _what(cmd)
    if what is None or os.environ.get(COLD) == "1" or not hasattr(socket, "send_fds"):
        return subprocess.Popen(list(map(str, cmd)), cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                                text=text)
    module, argv = what
    env = dict(os.environ if env is None else env)
    opened: list[int] = []
    ours: list[tuple[str, int]] = []
    launcher = _launcher(env)
    try:
        fds = [_fd(stdin, "r", opened, ours, "stdin")]
        fds.append(_fd(stdout, "w", opened, ours, "stdout"))
        fds.append(_fd(stderr, "w", opened, ours, "stderr", stdout_fd=fds[1]))
        pid = launcher.start({"module": module, "argv": argv, "cwd": str(Path(cwd or os.getcwd()).resolve()),
                              "env": env}, fds)
    except BaseException:
        for _, fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in opened:
            os.close(fd)
    files = {name: os.fdopen(fd, ("w" if name == "stdin" else "r") + ("" if text else "b"), buffering=-1)
             for name, fd in ours}
    return WarmProcess(launcher, pid, list(map(str, cmd)), files.get("stdin"), files.get("stdout"),
                       files.get("stderr"))


def run(cmd: Sequence[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
        capture_output: bool = False, text: bool = False, timeout: float | None = None, stdin: Any = None,
        stdout: Any = None, stderr: Any = None, input: str | bytes | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, ...)``, warm where :func:`_what` knows ``cmd``."""
    if capture_output:
        stdout = stderr = subprocess.PIPE
    if input is not None:
        stdin = subprocess.PIPE
    proc = popen(cmd, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, text=text)
    try:
        out, err = proc.communicate(input, timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


if __name__ == "__main__":
    _launcher_main()
