"""Checks of a task's ``labels``: integers read as the strings a data file holds, and no label
names beside ``regression: true``."""

from __future__ import annotations


def task_labels(data: object) -> object:
    """A ``task`` section as given (a mapping) with :func:`labels_as_text` applied to its ``labels``,
    refused (``ValueError``) when it names labels beside ``regression: true``, which reads a score
    per example and would leave them unused."""
    if not isinstance(data, dict):
        return data
    if data.get("regression") is True and data.get("labels"):
        raise ValueError("labels name classes, and regression: true reads a score per example: drop one of them")
    return {**data, "labels": labels_as_text(data["labels"])} if "labels" in data else data


def labels_as_text(value: object) -> object:
    """``labels: [0, 1]`` names the labels a file holds as ``0`` and ``1``: integers become those
    strings (anything else is left for the field's own type check)."""
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value
