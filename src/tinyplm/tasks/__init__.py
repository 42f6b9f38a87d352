"""Tasks: one small :class:`Task` per dataset, found by name.

    >>> task = get("sst-2")                   # case-insensitive; "SST-2", "sst_2" work too
    >>> data = task.load()                    # TaskData(train, evals, labels, metrics, ...)

GLUE files are looked up in :func:`resolve_glue_dir` (explicit ``data_dir`` > env
``TINYPLM_DATA`` > ``<repo>/../shared/data/glue``). Your own CSV/JSONL files: :func:`custom_task`.
"""

from __future__ import annotations

from pathlib import Path

from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.tasks.base import METRIC_NAMES, Example, Split, Task, TaskData
from tinyplm.tasks.custom import custom_task
from tinyplm.tasks.glue import GLUE_SPECS, glue_task
from tinyplm.tasks.paths import resolve_glue_dir

__all__ = [
    "METRIC_NAMES",
    "Example",
    "Split",
    "Task",
    "TaskData",
    "custom_task",
    "get",
    "load_task",
    "names",
    "resolve_glue_dir",
]

#: Extra spellings beyond the case/dash/underscore-insensitive names ("SST-2" -> "sst2").
ALIASES: dict[str, str] = {"sst": "sst2", "sts": "stsb", "mnlim": "mnli", "mnlimm": "mnli"}


def names() -> list[str]:
    """The registered task names, in GLUE order."""
    return list(GLUE_SPECS)


def canonical(name: str) -> str | None:
    """The registered name for ``name`` or an alias of it ("STS-B" -> "stsb"), else None."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = ALIASES.get(key, key)
    return key if key in GLUE_SPECS else None


def get(name: str, data_dir: str | Path | None = None) -> Task:
    """The task called ``name``, its files resolved against the GLUE folder.

    ``data_dir`` is the data root or GLUE folder (see :func:`resolve_glue_dir`). Raises
    ``TinyplmError`` for an unknown name, suggesting the nearest known one. Files are not read
    here, so a missing folder only fails on ``Task.read``.
    """
    key = canonical(name)
    if key is None:
        hint = did_you_mean(name.strip().lower(), names()) or "."
        known = ", ".join(names())
        raise TinyplmError(
            f"unknown task '{name}'{hint} Known tasks: {known} "
            "(for your own CSV/JSONL files use a custom task)"
        )
    return glue_task(key, resolve_glue_dir(data_dir))


def load_task(spec) -> TaskData:
    """Read a recipe's task (a ``TaskSpec``): GLUE by name, or a custom CSV/JSONL task.

    Raises ``TinyplmError`` subclasses naming the missing key, file or line."""
    from tinyplm.errors import RecipeError

    if spec.name == "custom":
        if not spec.train_file or not spec.dev_file:
            raise RecipeError("task.name 'custom' needs task.train_file and task.dev_file")
        task = custom_task(
            "custom", Path(spec.train_file), Path(spec.dev_file), spec.text_column, spec.label_column,
            spec.text_pair_column, spec.labels, spec.regression,
        )
    else:
        task = get(spec.name, spec.data_dir)
    return task.load()
