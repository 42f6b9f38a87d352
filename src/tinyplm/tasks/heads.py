"""The head table: what differs per task head, as data that code asks instead of branching on the head.

- ``sequence``: one label (or score) per example: GLUE, custom CSV/JSONL tasks.
- ``span``: the answer's start and end positions in the context: SQuAD.
- ``token``: one label per word (on its first word piece): CoNLL-2003.
- ``embedding``: one vector per text, learnt from a teacher's vectors (no labels).

Each :class:`Head` has one :class:`HeadRow` in :data:`HEADS` (``head.row``), as each encoder family
has one entry in :mod:`tinyplm.models.role_table`: what the head reads (:class:`Reads`, the record
fields of :class:`InputFields`), what its model outputs (with the shape), its labels
(:class:`LabelKind`), its loss (:class:`Loss`), its default metrics, its prediction record (the class
names of :mod:`tinyplm.inference.records`), how agreement between a model and its compressed child is
measured (:class:`AgreementRule`), and the flags the stages read (an encoding subset by example, a
held-out split, class weights, ROC curves, classic students ...). Code asks ``head.row.windows``; it
does not compare ``head == Head.SPAN`` (``tests/tasks/test_head_table.py`` counts such comparisons).

What a later layer *does* per head (an encoder function, a predictor path, an API converter) is code
of that layer: it keeps one :class:`PerHead` table in its own module, whose lookup names the head and
the capability it lacks (``the embedding head has no span answers``) instead of raising ``KeyError``.

``Head`` is a ``StrEnum``: recipes, configs and results.json keep the plain names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Generic, TypeVar

from tinyplm.errors import TinyplmError

T = TypeVar("T")


class Head(StrEnum):
    """A task head (see the module docstring); ``head.row`` is its :class:`HeadRow`."""

    SEQUENCE = "sequence"
    SPAN = "span"
    TOKEN = "token"
    EMBEDDING = "embedding"

    @property
    def row(self) -> HeadRow:
        """This head's row of the head table."""
        return HEADS[self]

    @property
    def per_position(self) -> bool:
        """True when the outputs have a sequence axis (see :attr:`HeadRow.per_position`)."""
        return self.row.per_position

    @property
    def auto_suffix(self) -> str | None:
        """The ``transformers`` class-name suffix of this head (see :attr:`HeadRow.auto_suffix`)."""
        return self.row.auto_suffix

    @classmethod
    def of_architectures(cls, names: Iterable[str]) -> Head:
        """The head that class names (a model's class and its config's ``architectures``) carry;
        :data:`DEFAULT_HEAD` (``sequence``: a bare encoder gets a new classifier) when none names
        another head's class. A head without a class of its own (``embedding``) is never found here."""
        names = list(names)
        for row in HEADS.values():
            if row.head is not DEFAULT_HEAD and row.auto_suffix and any(n.endswith(row.auto_suffix) for n in names):
                return row.head
        return DEFAULT_HEAD


#: The head of a task that names none, and of a checkpoint whose classes name none.
DEFAULT_HEAD = Head.SEQUENCE


class Reads(StrEnum):
    """What one example of a head is, as a reader or a client gives it."""

    TEXT_OR_PAIR = "a text, or a text pair"
    QUESTION_CONTEXT = "a question and its context"
    WORDS = "a sentence split into words"
    TEXT = "a text"


class LabelKind(StrEnum):
    """What a head's labels are (the value is how ``tinyplm tasks`` shows a task without label names)."""

    CLASS_OR_SCORE = "a class id (or a score) per example"
    ANSWER_SPAN = "answer span in the context"
    TAGS = "a tag per word, on its first piece"
    NONE = "none: a vector per text"


class Loss(StrEnum):
    """A head's training loss (``train.prediction`` for logits; the embedding head's in ``distill``)."""

    CLASSES = "cross-entropy over the classes (MSE for a score); KD on the teacher's soft targets"
    SPAN = "cross-entropy over start and end positions; KD per position"
    TAGS = "cross-entropy at labelled pieces; KD per piece"
    VECTORS = "distance to the teacher's vectors"


class AgreementRule(StrEnum):
    """How often a compressed child (another runtime or precision) predicts what its parent does."""

    SAME_LABEL = "same label (a score within 1e-3)"
    SAME_SPAN = "same start and same end position in each window"
    SAME_TAGS = "same tag at every real token"
    MEAN_COSINE = "mean cosine of the two models' vectors"


@dataclass(frozen=True)
class InputFields:
    """The record fields (JSON keys, table columns, API fields) one example of a head is read from by
    default: ``text`` (the text, the question or the words), ``pair`` (the second text or the
    context; ``pair_required``: every example has it), ``id`` (echoed back when present)."""

    text: str
    pair: str | None = None
    pair_required: bool = False
    id: str | None = None


