"""The data files a run reads, fingerprinted when it starts and compared when it resumes.

A resumed run continues from checkpoints trained on its data as it was: the recipe is compared by
the run-dir claim (:func:`tinyplm.files.claim_run_dir`), and the files it names are compared here,
so a train file replaced under the same path (new rows, relabelled rows) is refused by ``--resume``
before any work, naming the file, instead of silently mixing two datasets in one model.

Each file is known by its size and a SHA-256 of its bytes (of its first and last
:data:`EDGE_BYTES` when it is larger than :data:`WHOLE_BYTES`, so a corpus of gigabytes is
fingerprinted in a moment); its modification time is not used, since a copy of the same bytes is
the same data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
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


def fingerprints(files: Iterable[Path]) -> dict[str, dict[str, object]]:
    """Each existing file of ``files`` (resolved, each once) -> its :func:`fingerprint`."""
    out: dict[str, dict[str, object]] = {}
    for path in files:
        path = Path(path).expanduser()
        if path.is_file():
            out.setdefault(str(path.resolve()), fingerprint(path.resolve()))
    return dict(sorted(out.items()))


def check_same_inputs(run_dir: Path, files: Iterable[Path], resumed: bool) -> None:
    """A fresh run records the fingerprints of ``files`` in ``run_dir``; a resumed one compares them
    with the record and raises ``RunDirError`` naming each file that changed, appeared or went
    (a run started before the record existed is not compared, and gets one)."""
    now = fingerprints(files)
    record = Path(run_dir) / INPUTS_FILE
    if resumed and record.is_file():
        before = json.loads(record.read_text(encoding="utf-8"))
        changed = [p for p in sorted(set(before) | set(now)) if before.get(p) != now.get(p)]
        if changed:
            said = "; ".join(f"{p} ({_what(before.get(p), now.get(p))})" for p in changed)
            raise RunDirError(f"{run_dir}: the data this run started on has changed since: {said}; its checkpoints "
                              "were trained on the data as it was: restore it, or start again with --force")
        return
    write_atomic(record, json.dumps(now, indent=1) + "\n")


def _what(before: dict | None, now: dict | None) -> str:
    if before is None:
        return "read now, not when the run started"
    if now is None:
        return "gone"
    return f"{before['bytes']} bytes then, {now['bytes']} now" if before["bytes"] != now["bytes"] else "other bytes"
