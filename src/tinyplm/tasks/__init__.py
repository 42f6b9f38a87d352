"""Tasks: one small :class:`Task` per dataset, found by name.

    >>> task = get("sst-2")                   # case-insensitive; "SST-2", "sst_2" work too
    >>> data = task.load()                    # TaskData(train, evals, labels, metrics, ...)

GLUE files are looked up in :func:`resolve_glue_dir` (explicit ``data_dir`` > env
``TINYPLM_DATA`` > ``<repo>/../shared/data/glue``). Your own CSV/JSONL files: :func:`custom_task`.
Beyond GLUE: ``squad`` (v1.1; span head), ``squad_v2`` (official files only), ``conll2003``
(NER; token head) and the spoiler tasks ``goodreads_spoilers``, ``goodreads_spoilers_reviews`` and
``tvtropes_spoilers`` (:mod:`tinyplm.tasks.spoilers`), found under the data root (:func:`resolve_data_root`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.tasks.base import METRIC_NAMES, Example, Split, Task, TaskData
from tinyplm.tasks.conll import conll_task
from tinyplm.tasks.custom import custom_task
from tinyplm.tasks.embedding_task import EMBEDDING_TASK, embedding_task_data
from tinyplm.tasks.glue import GLUE_SPECS, glue_task
from tinyplm.tasks.holdout import hold_out
from tinyplm.tasks.paths import resolve_data_root, resolve_glue_dir
from tinyplm.tasks.spoilers import BINARY, SPOILER_NAMES, SPOILER_TASKS, spoiler_task
from tinyplm.tasks.squad import squad_task
from tinyplm.tasks.task_keys import check_task_keys

__all__ = [
    "METRIC_NAMES",
    "Example",
    "Split",
    "Task",
    "TaskData",
    "custom_task",
    "get",
    "load_task",
    "named_labels",
    "names",
    "resolve_data_root",
    "resolve_glue_dir",
]

#: Extra spellings beyond the case/dash/underscore-insensitive names ("SST-2" -> "sst2").
ALIASES: dict[str, str] = {"sst": "sst2", "sts": "stsb", "mnlim": "mnli", "mnlimm": "mnli", "squadv2": "squad_v2",
                            "squad2": "squad_v2", "squadv11": "squad", "squad11": "squad", "conll": "conll2003",
                            "conll03": "conll2003", "ner": "conll2003", "goodreads": "goodreads_spoilers",
                            "goodreadsspoilers": "goodreads_spoilers", "tvtropes": "tvtropes_spoilers",
                            "goodreadsspoilersreviews": "goodreads_spoilers_reviews",
                            "goodreadsreviews": "goodreads_spoilers_reviews", "tvtropesspoilers": "tvtropes_spoilers"}
#: Tasks beyond GLUE: SQuAD (span head), CoNLL-2003 (token head), the spoiler tasks (sequence head).
OTHER_TASKS: tuple[str, ...] = ("squad", "squad_v2", "conll2003", *SPOILER_TASKS)


def names() -> list[str]:
    """The registered task names: GLUE in its order, then SQuAD, CoNLL-2003 and the spoiler tasks."""
    return list(GLUE_SPECS) + list(OTHER_TASKS)


def canonical(name: str) -> str | None:
    """The registered name for ``name`` or an alias of it ("STS-B" -> "stsb"), else None."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(".", "")
    key = ALIASES.get(key, key)
    return key if key in GLUE_SPECS or key in OTHER_TASKS else None


