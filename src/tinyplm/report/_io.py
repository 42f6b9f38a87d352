"""Atomic file writes: a reader never sees a half-written report file."""

from __future__ import annotations

import os
from pathlib import Path


def tmp_path(path: Path) -> Path:
    """A temporary sibling of ``path`` (same folder, so ``os.replace`` is atomic)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` via a temp file and ``os.replace``; returns ``path``.

    Creates the parent folder. Raises ``OSError`` when the folder is not writable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
