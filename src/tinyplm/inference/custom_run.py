"""The files and columns of the custom task a saved model was trained on, read from its run's
recipe, so that ``tinyplm evaluate`` and ``tinyplm bench`` score it with ``--task custom`` on the
same dev file, columns and labels as the run did (the command line has no flags for them)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tinyplm.errors import TinyplmError
from tinyplm.inference.model_info import model_dir_of, run_task
from tinyplm.inference.pairs import CUSTOM_TASK

#: The task keys that make a custom task (``config.TaskSpec``), taken from the run's recipe.
CUSTOM_KEYS = ("train_file", "dev_file", "text_column", "text_pair_column", "label_column", "labels", "regression")


def custom_task_keys(model_dir: Path) -> dict[str, object]:
    """The :data:`CUSTOM_KEYS` of the recipe of the run ``model_dir`` (a model dir or run dir) was
    trained in. Raises ``TinyplmError`` saying what to do when it sits in no run of a custom task."""
    run = run_task(model_dir_of(model_dir))
    if run is None or run.name != CUSTOM_TASK:
        found = f", and its run's recipe {run.recipe} is of task '{run.name}'" if run is not None else \
            ", and no run's config.resolved.yaml is beside it"
        raise TinyplmError(
            f"--task custom: a custom task's files and columns are read from the recipe of the run {model_dir} was "
            f"trained in{found}; score it with a recipe instead (task.name: custom with task.train_file and "
            "task.dev_file, teacher.model: this dir, no finetune section, students: []) and tinyplm run")
    task = yaml.safe_load(run.recipe.read_text(encoding="utf-8"))["task"]  # run_task read it as a mapping
    return {key: task[key] for key in CUSTOM_KEYS if key in task}
