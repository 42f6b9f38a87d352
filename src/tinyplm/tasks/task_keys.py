"""Which ``task`` keys of a recipe each task reads: one table, checked before any data is read.

A key a task does not read was silently ignored: ``name: sst2`` with ``train_file: mine.csv``
trained on GLUE's SST-2, and ``doc_stride`` on a sentence task did nothing. A key set to anything
but its default on a task that does not read it is refused, naming the key and the tasks that read
it. (The check lives here, not in the recipe schema, because the task names and their aliases are
this package's.)
"""

from __future__ import annotations

from tinyplm.errors import RecipeError
from tinyplm.tasks.spoilers import CONTEXT_TASKS

CUSTOM = ("custom",)
SQUAD = ("squad", "squad_v2")
EMBEDDING = ("embedding",)

#: key of the recipe's ``task`` section -> the tasks (canonical names) that read it; the keys not
#: named here are read by every task or checked by the schema itself.
READ_BY: dict[str, tuple[str, ...]] = {
    "train_file": CUSTOM + SQUAD,
    "dev_file": CUSTOM + SQUAD,
    "text_column": CUSTOM,
    "text_pair_column": CUSTOM,
    "label_column": CUSTOM,
    "labels": CUSTOM,
    "regression": CUSTOM,
    "doc_stride": SQUAD,
    "max_query_length": SQUAD,
    "train_articles": ("squad",),
    "context_sentences": CONTEXT_TASKS,
    "context_after": CONTEXT_TASKS,
    "eval_max_length": EMBEDDING,
}

#: What to do instead, where the key suggests the user meant another task.
HINTS: dict[str, str] = {
    "train_file": "; your own data file is a custom task (task.name: custom)",
    "dev_file": "; your own data file is a custom task (task.name: custom)",
    "text_column": "; columns are read from your own files (task.name: custom)",
    "text_pair_column": "; columns are read from your own files (task.name: custom)",
    "label_column": "; columns are read from your own files (task.name: custom)",
    "labels": "; a GLUE task's labels are fixed",
    "context_sentences": " (sentences of whole reviews or pages); this task has no neighbouring sentences",
    "context_after": " (sentences of whole reviews or pages); this task has no neighbouring sentences",
}


def check_task_keys(spec, task: str) -> None:
    """Refuse each key of ``spec`` (a ``TaskSpec``) set to other than its default that ``task`` (its
    canonical name) does not read (:data:`READ_BY`): ``RecipeError`` naming ``task.KEY``, the value,
    the tasks that read it and, where one helps, what to do instead."""
    fields = type(spec).model_fields
    for key, readers in READ_BY.items():
        value = getattr(spec, key)
        if task in readers or value == fields[key].default:
            continue
        raise RecipeError(f"task.{key} is for {' and '.join(readers)}{HINTS.get(key, '')}; task '{task}' does not "
                          f"read it (task.{key}: {value!r}); remove it or name the task that reads it")
