"""What differs between two resolved recipes (a run dir's stored ``config.resolved.yaml`` and the
recipe a ``--resume`` brings), key by key, for the message that refuses the resume; and the keys
no stage of a run reads (:data:`FREE_KEYS`), which a resume may change."""

from __future__ import annotations

import re
from typing import Any

import yaml

#: Keys a resume may change: none of the run's stages reads them (the run dir is already chosen; the
#: name titles its reports and tracking, and ``finetune``/``distill`` take it from ``--out``; the
#: cache only spares recomputing the teacher's logits).
FREE_KEYS = frozenset({"output_dir", "name", "cache_dir"})


def folder_run_name(folder: str) -> str:
    """A run name (``config.schema.NAME_PATTERN``) for a run kept in a folder named ``folder``
    (``finetune`` and ``distill`` name a run after ``--out``): each run of characters a name cannot
    hold (spaces, accents) is one ``-``. The folder itself is kept as it is."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", folder).lstrip("_.-").rstrip("-") or "run"  # from a letter or digit


def recipe_changes(old_text: str, new_text: str) -> list[str]:
    """``"KEY: OLD -> NEW"`` for every dotted key (list items by index) whose value differs between
    the two recipes' YAML texts, in the order of the new one; ``[]`` when they are the same. A text
    that is not a YAML mapping counts as one change of the whole recipe."""
    try:
        old, new = yaml.safe_load(old_text), yaml.safe_load(new_text)
    except yaml.YAMLError:
        return ["recipe: the stored one is not YAML"]
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["recipe: not a mapping"]
    before, after = _flat(old), _flat(new)
    keys = list(dict.fromkeys([*after, *before]))
    return [f"{key}: {_shown(before.get(key, _GONE))} -> {_shown(after.get(key, _GONE))}"
            for key in keys if before.get(key, _GONE) != after.get(key, _GONE)]


def resume_blockers(old_text: str, new_text: str) -> list[str]:
    """:func:`recipe_changes` less the keys a resume may change (:data:`FREE_KEYS`): what
    :func:`tinyplm.files.claim_run_dir` refuses a ``--resume`` over."""
    return [line for line in recipe_changes(old_text, new_text) if line.split(": ", 1)[0] not in FREE_KEYS]


class _Gone:
    def __repr__(self) -> str:
        return "(not set)"


_GONE = _Gone()


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, _Gone) else yaml.safe_dump(value, default_flow_style=True).strip()
    text = text.removesuffix("\n...").strip()
    return text if len(text) <= 60 else text[:57] + "..."