@dataclass(frozen=True)
class HeadRow:
    """One head's row of the table. Shapes: ``batch`` examples (SQuAD: windows), ``seq`` pieces.

    - ``reads``, ``fields``: what one example is, and the record fields it is read from.
    - ``outputs``: what the model outputs, with its shape; ``per_position``: the outputs have a
      sequence axis (span ``(batch, seq, 2)``, token ``(batch, seq, tags)``), so they are cut or
      padded to a batch's width and mean nothing at padding.
    - ``auto_suffix``: the ``transformers`` class-name suffix (``AutoModel<suffix>``,
      ``Bert<suffix>``); None for a head without a task class of its own (``embedding`` uses the
      base ``AutoModel``): it has no classifier to put on or fine-tune; its model is the embedding
      model its dir holds (``models.head_loading.load_for_head`` loads it as such).
    - ``labels``: what its labels are; ``output_names``: the names of the outputs when the head
      fixes them (span: ``start``, ``end``; ``()``: no classifier outputs), None when the task's
      labels name them (classes, tags; ``score`` for a regression task).
    - ``loss``, ``metrics`` (the defaults of a task that names none; ``regression_metrics`` for a
      score), ``records`` (the prediction record classes of :mod:`tinyplm.inference.records`, the
      second for a regression model), ``agreement``.
    - ``subset``: an encoding can be cut to some of its examples (no per-window or per-word
      metadata ties the rows together), so rows can be remembered per example and grouped by length.
    - ``words``: examples come split into words, aligned to pieces by a fast tokenizer's word ids.
    - ``piece_memo``: single texts are encoded whole, so a memo of the tokenizer's pieces per word
      (:mod:`tinyplm.tasks.piece_cache`) gives the same ids.
    - ``windows``: questions are read against their contexts in overlapping windows
      (``doc_stride``, ``max_query_length``) and answered with texts of the context: SQuAD JSON
      in, an answer file out.
    - ``task_texts``: the texts are the task's own kind: GLUE's columns and header-less layouts,
      the spoiler tasks' clean-up and context sentences, Goodreads reviews.
    - ``holdout``: training examples can be held out to choose on (``task.holdout``);
      ``holdout_group``: the example field whose equal values are held out together, so no
      held-out example shares it with a trained one (SQuAD: ``title``, whole articles: a question
      held out alone would have its paragraph trained on through the others); None: one by one;
      ``class_weights``: the classes can be weighed (``class_weights: balanced``); ``roc``: the
      positive class's score metrics (ROC AUC, PR AUC, best F1) and the ROC curve apply (binary
      tasks); ``classic``: classic students (TF-IDF, LSTMs ...) can learn it.
    """

    head: Head
    reads: Reads
    fields: InputFields
    outputs: str
    per_position: bool
    auto_suffix: str | None
    labels: LabelKind
    output_names: tuple[str, ...] | None
    loss: Loss
    metrics: tuple[str, ...]
    records: tuple[str, ...]
    agreement: AgreementRule
    subset: bool
    words: bool
    piece_memo: bool
    windows: bool
    task_texts: bool
    holdout: bool
    class_weights: bool
    roc: bool
    classic: bool
    regression_metrics: tuple[str, ...] = ()
    holdout_group: str | None = None

    @property
    def may_regress(self) -> bool:
        """Whether a task of this head may predict a score (one output) instead of classes."""
        return self.labels is LabelKind.CLASS_OR_SCORE

    @property
    def vectors(self) -> bool:
        """Whether the model's outputs are vectors, judged by how alike they are (the embedding head)."""
        return self.labels is LabelKind.NONE

    @property
    def offsets(self) -> bool:
        """Whether examples are read through a fast tokenizer's character offsets (words aligned to
        pieces, answers cut from contexts): a slow tokenizer (no ``tokenizer.json``) cannot serve it."""
        return self.words or self.windows

    @property
    def piece_labels(self) -> bool:
        """Whether the labels are one per word piece ``(N, width)``, cut to each batch's width."""
        return self.labels is LabelKind.TAGS

    @property
    def named_by_labels(self) -> bool:
        """Whether the task's labels (classes, tags) name the model's outputs."""
        return self.output_names is None

    @property
    def auto_class(self) -> str:
        """The ``transformers`` Auto class that loads this head (``AutoModelForQuestionAnswering``)."""
        return "AutoModel" + (self.auto_suffix or "")

    @property
    def class_suffix(self) -> str:
        """The class-name suffix of a family's class for this head (``BertForTokenClassification``;
        ``BertModel`` for a head without a task class)."""
        return self.auto_suffix or "Model"

    def output_labels(self, labels: Iterable[str], is_regression: bool) -> tuple[str, ...]:
        """The names of the model's outputs, in order (its ``id2label``): :attr:`output_names` when
        the head fixes them, else ``("score",)`` for a regression task, else the task's ``labels``."""
        if self.output_names is not None:
            return self.output_names
        return ("score",) if is_regression else tuple(labels)


