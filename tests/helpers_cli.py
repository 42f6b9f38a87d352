"""Helpers for tests that drive the ``tinyplm`` command line.

``cli(args, cwd)`` runs ``tinyplm ARGS`` and returns its exit code, stdout and stderr. It runs in
a real subprocess (``python -m tinyplm.cli``) when ``subprocess=True`` or when the environment
sets ``TINYPLM_TEST_SUBPROCESS=1``; otherwise it calls ``tinyplm.cli.main()`` in this process
with ``sys.argv``, the working directory and the environment set as a subprocess would see them
(a subprocess pays ~5-10 s importing torch and transformers; in-process calls share one import).
An exception escaping ``main()`` in-process is printed as a traceback into the captured stderr,
so "no traceback" assertions hold either way.

``snapshot(root)`` and ``changed(before, root)`` check that files already written stay as they
were: same bytes, same size, same modification time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import helpers_warm as warm

#: file path relative to the snapshot root -> (size, mtime_ns, sha256 hex digest)
Snapshot = dict[str, tuple[int, int, str]]


@dataclass(frozen=True)
class Result:
    """What one ``tinyplm`` command did."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.stdout + self.stderr


def cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, *, subprocess: bool = False) -> Result:
    """Run ``tinyplm ARGS`` in ``cwd`` with extra environment ``env`` (see the module docstring)."""
    extra = {"TINYPLM_CACHE": str(Path(cwd) / ".tinyplm-cache"), **(env or {})}
    args = [str(a) for a in args]
    if subprocess or os.environ.get("TINYPLM_TEST_SUBPROCESS") == "1":
        return _subprocess(args, Path(cwd), extra)
    return _in_process(args, Path(cwd), extra)


def _subprocess(args: list[str], cwd: Path, extra: dict[str, str]) -> Result:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", **extra}
    proc = warm.run([sys.executable, "-m", "tinyplm.cli", *args], cwd=cwd, env=env,
                    capture_output=True, text=True, timeout=300)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _in_process(args: list[str], cwd: Path, extra: dict[str, str]) -> Result:
    from tinyplm import cli as cli_module

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_env = {key: os.environ.get(key) for key in extra}
    sys.argv = ["tinyplm", *args]
    os.environ.update(extra)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli_module.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # what the interpreter would print for an uncaught exception
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        for key, value in saved_env.items():  # only what we set: tinyplm's own setdefaults stay
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.argv = saved_argv
    return Result(code, out.getvalue(), err.getvalue())


def assert_bad_input(result: Result, *fragments: str) -> None:
    """Exit code 2, an ``error:`` line holding every fragment, no traceback."""
    shown = f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert "Traceback" not in result.output, shown
    assert result.returncode == 2, shown
    assert "error:" in result.stderr, shown
    for fragment in fragments:
        assert fragment in result.stderr, f"{fragment!r} not in stderr\n{shown}"
    # "short": one error line, not a dump
    assert len(result.stderr.strip().splitlines()) <= 3, shown


def snapshot(root: Path) -> Snapshot:
    """Every file under ``root``: relative path -> (size, mtime_ns, sha256)."""
    root = Path(root)
    found: Snapshot = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        found[path.relative_to(root).as_posix()] = (
            st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def changed(before: Snapshot, root: Path) -> list[str]:
    """The files of ``before`` that are now missing or differ (bytes, size or mtime)."""
    after = snapshot(root)
    return sorted(k for k, v in before.items() if after.get(k) != v)


def added(before: Snapshot, root: Path) -> list[str]:
    """The files under ``root`` that ``before`` did not hold."""
    return sorted(set(snapshot(root)) - set(before))


def write_sst2(glue: Path, train: bytes | None, dev: bytes | None) -> Path:
    """A GLUE folder whose SST-2 train/dev files hold the given bytes (None: file absent)."""
    folder = Path(glue) / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (("train.tsv", train), ("dev.tsv", dev)):
        if content is not None:
            (folder / name).write_bytes(content)
    return Path(glue)
