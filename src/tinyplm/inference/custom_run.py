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
    recipe = yaml.safe_load(run.recipe.read_text(encoding="utf-8"))  # run_task read it as a mapping
    keys = {key: recipe["task"][key] for key in CUSTOM_KEYS if key in recipe["task"]}
    start = start_folder(run.recipe.parent, recipe)
    for key in FILE_KEYS:
        if isinstance(keys.get(key), str):
            keys[key] = str(_found(Path(keys[key]), start, run.recipe, key, needed=key == "dev_file"))
    return keys


#: The keys of :data:`CUSTOM_KEYS` that name files, relative to the folder the run was started in
#: (the commands score the dev file; the train file is read only where the task needs it).
FILE_KEYS = ("train_file", "dev_file")


def start_folder(run_dir: Path, recipe: dict) -> Path | None:
    """The folder the run in ``run_dir`` was started in, where its recipe's relative paths point: the
    run dir less its relative ``output_dir`` (``runs/{name}``), when the run dir still ends in it;
    None when that cannot be told (an absolute or ``..`` output dir, a moved run dir)."""
    out, name = recipe.get("output_dir"), recipe.get("name")
    if not isinstance(out, str) or not isinstance(name, str):
        return None
    tail = Path(out.replace("{name}", name)).parts
    here = run_dir.resolve().parts
    if Path(out).is_absolute() or ".." in tail or not tail or here[-len(tail):] != tail:
        return None
    return Path(*here[:-len(tail)])


def _found(path: Path, start: Path | None, recipe: Path, key: str, needed: bool) -> Path:
    """``path`` (the run's ``task.<key>``) where it is: as it is (absolute, or from the current folder),
    else from the folder the run was started in. Not found there either: as it is, or, when
    ``needed``, ``TinyplmError`` naming both places."""
    if path.is_absolute() or path.exists():
        return path
    if start is not None and (start / path).exists():
        return start / path
    if not needed:
        return path
    where = f" nor from {start}, where the run was started" if start is not None else \
        " (and where the run was started cannot be told from its run dir)"
    raise TinyplmError(f"--task custom: {recipe} names task.{key} {path}, a path relative to the folder the run "
                       f"was started in; it is not found from here ({Path.cwd()}){where}: run the command from "
                       "that folder")
