"""One seed for a whole run (a recipe's top-level ``seed``, e.g. ``tinyplm run RECIPE seed=2`` or a
sweep's ``seed: {grid: [1, 2, 3]}``): it replaces the seed of every training section, so a run is
repeated under another seed with one key, not one per section.

What it sets: ``teacher.finetune.seed``; each student's ``train.seed`` (or, for a student with
``stages``, each stage's ``train.seed``); the ``recover.train.seed`` of each compress step that
recovers; ``augment.seed``. A section's own ``seed`` is replaced (the top-level key is the one a
repeat changes). Held-out draws (``task.holdout_seed``) are not touched: every repeat is judged on
the same held-out examples.

It works on the recipe's mapping before validation (``RunConfig``'s ``mode="before"`` validator),
so the resolved recipe holds the seed in every section it set.
"""

from __future__ import annotations

from typing import Any


def _with_train_seed(section: Any, seed: int) -> Any:
    """A copy of the mapping ``section`` whose ``train`` section (made where absent) has ``seed``;
    anything else as it is (validation names what is wrong with it)."""
    if not isinstance(section, dict):
        return section
    train = section.get("train")
    if train is not None and not isinstance(train, dict):
        return section
    return {**section, "train": {**(train or {}), "seed": seed}}


def _seed_student(student: dict[str, Any], seed: int) -> dict[str, Any]:
    stages = student.get("stages")
    if isinstance(stages, list):
        student = {**student, "stages": [_with_train_seed(s, seed) for s in stages]}
    else:
        student = _with_train_seed(student, seed)
    steps = student.get("compress")
    if isinstance(steps, list):
        recovered = [{**st, "recover": _with_train_seed(st["recover"], seed)}
                     if isinstance(st, dict) and isinstance(st.get("recover"), dict) else st for st in steps]
        student = {**student, "compress": recovered}
    return student


def spread_seed(data: Any) -> Any:
    """``data`` (a recipe mapping) with its top-level ``seed`` written into every section it sets
    (see the module docstring); unchanged when it has none (or is not a mapping)."""
    if not isinstance(data, dict) or data.get("seed") is None or isinstance(data["seed"], bool) \
            or not isinstance(data["seed"], int):
        return data  # no seed, or a wrong one the field's validation names
    seed = data["seed"]
    out = dict(data)
    teacher = out.get("teacher")
    if isinstance(teacher, dict) and isinstance(teacher.get("finetune"), dict):
        out["teacher"] = {**teacher, "finetune": {**teacher["finetune"], "seed": seed}}
    students = out.get("students")
    if isinstance(students, list):
        out["students"] = [_seed_student(s, seed) if isinstance(s, dict) else s for s in students]
    if isinstance(out.get("augment"), dict):
        out["augment"] = {**out["augment"], "seed": seed}
    return out
