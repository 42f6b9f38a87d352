"""The data files a run reads, fingerprinted when it starts and compared when it resumes.

A resumed run continues from checkpoints trained on its data as it was: the recipe is compared by
the run-dir claim (:func:`tinyplm.files.claim_run_dir`), and the files it names are compared here,
so a train file replaced under the same path (new rows, relabelled rows) is refused by ``--resume``
before any work, naming the file, instead of silently mixing two datasets in one model.

Each file is known by its role in the run (``train``, ``eval dev``, ``corpus 0``), its size and a
SHA-256 of its bytes (of its first and last :data:`EDGE_BYTES` when it is larger than
:data:`WHOLE_BYTES`, so a corpus of gigabytes is fingerprinted in a moment); neither its path nor
its modification time is compared, since the same bytes moved or copied are the same data.
Folders (a corpus folder, a BEIR folder) are not fingerprinted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from tinyplm.errors import RunDirError
from tinyplm.files import write_atomic

INPUTS_FILE = "inputs.json"
WHOLE_BYTES = 256 * 2**20
EDGE_BYTES = 16 * 2**20


def fingerprint(path: Path) -> dict[str, object]:
    """``{"bytes": size, "sha256": digest}`` of the file ``path`` (see the module docstring)."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        if size <= WHOLE_BYTES:
            for block in iter(lambda: f.read(2**20), b""):
                digest.update(block)
        else:
            digest.update(f.read(EDGE_BYTES))
            f.seek(size - EDGE_BYTES)
            digest.update(f.read(EDGE_BYTES))
    return {"bytes": size, "sha256": digest.hexdigest()}


def fingerprints(files: Mapping[str, Path]) -> dict[str, dict[str, object]]:
    """Each role (``train``, ``eval dev``, ``corpus 0`` ...) whose path is a file -> its path and
    :func:`fingerprint` (folders and names that are not files are left out)."""
    out: dict[str, dict[str, object]] = {}
    for role, path in files.items():
        path = Path(path).expanduser()
        if path.is_file():
            out[role] = {"path": str(path.resolve()), **fingerprint(path.resolve())}
    return dict(sorted(out.items()))


def check_same_inputs(run_dir: Path, files: Mapping[str, Path], resumed: bool) -> None:
    """A fresh run records the fingerprints of ``files`` (role -> path) in ``run_dir``; a resumed one
    compares each role's bytes with the record (not its path: the same bytes moved are the same data)
    and raises ``RunDirError`` naming each file that changed, appeared or went. A run started before
    the record existed is not compared, and gets one; a damaged record is named."""
    now = fingerprints(files)
    record = Path(run_dir) / INPUTS_FILE
    if resumed and record.is_file():
        before = _read(record)
        changed = [role for role in sorted(set(before) | set(now)) if _data(before.get(role)) != _data(now.get(role))]
        if changed:
            said = "; ".join(f"{role} {_where(before.get(role), now.get(role))}" for role in changed)
            raise RunDirError(f"{run_dir}: the data this run started on has changed since: {said}; its checkpoints "
                              "were trained on the data as it was: restore it, or start again with --force")
        return
    write_atomic(record, json.dumps(now, indent=1) + "\n")


def _read(record: Path) -> dict[str, dict]:
    try:
        doc = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunDirError(f"{record}: cannot be read ({exc}); start the run again with --force") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise RunDirError(f"{record}: expected an object of data files; start the run again with --force")
    return doc


def _data(entry: dict | None) -> tuple | None:
    return None if entry is None else (entry.get("bytes"), entry.get("sha256"))


def _where(before: dict | None, now: dict | None) -> str:
    if before is None:
        return f"{now['path']} (read now, not when the run started)"
    if now is None:
        return f"{before['path']} (not read now)"
    what = (f"{before['bytes']} bytes then, {now['bytes']} now" if before["bytes"] != now["bytes"]
            else "other bytes")
    return f"{now['path']} ({what})"
