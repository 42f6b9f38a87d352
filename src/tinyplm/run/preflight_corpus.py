"""The preflight checks of the stages that read the recipe's ``corpus`` section: every corpus path
is found, each table is read whole (``corpus.text_field`` present on every row; text files are
read once, by the stage), and a ``data: task+corpus`` stage is on a task it can add unlabelled
texts to. Run by
:func:`tinyplm.run.preflight.preflight`, before anything is written or trained."""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import DataError, RecipeError
from tinyplm.pretrain.corpus import corpus_files, read_corpus
from tinyplm.pretrain.corpus_tables import is_table
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head, LabelKind

#: The stage data kinds that read the recipe's corpus section.
CORPUS_KINDS = ("corpus", "task+corpus")


def check_corpus_stages(cfg: RunConfig, data: TaskData) -> None:
    """Raise ``RecipeError`` for a ``data: task+corpus`` stage on a task whose examples are not
    single sentences with one label (a pair task, span, token or embedding task: a corpus text is
    one sentence, and the embedding task takes corpus text through ``task.train_texts``), and
    ``DataError`` naming ``corpus.paths`` when a stage reads a corpus with a missing path or a table
    that cannot be read."""
    stages = [(student_name(s), st) for s in cfg.students for st in s.stage_specs()]
    mixed = [name for name, st in stages if st.data == "task+corpus"]
    if mixed:
        row = Head(data.head).row
        paired = next((ex for ex in data.train.examples if getattr(ex, "text_pair", None) is not None), None)
        if row.labels is not LabelKind.CLASS_OR_SCORE or paired is not None:
            kind = "sentence-pair" if paired is not None else f"{data.head}-head"
            raise RecipeError(f"student {mixed[0]}: data: task+corpus adds single corpus texts to a single-sentence "
                              f"task's examples; task '{data.task}' is a {kind} task: use data: task"
                              + (" (an embedding task's corpus texts are task.train_texts: corpus)"
                                 if row.labels is LabelKind.NONE else ""))
    if cfg.corpus is not None and any(st.data in CORPUS_KINDS for _, st in stages):
        c = cfg.corpus
        try:
            tables = [f for f in corpus_files([Path(p) for p in c.paths]) if is_table(f)]
            if tables:  # small, and where a recipe goes wrong (its text field); books are read by the stage
                read_corpus(tables, text_field=c.text_field)
        except DataError as exc:
            raise DataError(f"corpus.paths: {exc}") from None
