"""Where the GLUE files are.

Priority: explicit argument > env ``TINYPLM_DATA`` > ``<repo>/../shared/data/glue``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TINYPLM_DATA"

#: <repo> is three folders above this file: <repo>/src/tinyplm/tasks/paths.py.
REPO_ROOT = Path(__file__).resolve().parents[3]


def default_glue_dir() -> Path:
    """``<repo>/../shared/data/glue``, else ``<cwd>/../shared/data/glue`` when only that exists.

    When neither exists the repo-based path is returned, so "file not found" messages name it.
    """
    from_repo = REPO_ROOT.parent / "shared" / "data" / "glue"
    from_cwd = Path.cwd().parent / "shared" / "data" / "glue"
    if not from_repo.is_dir() and from_cwd.is_dir():
        return from_cwd.resolve()
    return from_repo


def resolve_glue_dir(explicit: str | Path | None = None) -> Path:
    """The GLUE data folder (holding ``SST-2/``, ``CoLA/`` ...), as an absolute path.

    Priority: ``explicit`` (a recipe's ``data_dir`` or the CLI flag) > env ``TINYPLM_DATA`` >
    :func:`default_glue_dir`. When the chosen folder holds a ``glue`` subfolder that subfolder is
    used, so the value may name either the data root or the GLUE folder itself. The folder is not
    required to exist; reading a split then raises ``DataError`` naming the missing file.
    """
    if explicit is not None and str(explicit) != "":
        chosen = Path(explicit)
    elif os.environ.get(ENV_VAR):
        chosen = Path(os.environ[ENV_VAR])
    else:
        chosen = default_glue_dir()
    chosen = chosen.expanduser().resolve()
    if (chosen / "glue").is_dir():
        chosen = chosen / "glue"
    return chosen


def resolve_data_root(explicit: str | Path | None = None) -> Path:
    """The data root holding ``squad/`` and ``conll2003/`` beside ``glue/``: ``explicit`` (a
    recipe's ``data_dir``: the root or the dataset's own folder) > env ``TINYPLM_DATA`` >
    ``<repo>/../shared/data``."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser().resolve()
    glue = resolve_glue_dir(None)
    return glue.parent if glue.name == "glue" else glue
