"""The nine GLUE tasks, read from the original GLUE-format TSV files.

We read the TSVs ourselves with ``csv`` (tab delimiter, ``quoting=csv.QUOTE_NONE``) rather than
through ``datasets``: GLUE files do not escape quote characters, so any quoting-aware reader can
swallow several lines into one field; and we want every bad row reported as ``file:line``.

Each task is a :class:`GlueSpec` (folder, columns, labels, metrics); :func:`glue_task` turns it
into a :class:`~tinyplm.tasks.base.Task` whose files are resolved against a GLUE data folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tinyplm.tasks.base import Example, Task
from tinyplm.tasks.io import at, no_examples
from tinyplm.tasks.readers.fields import Fields, Labels, sequence_rows
from tinyplm.tasks.readers.rows import file_lines, items
from tinyplm.tasks.readers.table import first_is_header, fixed_columns, read_table, require_columns

BINARY = ("0", "1")
NLI2 = ("entailment", "not_entailment")


@dataclass(frozen=True)
class GlueSpec:
    """How to read one GLUE task.

    ``text``/``pair``/``label`` are column names: looked up in the file's header line, or in
    ``columns`` for files without a header (CoLA). ``score_bounds`` is set for regression (STS-B).
    ``files`` maps split name -> file name inside ``folder``; ``eval_splits`` are all but train.
    ``labels`` are the values the label column holds; ``names`` what each means (what models
    answer: SST-2's ``1`` is ``positive``), when the values are not names already.
    """

    name: str
    folder: str
    text: str
    pair: str | None
    label: str
    labels: tuple[str, ...]
    metrics: tuple[str, ...]
    description: str
    columns: tuple[str, ...] | None = None
    score_bounds: tuple[float, float] | None = None
    files: dict[str, str] = field(default_factory=lambda: {"train": "train.tsv", "dev": "dev.tsv"})
    metric_suffix: dict[str, str] = field(default_factory=dict)
    names: tuple[str, ...] = ()

    @property
    def label_names(self) -> tuple[str, ...]:
        """The name of each label value (the values themselves where they are names)."""
        return self.names or self.labels

    @property
    def is_regression(self) -> bool:
        """True for a score column (STS-B)."""
        return self.score_bounds is not None

    @property
    def eval_splits(self) -> tuple[str, ...]:
        """Every split but train, in file order."""
        return tuple(split for split in self.files if split != "train")


GLUE_SPECS: dict[str, GlueSpec] = {
    spec.name: spec
    for spec in (
        GlueSpec(
            "cola", "CoLA", "sentence", None, "label", BINARY, ("mcc",),
            "grammatical acceptability of one sentence (no header line)",
            columns=("source", "label", "original_label", "sentence"), names=("unacceptable", "acceptable"),
        ),
        GlueSpec(
            "sst2", "SST-2", "sentence", None, "label", BINARY, ("accuracy",),
            "sentiment of one movie-review sentence", names=("negative", "positive"),
        ),
        GlueSpec(
            "mrpc", "MRPC", "#1 String", "#2 String", "Quality", BINARY, ("f1", "accuracy"),
            "are two news sentences paraphrases", names=("not_equivalent", "equivalent"),
        ),
        GlueSpec(
            "stsb", "STS-B", "sentence1", "sentence2", "score", (), ("pearson", "spearman"),
            "similarity score 0-5 of a sentence pair (regression)",
            score_bounds=(0.0, 5.0),
        ),
        GlueSpec(
            "qqp", "QQP", "question1", "question2", "is_duplicate", BINARY, ("accuracy", "f1"),
            "are two Quora questions duplicates", names=("not_duplicate", "duplicate"),
        ),
        GlueSpec(
            "mnli", "MNLI", "sentence1", "sentence2", "gold_label",
            ("contradiction", "entailment", "neutral"), ("accuracy",),
            "3-way entailment, matched and mismatched genres",
            files={
                "train": "train.tsv",
                "dev_matched": "dev_matched.tsv",
                "dev_mismatched": "dev_mismatched.tsv",
            },
            metric_suffix={"dev_mismatched": "_mm"},
        ),
        GlueSpec(
            "qnli", "QNLI", "question", "sentence", "label", NLI2, ("accuracy",),
            "does the sentence answer the question",
        ),
        GlueSpec(
            "rte", "RTE", "sentence1", "sentence2", "label", NLI2, ("accuracy",),
            "2-way textual entailment",
        ),
        GlueSpec(
            "wnli", "WNLI", "sentence1", "sentence2", "label", BINARY, ("accuracy",),
            "Winograd pronoun resolution as entailment", names=("not_entailment", "entailment"),
        ),
    )
}


def glue_task(name: str, glue_dir: Path) -> Task:
    """The :class:`Task` for GLUE task ``name`` (a key of ``GLUE_SPECS``) under ``glue_dir``.

    Raises ``KeyError`` for an unknown name (the registry in ``tinyplm.tasks`` gives the
    user-facing error).
    """
    spec = GLUE_SPECS[name]
    folder = Path(glue_dir) / spec.folder
    return Task(
        name=spec.name,
        labels=spec.label_names,
        is_regression=spec.is_regression,
        metrics=spec.metrics,
        files={split: folder / file for split, file in spec.files.items()},
        reader=partial(read_glue_file, spec=spec),
        eval_splits=spec.eval_splits,
        metric_suffix=dict(spec.metric_suffix),
        description=spec.description,
        collection="GLUE",
    )


def read_glue_file(path: Path, split: str, spec: GlueSpec) -> list[Example]:
    """Read the examples of one GLUE TSV file (:func:`~tinyplm.tasks.readers.table.read_table`).

    Columns are found by name in the header line (or in ``spec.columns`` for header-less CoLA).
    Raises ``DataError`` naming ``path`` (and the 1-based line) for a missing column, a row with
    the wrong number of fields, an empty text, an unknown label or a bad score, or no rows.
    """
    header = fixed_columns(spec.columns) if spec.columns is not None else first_is_header
    table = read_table(file_lines(path), str(path), tsv=True, header=header)
    require_columns(table.names, [spec.text, spec.label, spec.pair], at(path, table.header_line or 1))
    labels = Labels(spec.labels, spec.is_regression, spec.score_bounds)
    examples = items(sequence_rows(table.rows, Fields(spec.text, spec.pair, spec.label), labels, path))
    if not examples:
        raise no_examples(path, "only a header line" if spec.columns is None else "")
    return examples
