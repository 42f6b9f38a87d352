"""A recipe's ``task`` section as given, read before its fields are checked: the two task names
that are not looked up among the named tasks, in any case; ``labels`` integers read as the strings
a data file holds, and no label names beside ``regression: true``."""

from __future__ import annotations

#: Task names that are not looked up among the named tasks: your own files, and the sentence encoder task.
SPECIAL_TASK_NAMES = ("custom", "embedding")


def task_section(data: object) -> object:
    """A ``task`` section as given (a mapping) with its ``name`` :func:`spelled_as_compared` and
    :func:`labels_as_text` applied to its ``labels``, refused (``ValueError``) when it names labels
    beside ``regression: true``, which reads a score per example and would leave them unused."""
    if not isinstance(data, dict):
        return data
    if data.get("regression") is True and data.get("labels"):
        raise ValueError("labels name classes, and regression: true reads a score per example: drop one of them")
    if isinstance(data.get("name"), str):
        data = {**data, "name": spelled_as_compared(data["name"])}
    return {**data, "labels": labels_as_text(data["labels"])} if "labels" in data else data


def spelled_as_compared(name: str) -> str:
    """``Custom`` or `` embedding `` -> ``custom``, ``embedding``: the names the code compares with
    (a custom task spelled otherwise was looked up as a named task and refused as one). Named tasks
    keep the user's spelling: ``tasks.canonical`` matches them in any case, and messages show what
    the user wrote."""
    plain = name.strip().lower()
    return plain if plain in SPECIAL_TASK_NAMES else name


def labels_as_text(value: object) -> object:
    """``labels: [0, 1]`` names the labels a file holds as ``0`` and ``1``: integers become those
    strings (anything else is left for the field's own type check)."""
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value
