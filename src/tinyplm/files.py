"""Files: atomic writes, and run directories claimed by one process at a time.

Every file tinyplm writes for a reader (results, reports, recipes, predictions) goes through
:func:`write_atomic`: a temporary sibling is written and renamed, so a reader (or a crash) never
sees half a file. Model directories and checkpoints are whole folders and use the same idea with
a folder rename (``models.io.save_model``, ``train.checkpoint``).

A *run directory* holds ``config.resolved.yaml`` (written first) and, when finished, a marker file
(``results.json``; ``pretrain.json`` for pre-training). :func:`claim_run_dir` makes one ready for a
run and holds an exclusive lock on it for the life of the process:

- a live holder (another process on the dir) is refused, naming its pid, host and start time;
- an unfinished run whose writer is gone (killed, crashed) is continued with ``resume`` (same
  resolved recipe) or started over with ``force``; its stale lock is taken over;
- a finished run is replaced only with ``force``; anything that is not a run dir is never deleted.

The lock is ``fcntl.flock`` on ``RUN_DIR/.lock``: the kernel drops it when its process dies, so a
lock that can be taken belongs to nobody, whatever pid the file still names. (We do not use a
lock-file package: the standard library gives exactly these semantics in a few lines, and the
holder's identity is ours to record.)

:func:`reuse_finished` is the one rule for reusing finished runs (the benchmarks, ``run``): a
finished run is reused only if it was made from the same resolved recipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from tinyplm.errors import RunDirError, TinyplmError

RESOLVED = "config.resolved.yaml"
RESULTS = "results.json"
LOCK = ".lock"

#: The file a model dir holds once it is saved whole (written last, inside the staged folder).
COMPLETE_MARK = ".complete"


def read_utf8(path: Path, error: type[TinyplmError] = TinyplmError) -> str:
    """A whole file as UTF-8 text, without a leading BOM; line endings left as they are.

    Raises ``error`` naming the file when it is missing, a folder or unreadable, and naming the
    line and column of the first byte that is not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, expected a file") from None
    except OSError as err:
        raise error(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise error(f"{path}:{line}: not valid UTF-8 (byte 0x{data[err.start]:02x} at column {column}); "
                    "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def tmp_sibling(path: Path) -> Path:
    """A temporary sibling of ``path`` (same folder, so the rename is atomic), unique per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; renamed onto ``path`` when the block
    ends without an exception, deleted otherwise (the old file, if any, is then untouched).
    Creates the parent folder. For writers that take a file name (safetensors, ONNX, gensim).
    Raises ``TinyplmError`` for a ``path`` that is a device, pipe or socket (``/dev/stdout``): the
    rename would put a regular file in its place, for every process after."""
    path = Path(path)
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        raise TinyplmError(f"{path}: not a file (a device, pipe or socket), which a write would replace; "
                           "name a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_sibling(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_open(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text file to stream ``path``'s new content into, renamed onto ``path`` on success
    (see :func:`atomic_path`). For outputs written line by line (JSON lines, CSV)."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:
        yield fh
        fh.flush()


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` via a temporary file and ``os.replace``.

    Creates the parent folder; returns ``path``. Raises ``OSError`` when it cannot be written
    (the old file, if any, is then untouched).
    """
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: Path, obj: Any, indent: int | None = 2) -> Path:
    """``obj`` as JSON (with a final newline) written atomically to ``path``."""
    return write_atomic(path, json.dumps(obj, indent=indent) + "\n")


def replace_dir(staged: Path, path: Path) -> Path:
    """Put the folder ``staged`` (written whole beside ``path``) in ``path``'s place: an existing
    ``path`` is moved to ``path.old`` first and deleted after, so at every moment one complete copy
    is there; a ``path.old`` left by a replace killed between the renames is deleted first.
    Returns ``path``."""
    path, staged = Path(path), Path(staged)
    old = path.with_name(path.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if path.exists():
        path.rename(old)
    staged.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    return path


# ---------------------------------------------------------------------------------------------
# the run-dir lock


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a run dir's lock."""

    pid: int
    host: str
    since: str
    command: str = ""

    def describe(self) -> str:
        where = f"pid {self.pid} on {self.host} since {self.since}"
        return f"{where} ({self.command})" if self.command else where

    @classmethod
    def current(cls) -> Holder:
        argv = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
        return cls(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%d %H:%M:%S"), argv[:200])

    @classmethod
    def read(cls, path: Path) -> Holder | None:
        """The holder recorded in a lock file, or None when it names nobody readable."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(int(data["pid"]), str(data["host"]), str(data["since"]), str(data.get("command", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None


class RunDirLock:
    """An exclusive lock on one run dir, held until :meth:`release` or the process ends."""

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir, self._fd = run_dir, fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunDirLock:
        """Lock ``run_dir`` (created if missing) and record this process as the holder.
        Raises ``RunDirError`` naming a live holder."""
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only file system, a full disk: said in one line, not a traceback
            raise RunDirError(f"{run_dir}: cannot make the run directory ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _in_use(run_dir) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(Holder.current())) + "\n").encode(), 0)
        return cls(run_dir, fd)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Drop the lock (the file stays: removing it would race with a process opening it)."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _in_use(run_dir: Path) -> RunDirError:
    holder = Holder.read(run_dir / LOCK)
    who = holder.describe() if holder else "another process"
    return RunDirError(f"{run_dir}: in use by {who}; wait for it to finish, or stop it first")


def lock_state(run_dir: Path) -> tuple[bool, Holder | None]:
    """(is the run dir's lock held by a live process now, the holder its lock file names), found
    without creating or changing anything."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False, None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        live = False
    except BlockingIOError:
        live = True
    finally:
        os.close(fd)
    return live, Holder.read(path)


@dataclass
class Claim:
    """A claimed run dir: whether the run continues an earlier one, and the lock held on it."""

    run_dir: Path
    resumed: bool
    lock: RunDirLock

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def write_problem(folder: Path) -> str | None:
    """Why nothing can be made in the existing folder ``folder`` (None when something can). Tried
    with an empty folder made and removed at once: ``os.access`` reads a read-only or virtual file
    system (``/proc``, for root) as writable."""
    probe = Path(folder) / f".tinyplm-probe.{os.getpid()}.{os.urandom(4).hex()}"  # unique across a cluster too
    try:
        probe.mkdir()
    except OSError as exc:
        return exc.strerror or str(exc)
    shutil.rmtree(probe, ignore_errors=True)  # gone already: still a folder something could be made in
    return None


def check_creatable(run_dir: Path, what: str = "run directory", flag: str | None = None) -> None:
    """Raise ``RunDirError`` (its message led by ``flag``, the option that named the path, when given)
    when ``run_dir`` cannot be a ``what`` (a run directory, an output folder): it is a file, or the
    nearest folder that exists on its way is a file or one nothing can be made in. Nothing is left
    behind."""
    run_dir = Path(run_dir)
    lead = f"{flag}: " if flag else ""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{lead}{run_dir}: is a file; the {what} must be a folder (choose another)")
    found = next(p for p in (run_dir, *run_dir.absolute().parents) if p.exists())  # "/" at the latest
    if not found.is_dir():
        raise RunDirError(f"{lead}{found}: is a file, so the {what} {run_dir} cannot be made under it")
    if problem := write_problem(found):
        where = f"the {what}" if found == run_dir else f"this folder, where the {what} {run_dir} would go"
        raise RunDirError(f"{lead}{found}: nothing can be made in {where} ({problem})")


#: (the stored resolved recipe, the new one) -> the differences that stop a resume, each said as
#: "KEY: OLD -> NEW" ([] when none matters); the caller's, since files reads no recipe itself.
Compare = Callable[[str, str], list[str]]


def claim_run_dir(run_dir: Path, resolved: str, *, resume: bool = False, force: bool = False,
                  finished: str = RESULTS, compare: Compare | None = None) -> Claim:
    """Make ``run_dir`` ready for a run of the resolved recipe ``resolved`` and lock it.
    ``compare`` says how a resumed run's recipe may differ (without it: not at all).

    Returns a :class:`Claim` (``resumed`` is True when an unfinished run of the same recipe is
    continued). Raises ``RunDirError`` when another live process holds the dir, or the dir holds a
    finished run (without ``force``), an unfinished run (without ``resume`` or ``force``), a
    different recipe (with ``resume``), or files that are not a tinyplm run. Nothing is created,
    deleted or written before these checks pass.
    """
    run_dir = Path(run_dir)
    check_creatable(run_dir)
    live, previous = lock_state(run_dir)
    if live:
        raise _in_use(run_dir)
    resumed = _check(run_dir, resolved, resume, force, finished, previous, compare)
    lock = RunDirLock.acquire(run_dir)  # raises if another process claimed it since the check
    try:
        if force:  # the finished mark first, the recipe never (replaced below): a kill midway leaves a run dir
            for child in sorted(run_dir.iterdir(), key=lambda c: c.name != finished):
                if child.name not in (LOCK, RESOLVED):  # the lock file stays: we hold it
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        if resumed:  # the lock is ours, so every other writer is dead: its half-written files go
            for stale in _dead_temporaries(run_dir):
                stale.unlink(missing_ok=True)
        else:
            for stale in _unclaimed(run_dir):  # temporaries of a claim killed before its recipe was written
                stale.unlink()
            write_atomic(run_dir / RESOLVED, resolved)  # first: from here on the dir is a run dir
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / "checkpoints").mkdir(exist_ok=True)
    except BaseException:
        lock.release()
        raise
    return Claim(run_dir, resumed, lock)


def _check(run_dir: Path, resolved: str, resume: bool, force: bool, finished: str, previous: Holder | None,
           compare: Compare | None = None) -> bool:
    """The checks of :func:`claim_run_dir` -> whether the run resumes; raises ``RunDirError``."""
    existing = run_dir / RESOLVED
    if not run_dir.exists():
        return False
    stale = _unclaimed(run_dir)
    if all(p.name == LOCK or p in stale for p in run_dir.iterdir()):
        return False  # nothing there, or a claim killed before it wrote the recipe: start afresh
    if not existing.is_file():  # a results.json alone (bench's folder, a user's copy) is no run to replace
        if force:
            raise RunDirError(f"{run_dir}: not a tinyplm run directory (no {RESOLVED}); refusing to delete it")
        raise RunDirError(f"{run_dir}: exists and is not a tinyplm run directory (no {RESOLVED}); "
                          "choose another output dir")
    if force:
        return False
    if (run_dir / finished).is_file():
        if resume:
            raise RunDirError(f"{run_dir}: holds a finished run ({finished}): nothing to resume; its reports are "
                              "there (--force replaces the run, deleting it)")
        raise RunDirError(f"{run_dir}: already holds a finished run ({finished}); pass --force to replace it "
                          "or choose another output dir")
    if not resume:
        gone = f" (its last writer, {previous.describe()}, is no longer running)" if previous else ""
        raise RunDirError(f"{run_dir}: holds an unfinished run; pass --resume to continue it "
                          f"or --force to restart{gone}")
    stored = existing.read_text(encoding="utf-8")
    if stored != resolved:
        changes = compare(stored, resolved) if compare is not None else ["not the same text"]
        if changes:
            shown = "; ".join(changes[:4]) + (f"; and {len(changes) - 4} more" if len(changes) > 4 else "")
            raise RunDirError(f"{existing}: the recipe changed since this run started ({shown}); --resume needs "
                              "the same recipe: undo the change, or run it in another output dir (--force "
                              "restarts here, deleting the stages already made)")
    return True


_TEMPORARY = re.compile(r".+\.(\d+)\.tmp")


def _dead_temporaries(run_dir: Path) -> list[Path]:
    """Files under ``run_dir`` that a per-process atomic write (:func:`tmp_sibling`, the ONNX
    export's ``NAME.PID.tmp``) of another process left when it was killed before its rename."""
    return [p for p in run_dir.rglob("*.tmp") if p.is_file() and (m := _TEMPORARY.fullmatch(p.name))
            and int(m.group(1)) != os.getpid()]


def _unclaimed(run_dir: Path) -> set[Path]:
    """Temporaries of the recipe (see :func:`tmp_sibling`) that a claim killed before its rename left."""
    return set(run_dir.glob(f".{RESOLVED}.*.tmp"))


def reuse_finished(run_dir: Path, resolved: str, *, finished: str = RESULTS) -> bool:
    """Whether ``run_dir`` holds a finished run of exactly this resolved recipe (reuse it).

    False when there is no finished run there (start or resume one). Raises ``RunDirError``
    naming the stored recipe when a finished run of *another* recipe is there: reusing it would
    report figures of a run that was not asked for.
    """
    run_dir = Path(run_dir)
    if not (run_dir / finished).is_file():
        return False
    stored = run_dir / RESOLVED
    if not stored.is_file() or stored.read_text(encoding="utf-8") != resolved:
        raise RunDirError(f"{stored}: a finished run of another recipe is in {run_dir}; choose another output dir "
                          "(or remove it) to run this one")
    return True
