"""The preflight checks of the stages that read the recipe's ``corpus`` section: every corpus path
is found, each table is read whole (``corpus.text_field`` present on every row; text files are
read once, by the stage; pairs of texts, ``corpus.pair_field``, are read whole), and a ``data:
task+corpus`` stage is on a task it can add unlabelled texts (or pairs) to. Run by
:func:`tinyplm.run.preflight.preflight`, before anything is written or trained."""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.data_sources import MIXED_KINDS, uses_corpus
from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import DataError, RecipeError
from tinyplm.pretrain.corpus import corpus_files, read_corpus, read_corpus_pairs
from tinyplm.pretrain.corpus_tables import is_table
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head, LabelKind


def check_corpus_stages(cfg: RunConfig, data: TaskData) -> None:
    """Raise ``RecipeError`` for a ``data: task+corpus`` (or ``augmented+corpus``) stage on a task
    whose examples are not one text or one pair of texts with one label (a span, token or embedding
    task; the embedding task takes corpus text through ``task.train_texts``), on a pair task without
    ``corpus.pair_field`` or a single-sentence one with it, and for a ``data: corpus`` stage with
    it; and ``DataError`` naming ``corpus.paths`` when a stage reads a corpus with a missing path
    or a table that cannot be read (or, for pairs, a path that is not a table)."""
    stages = [(student_name(s), st) for s in cfg.students for st in s.stage_specs()]
    mixed = [(name, st.data) for name, st in stages if st.data in MIXED_KINDS]
    if mixed:
        _check_examples_fit(*mixed[0], cfg, data)
    single = [name for name, st in stages if st.data == "corpus"]
    if single and cfg.corpus is not None and cfg.corpus.pair_field is not None:
        raise RecipeError(f"student {single[0]}: a 'data: corpus' stage reads single texts; corpus.pair_field "
                          "(pairs of texts) is for data: task+corpus or augmented+corpus on a pair task")
    if cfg.corpus is not None and any(uses_corpus(st.data) for _, st in stages):
        c = cfg.corpus
        try:
            if c.pair_field is not None:  # pairs come from tables only, read whole here
                read_corpus_pairs([Path(p) for p in c.paths], c.text_field, c.pair_field, max_docs=c.max_docs)
                return
            tables = [f for f in corpus_files([Path(p) for p in c.paths]) if is_table(f)]
            if tables:  # small, and where a recipe goes wrong (its text field); books are read by the stage
                read_corpus(tables, text_field=c.text_field)
        except DataError as exc:
            raise DataError(f"corpus.paths: {exc}") from None


def _check_examples_fit(student: str, kind: str, cfg: RunConfig, data: TaskData) -> None:
    """The task's examples are what a corpus row becomes: one text, or a pair with ``pair_field``
    (``kind``: the stage's data, named in the error)."""
    row = Head(data.head).row
    paired = next((ex for ex in data.train.examples if getattr(ex, "text_pair", None) is not None), None)
    where = f"student {student}: data: {kind}"
    if row.labels is not LabelKind.CLASS_OR_SCORE:
        raise RecipeError(f"{where} adds corpus texts to a task's examples; task '{data.task}' is a {data.head}-head "
                          "task: use data: task" + (" (an embedding task's corpus texts are task.train_texts: corpus)"
                                                    if row.labels is LabelKind.NONE else ""))
    pair_field = cfg.corpus.pair_field if cfg.corpus is not None else None
    if paired is not None and pair_field is None:
        raise RecipeError(f"{where}: task '{data.task}' is a sentence-pair task, and a corpus text is one "
                          "sentence: name the column of each row's second text in corpus.pair_field (a table "
                          "with both, e.g. corpus: {paths: [QNLI/dev.tsv], text_field: question, pair_field: "
                          "sentence}), or use data: task")
    if paired is None and pair_field is not None:
        raise RecipeError(f"{where}: task '{data.task}' is a single-sentence task, and corpus.pair_field makes "
                          f"the corpus pairs of texts: drop corpus.pair_field ({pair_field!r})")
