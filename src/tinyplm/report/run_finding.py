"""The run dirs under the folders a table command is given (``glue-table``, ``paradigm-table``):
each counted once however it is reached, a sweep's folder read as the trials its ``sweep.json``
lists, and what is left out named with why (an unfinished run, a trial of an earlier search space)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tinyplm.errors import TinyplmError
from tinyplm.files import RESOLVED, RESULTS
from tinyplm.report import unfinished_note

SWEEP = "sweep.json"
#: What marks a finished pre-training run (it writes no results.json).
PRETRAINED = "pretrain.json"
#: The folders of a run dir that hold its own models and files, never another run.
RUN_PARTS = frozenset({"model", "teacher", "students", "checkpoints", "logs", "plots", "work", "export"})


@dataclass(frozen=True)
class FoundRuns:
    """The run dirs found (each holds a ``results.json``), sorted, and what was left out with why
    (unfinished runs, trials a sweep no longer lists)."""

    runs: list[Path]
    skipped: dict[str, str] = field(default_factory=dict)


def find_runs(paths: list[Path]) -> FoundRuns:
    """Every run dir at or under ``paths`` (a folder holding ``results.json``), each once however it
    was reached (a run given twice, by another spelling or through a symlink, counts once), sorted.

    A folder holding ``sweep.json`` gives the trials it lists (``trials/KEY``); the other folders
    in its ``trials/`` are left out by name (trials of an earlier search space), and so is a run dir
    with ``config.resolved.yaml`` but no ``results.json`` (unfinished). Raises ``TinyplmError``
    naming a path that does not exist or is a file other than a ``results.json``."""
    found: dict[Path, Path] = {}  # resolved -> as reached
    skipped: dict[str, str] = {}
    visited: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise TinyplmError(f"{path}: no such run dir or folder (expected a finished run or a sweep's folder)")
        if path.is_file():
            if path.name != RESULTS:
                raise TinyplmError(f"{path}: is a file; expected a finished run dir or a folder holding them "
                                   "(a sweep's)")
            path = path.parent
        _walk(path, found, skipped, visited)
    return FoundRuns(sorted(found.values()), skipped)


def _walk(folder: Path, found: dict[Path, Path], skipped: dict[str, str], visited: set[Path]) -> None:
    """Add the run dirs at or under ``folder`` to ``found``, what is left out to ``skipped``."""
    real = folder.resolve()
    if real in visited:
        return
    visited.add(real)
    run = (folder / RESULTS).exists()
    if run:
        found[real] = folder  # and the runs kept inside it (a later run reading this one's teacher)
    elif (folder / RESOLVED).is_file():
        if not (folder / PRETRAINED).is_file():  # a finished pre-training run: no task results, not unfinished
            skipped[str(folder)] = unfinished_note(folder)
        return
    listed = _sweep_trials(folder, skipped) if (folder / SWEEP).is_file() else None
    try:
        children = sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: (p.is_symlink(), p))
    except OSError as exc:
        skipped[str(folder)] = f"cannot be read ({exc.strerror or exc})"
        return
    if listed is None:
        for child in (c for c in children if not (run and c.name in RUN_PARTS)):
            _walk(child, found, skipped, visited)
        return
    for key, status in listed.items():
        trial = folder / "trials" / key
        if trial.is_dir():
            _walk(trial, found, skipped, visited)
        else:
            skipped[str(trial)] = f"{folder / SWEEP} lists it as {status or 'a trial'}; no run dir there"
    trials = folder / "trials"
    extras = sorted(p for p in trials.iterdir() if p.is_dir() and p.name not in listed) if trials.is_dir() else []
    for extra in extras:
        skipped[str(extra)] = f"not among the trials {folder / SWEEP} lists: left from an earlier search space"


def _sweep_trials(sweep_dir: Path, skipped: dict[str, str]) -> dict[str, str] | None:
    """The trials ``sweep_dir/sweep.json`` lists (key -> status); None, and the file named in
    ``skipped``, when it cannot be read (every run dir under the folder is read instead)."""
    path = sweep_dir / SWEEP
    try:
        trials = {t["key"]: str(t.get("status", "")) for t in json.loads(path.read_text(encoding="utf-8"))["trials"]}
        if not all(isinstance(k, str) and k.startswith("t-") and "/" not in k for k in trials):
            raise ValueError("a trial key is not a trial folder's name (t-...)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        skipped[str(path)] = f"unreadable ({exc}); every run dir under {sweep_dir} read instead"
        return None
    return trials
