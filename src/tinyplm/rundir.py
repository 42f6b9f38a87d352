"""Run directories: claim one safely, and know whether it holds a finished run.

A run dir is finished when it holds ``results.json``. Reusing a finished one needs ``force``;
an unfinished one is continued with ``resume`` (same resolved recipe) or started over with
``force``. Nothing already written is touched otherwise.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tinyplm.errors import RunDirError

RESOLVED = "config.resolved.yaml"
RESULTS = "results.json"


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def claim_run_dir(run_dir: Path, resolved_yaml: str, *, resume: bool = False, force: bool = False) -> bool:
    """Make ``run_dir`` ready for a run of ``resolved_yaml``; return True when resuming.

    Raises ``RunDirError`` when the dir holds a finished run (without ``force``), an unfinished
    run (without ``resume`` or ``force``), a different recipe (with ``resume``), or unrelated files.
    """
    run_dir = Path(run_dir)
    existing = run_dir / RESOLVED
    if run_dir.exists() and any(run_dir.iterdir()):
        if force:
            if not existing.is_file() and not (run_dir / RESULTS).is_file():
                raise RunDirError(f"{run_dir}: not a tinyplm run directory (no {RESOLVED}); refusing to delete it")
            shutil.rmtree(run_dir)
        elif (run_dir / RESULTS).is_file():
            raise RunDirError(
                f"{run_dir}: already holds a finished run ({RESULTS}); pass --force to replace it "
                "or choose another output_dir"
            )
        elif not existing.is_file():
            raise RunDirError(f"{run_dir}: exists and is not a tinyplm run directory; choose another output_dir")
        elif not resume:
            raise RunDirError(f"{run_dir}: holds an unfinished run; pass --resume to continue it or --force to restart")
        elif existing.read_text(encoding="utf-8") != resolved_yaml:
            raise RunDirError(
                f"{existing}: the recipe changed since this run started; --resume needs the same recipe "
                "(or pass --force to restart)"
            )
        else:
            return True
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    write_text_atomic(existing, resolved_yaml)
    return False