_ROWS = (
    HeadRow(Head.SEQUENCE, Reads.TEXT_OR_PAIR, InputFields("text", "text_pair"),
            outputs="logits (batch, labels); (batch, 1) for a score", per_position=False,
            auto_suffix="ForSequenceClassification", labels=LabelKind.CLASS_OR_SCORE, output_names=None,
            loss=Loss.CLASSES, metrics=("accuracy", "f1_macro"), regression_metrics=("pearson", "spearman"),
            records=("LabelPrediction", "ValuePrediction"), agreement=AgreementRule.SAME_LABEL, subset=True,
            words=False, piece_memo=True, windows=False, task_texts=True, holdout=True, class_weights=True, roc=True,
            classic=True),
    HeadRow(Head.SPAN, Reads.QUESTION_CONTEXT, InputFields("question", "context", pair_required=True, id="id"),
            outputs="start and end logits (batch, seq, 2)", per_position=True, auto_suffix="ForQuestionAnswering",
            labels=LabelKind.ANSWER_SPAN, output_names=("start", "end"), loss=Loss.SPAN,
            metrics=("f1", "exact_match"), records=("AnswerPrediction",), agreement=AgreementRule.SAME_SPAN,
            subset=False, words=False, piece_memo=False, windows=True, task_texts=False, holdout=True,
            class_weights=False, roc=False, classic=False, holdout_group="title"),
    HeadRow(Head.TOKEN, Reads.WORDS, InputFields("tokens"), outputs="tag logits (batch, seq, tags)",
            per_position=True, auto_suffix="ForTokenClassification", labels=LabelKind.TAGS, output_names=None,
            loss=Loss.TAGS, metrics=("f1", "precision", "recall"), records=("TagsPrediction",),
            agreement=AgreementRule.SAME_TAGS, subset=False, words=True, piece_memo=False, windows=False,
            task_texts=False, holdout=False, class_weights=False, roc=False, classic=False),
    HeadRow(Head.EMBEDDING, Reads.TEXT, InputFields("text"), outputs="a vector per text (batch, dim)",
            per_position=False, auto_suffix=None, labels=LabelKind.NONE, output_names=(), loss=Loss.VECTORS,
            metrics=("spearman", "ndcg_at_10"), records=("VectorPrediction",), agreement=AgreementRule.MEAN_COSINE,
            subset=True, words=False, piece_memo=True, windows=False, task_texts=False, holdout=False,
            class_weights=False, roc=False, classic=False),
)

#: The head table: one :class:`HeadRow` per :class:`Head`.
HEADS: Mapping[Head, HeadRow] = MappingProxyType({row.head: row for row in _ROWS})


def head_of_name(name: Head | str) -> Head:
    """``name`` as a :class:`Head`; raises ``TinyplmError`` naming the heads for an unknown one."""
    try:
        return Head(name)
    except ValueError:
        raise TinyplmError(f"unknown head {name!r}; expected one of {', '.join(Head)}") from None


class PerHead(Generic[T]):
    """A later layer's code that differs per head: ``table[head]`` is the entry of ``head`` (a
    function, a class), or a ``TinyplmError`` naming the head and the ``capability`` it lacks
    (``the embedding head has no span answers``) where the layer has none for it. A layer keeps one
    such table per module, beside the code it picks; the facts stay in :data:`HEADS`."""

    def __init__(self, capability: str, entries: Mapping[Head, T]) -> None:
        stray = [key for key in entries if not isinstance(key, Head)]
        if stray:
            raise TypeError(f"a PerHead table is keyed by Head members, got {stray!r}")
        self.capability = capability
        self._entries: Mapping[Head, T] = MappingProxyType(dict(entries))

    def __getitem__(self, head: Head | str) -> T:
        key = head_of_name(head)
        try:
            return self._entries[key]
        except KeyError:
            have = ", ".join(self._entries) or "none"
            raise TinyplmError(f"the {key} head has no {self.capability} (heads that have: {have})") from None

    def __contains__(self, head: object) -> bool:
        return head in self._entries

    def __iter__(self) -> Iterator[Head]:
        return iter(self._entries)

    @property
    def missing(self) -> tuple[Head, ...]:
        """The heads this table has no entry for."""
        return tuple(h for h in Head if h not in self._entries)

    def __repr__(self) -> str:
        return f"PerHead({self.capability!r}, {', '.join(self._entries)})"
