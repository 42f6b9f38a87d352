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


def _seed_train(holder: dict[str, Any], key: str, seed: int) -> None:
    """Set ``holder[key]["seed"]``, making ``holder[key]`` a mapping where it is absent."""
    section = holder.get(key)
    if section is None:
        holder[key] = {"seed": seed}
    elif isinstance(section, dict):
        holder[key] = {**section, "seed": seed}


def _seed_student(student: dict[str, Any], seed: int) -> dict[str, Any]:
    student = dict(student)
    stages = student.get("stages")
    if isinstance(stages, list):
        student["stages"] = [_with_train(s, "train", seed) for s in stages]
    else:
        _seed_train(student, "train", seed)
    steps = student.get("compress")
    if isinstance(steps, list):
        student["compress"] = [_seed_recover(step, seed) for step in steps]
    return student


def _with_train(section: Any, key: str, seed: int) -> Any:
    if not isinstance(section, dict):
        return section  # validation names what is wrong with it
    out = dict(section)
    _seed_train(out, key, seed)
    return out


def _seed_recover(step: Any, seed: int) -> Any:
    if not isinstance(step, dict) or not isinstance(step.get("recover"), dict):
        return step
    return {**step, "recover": _with_train(step["recover"], "train", seed)}


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