def get(name: str, data_dir: str | Path | None = None) -> Task:
    """The task called ``name``, its files resolved against the GLUE folder.

    ``data_dir`` is the data root or GLUE folder (see :func:`resolve_glue_dir`). Raises
    ``TinyplmError`` for an unknown name, suggesting the nearest known one. Files are not read
    here, so a missing folder only fails on ``Task.read``.
    """
    key = canonical(name)
    if key is None and name.strip().lower() == "custom":
        raise TinyplmError(f"task 'custom' reads your own CSV/JSONL files, named by a recipe's task section (run, "
                           f"finetune and distill also take them as task.train_file=... task.dev_file=...); this "
                           f"command reads a named task: {', '.join(names())}")
    if key is None:
        hint = did_you_mean(name.strip().lower(), names()) or "."
        known = ", ".join(names())
        raise TinyplmError(
            f"unknown task '{name}'{hint} Known tasks: {known} "
            "(for your own CSV/JSONL files use a custom task)"
        )
    if key == "conll2003":
        return conll_task(resolve_data_root(data_dir))
    if key in ("squad", "squad_v2"):
        return squad_task(resolve_data_root(data_dir), version="2.0" if key == "squad_v2" else "1.1")
    if key in SPOILER_TASKS:
        return spoiler_task(key, resolve_data_root(data_dir))
    return glue_task(key, resolve_glue_dir(data_dir))


def load_task(spec, corpus_texts: Callable[[], list[str]] | None = None, *, check_keys: bool = True,
              train: bool = True) -> TaskData:
    """Read a recipe's task (a ``TaskSpec``): GLUE by name, a custom CSV/JSONL task, or the
    ``embedding`` task (:func:`~tinyplm.tasks.embedding_task.embedding_task_data`; ``corpus_texts``
    reads the run's corpus section's paragraphs when its ``train_texts`` name ``corpus``).

    ``check_keys``: refuse keys the task does not read (:mod:`tinyplm.tasks.task_keys`); off for a
    finished run's stored recipe. ``train`` False: the eval splits alone (a GLUE, custom or spoiler
    task's train file is not read; no held-out split is cut from it). Raises ``TinyplmError``
    subclasses naming the missing key, file or line."""
    from tinyplm.errors import RecipeError

    embedding = spec.name.strip().lower() == EMBEDDING_TASK
    name = EMBEDDING_TASK if embedding else "custom" if spec.name == "custom" else canonical(spec.name)
    if name is not None and check_keys:  # an unknown name is named by get() below
        check_task_keys(spec, name)
    if embedding:
        return embedding_task_data(spec, corpus_texts)
    if spec.name == "custom":
        if not spec.train_file or not spec.dev_file:
            lacking = " and ".join(k for k in ("task.train_file", "task.dev_file") if not getattr(spec, k[5:]))
            raise RecipeError(f"task.name 'custom' needs {lacking}, your CSV or JSON-lines files: in the recipe's "
                              "task section, or after a command's options (task.train_file=train.csv "
                              "task.dev_file=dev.csv)")
        task = custom_task(
            "custom", Path(spec.train_file), Path(spec.dev_file), spec.text_column, spec.label_column,
            spec.text_pair_column, spec.labels, spec.regression,
        )
    elif canonical(spec.name) in ("squad", "squad_v2"):
        key = canonical(spec.name)
        task = squad_task(resolve_data_root(spec.data_dir), version="2.0" if key == "squad_v2" else "1.1",
                          train_file=spec.train_file, dev_file=spec.dev_file, train_articles=spec.train_articles,
                          doc_stride=spec.window_stride(), max_query_length=spec.max_query_length)
    elif canonical(spec.name) in SPOILER_TASKS:
        task = spoiler_task(canonical(spec.name), resolve_data_root(spec.data_dir), spec.context_sentences,
                            spec.context_after)
    else:
        task = get(spec.name, spec.data_dir)
    if spec.class_weights is not None:
        task = replace(task, class_weights=spec.class_weights)
    data = task.load(train=train)
    if not spec.holdout or not train:
        return data
    return hold_out(data, spec.holdout, spec.holdout_seed, spec.holdout_min_words, spec.holdout_drop_parts,
                    context=bool(spec.context_sentences or spec.context_after))


def named_labels(task: str | None, labels: tuple[str, ...]) -> tuple[str, ...]:
    """``labels`` (a saved model's ``id2label`` values) with the names of ``task``'s labels where
    they are that task's raw label values: a model saved before label names were recorded
    (SST-2 ``("0", "1")``) answers ``("negative", "positive")`` like one saved since."""
    key = canonical(task or "")
    spec = GLUE_SPECS.get(key)
    if spec is not None and labels == spec.labels:
        return spec.label_names
    if key in SPOILER_TASKS and labels == BINARY:
        return SPOILER_NAMES
    return labels
