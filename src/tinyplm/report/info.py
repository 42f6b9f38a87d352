"""The typed payloads of a run record: how each stage was made (:class:`StageInfo`) and the run's own
facts (:class:`RunInfo`), with the smaller records they hold.

In results.json (schema 3) each is its :meth:`to_dict`: the fields that differ from their defaults,
under their own names, nested records as objects. Schema 1 and 2 wrote both as free ``info`` dicts;
:meth:`StageInfo.from_v2` and :meth:`RunInfo.from_v2` read those (a schema-1 stage's info is first
brought to schema 2 by ``records``). ``from_dict`` reads schema 3 and raises ``ValueError`` naming a
key it does not know.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any

from tinyplm.evaluate.agreement import Agreement
from tinyplm.evaluate.roc import RocCurve


def to_plain(obj: Any) -> dict[str, Any]:
    """The fields of dataclass ``obj`` that differ from their defaults, nested records as dicts."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        if value != default:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if is_dataclass(value):
        return value.to_dict() if hasattr(value, "to_dict") else to_plain(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def from_plain(cls: type, data: dict[str, Any], nested: dict[str, Callable[[Any], Any]] | None = None):
    """``cls`` from the dict :func:`to_plain` made; ``nested`` reads the fields that hold records.
    Raises ``ValueError`` naming a key ``cls`` has no field for."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {unknown[0]!r}; its fields: {sorted(names)}")
    nested = nested or {}
    return cls(**{k: nested[k](v) if k in nested and v is not None else v for k, v in data.items()})


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(kw_only=True)
class TrainingInfo:
    """One training stage of a model (the teacher's fine-tuning, a student's stage, a recovery).

    ``stage``: its name in the recipe ("" for a student's only stage; None for the teacher's
    fine-tuning and a recovery); ``data``: what it trained on (task, augmented, corpus);
    ``teacher``: which teacher taught it (finetuned, base, a model dir); ``examples``: training
    examples; ``objective``: its objective's non-zero terms as the recipe set them;
    ``finetune_method``: full, lora, bitfit ...; ``steps``, ``best_step`` (the checkpoint kept) and
    ``stopped_by`` (epochs, max_steps, budget, deadline); ``budget_minutes``; ``train_seconds``:
    training time (a TF-IDF student: its fit); ``precision`` / ``eval_precision`` of training and of
    its dev checks; ``trainable_params`` / ``total_params`` / ``trainable_share``: what its method
    updated; ``peak_rss_mib`` and ``rss_scope`` (stage or process): its peak memory;
    ``history``: its dev evaluations (``step``, ``elapsed_s`` and the metrics); ``reused``: reloaded
    from the run dir, not trained again (its figures are those of the run that trained it).
    """

    stage: str | None = None
    data: str | None = None
    teacher: str | None = None
    examples: int | None = None
    objective: dict[str, Any] = field(default_factory=dict)
    finetune_method: str | None = None
    steps: int | None = None
    best_step: int | None = None
    stopped_by: str | None = None
    budget_minutes: float | None = None
    train_seconds: float | None = None
    precision: str | None = None
    eval_precision: str | None = None
    trainable_params: int | None = None
    total_params: int | None = None
    trainable_share: float | None = None
    peak_rss_mib: float | None = None
    rss_scope: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    reused: bool = False

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingInfo:
        return from_plain(cls, data)

    @classmethod
    def from_v2(cls, data: dict[str, Any]) -> TrainingInfo:
        """A schema-2 training dict (a TF-IDF fit's ``fit_seconds`` is its ``train_seconds``)."""
        known = _known(cls, data)
        if "fit_seconds" in data and "train_seconds" not in data:
            known["train_seconds"] = data["fit_seconds"]
        known["reused"] = bool(known.get("reused", False))
        return cls(**known)


#: Schema-2 keys of a stage's info that were its (one) training stage's, written flat beside the rest.
_TRAINING_KEYS = frozenset(f.name for f in fields(TrainingInfo)) - {"reused"} | {"fit_seconds"}


@dataclass(kw_only=True)
class WordVectorsInfo:
    """The word2vec or GloVe vectors of a classic student: ``kind``, and either ``cached`` (the file
    they were read from) or how they were trained (``paragraphs``, ``words``, ``train_seconds``)."""

    kind: str
    cached: str | None = None
    paragraphs: int | None = None
    words: int | None = None
    train_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WordVectorsInfo:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class BiLMInfo:
    """The biLM under an ELMo-style student: pre-trained on ``paragraphs`` (``held_out`` kept
    aside) for ``steps`` in ``train_seconds``; held-out ``perplexity`` of both LMs against a
    unigram model's over ``predictions`` words; ``reused``: the folder it was read from instead."""

    paragraphs: int | None = None
    held_out: int | None = None
    steps: int | None = None
    train_seconds: float | None = None
    perplexity: float | None = None
    unigram_perplexity: float | None = None
    predictions: int | None = None
    reused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BiLMInfo:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class StaticTableInfo:
    """The table of a static student: ``pieces`` kept of the tokenizer's ``vocabulary``, the share
    of variance the PCA kept, the seconds it took to make, and how many rows are means of the
    teacher's states in the training texts (``vectors: contextual``; 0 otherwise)."""

    pieces: int
    vocabulary: int
    pca_variance_kept: float | None = None
    table_seconds: float | None = None
    contextual_pieces: int = 0

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StaticTableInfo:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class ClassicInfo:
    """What made a classic student (``models.classic``) besides its training: ``words`` of its
    vocabulary, its word ``vectors`` and the share of its words they cover (``vocabulary_found``),
    a static student's ``table``, an ELMo-style student's ``bilm``, a TF-IDF fit's ``features``,
    ``iterations`` and ``class_weight``."""

    words: int | None = None
    vectors: WordVectorsInfo | None = None
    vocabulary_found: float | None = None
    table: StaticTableInfo | None = None
    bilm: BiLMInfo | None = None
    features: int | None = None
    iterations: int | None = None
    class_weight: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassicInfo:
        return from_plain(cls, data, {"vectors": WordVectorsInfo.from_dict, "table": StaticTableInfo.from_dict,
                                      "bilm": BiLMInfo.from_dict})


_CLASSIC_KEYS = frozenset(f.name for f in fields(ClassicInfo))


@dataclass(kw_only=True)
class CompressInfo:
    """One compress step's stage: ``step`` (the recipe's step as written, its recovery left out),
    ``step_seconds``, the heads each layer ``kept`` (prune_heads), the layers ``dropped``
    (drop_layers), the encoder's final ``sparsity`` (magnitude, movement) and ``sparse_bytes`` (its
    CSR form on disk), its ``agreement`` with its parent (runtime and precision steps), its
    ``recover``y training, and ``details``: the rest of what the step reported, which each kind
    names itself (``compress.steps``: widths before and after, ranks, vocabulary sizes, runtime and
    int8 parts, the runtime chosen ...), shown as it is."""

    step: dict[str, Any] = field(default_factory=dict)
    step_seconds: float | None = None
    kept: list[list[int]] | None = None
    dropped: list[int] | None = None
    sparsity: float | None = None
    sparse_bytes: int | None = None
    agreement: Agreement | None = None
    recover: TrainingInfo | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompressInfo:
        return from_plain(cls, data, {"agreement": lambda d: Agreement(**d), "recover": TrainingInfo.from_dict})

    @classmethod
    def from_step(cls, step: dict[str, Any], reported: dict[str, Any], **known: Any) -> CompressInfo:
        """The step's record from what ``compress.apply_step`` (and a scheduled step's finish)
        ``reported``: the keys with a field here go to it, the rest to ``details``."""
        names = {f.name for f in fields(cls)} - {"step", "details", "recover", "agreement"}
        typed = {k: v for k, v in reported.items() if k in names}
        details = {k: v for k, v in reported.items() if k not in names}
        return cls(step=step, **typed, details=details, **known)

    @classmethod
    def from_v2(cls, data: dict[str, Any]) -> CompressInfo:
        """A schema-2 compressed stage's info (``step``, what the step reported, ``step_seconds``,
        ``recover``, ``agreement_with_parent``, ``sparse_bytes``), flat in one dict."""
        rest = dict(data)
        recover, agreement = rest.pop("recover", None), rest.pop("agreement_with_parent", None)
        return cls.from_step(rest.pop("step", {}), rest,
                             recover=TrainingInfo.from_v2(recover) if isinstance(recover, dict) else None,
                             agreement=Agreement(**agreement) if isinstance(agreement, dict) else None)


@dataclass(kw_only=True)
class StageInfo:
    """How a measured stage was made, for the report.

    ``source``: the teacher's checkpoint (as the recipe names it); ``init``: how a student was
    initialised; ``training``: its training stages in order (one for a fine-tuned teacher and a
    one-stage student, none for a stage that did not train); ``classic``: a classic student's
    vocabulary, vectors, table or biLM; ``compress``: the compress step that made a compressed
    stage; ``runtime_detail``: what ran it, as the runtime says (ONNX Runtime, OpenVINO);
    ``roc``: its ROC curve on the first eval split (binary tasks scored by ROC AUC); ``seeds`` and
    ``seed_std``: each seed's metrics and their spread, where a benchmark reports a stage as the
    mean of several seeds; ``reused``: reloaded whole from the run dir, not made again.
    """

    source: str | None = None
    init: str | None = None
    training: list[TrainingInfo] = field(default_factory=list)
    classic: ClassicInfo | None = None
    compress: CompressInfo | None = None
    runtime_detail: str | None = None
    roc: RocCurve | None = None
    seeds: list[dict[str, float]] | None = None
    seed_std: dict[str, float] | None = None
    reused: bool = False

    @property
    def trained(self) -> TrainingInfo | None:
        """The training whose cost the stage reports: its one training stage, else a compressed
        stage's recovery (None when neither trained parameters)."""
        if len(self.training) == 1 and self.training[0].trainable_params:
            return self.training[0]
        recover = self.compress.recover if self.compress else None
        return recover if recover is not None and recover.trainable_params else None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageInfo:
        return from_plain(cls, data, {
            "training": lambda xs: [TrainingInfo.from_dict(x) for x in xs], "classic": ClassicInfo.from_dict,
            "compress": CompressInfo.from_dict, "roc": RocCurve.from_dict})

    @classmethod
    def from_v2(cls, data: dict[str, Any], compressed: bool = False) -> StageInfo:
        """A schema-2 stage info dict (``compressed``: the stage of a compress step, whose flat keys
        are the step's). Every key a tinyplm of schema 1 or 2 wrote has a field; any other key
        (none that tinyplm wrote: a hand-edited file's) is left out with a ``UserWarning``
        naming it."""
        rest = dict(data)
        own = {k: rest.pop(k) for k in ("source", "init", "runtime_detail", "seeds", "seed_std") if k in rest}
        reused, roc, stages = bool(rest.pop("reused", False)), rest.pop("roc", None), rest.pop("stages", None)
        if compressed or "step" in rest:
            return cls(**own, compress=CompressInfo.from_v2(rest), reused=reused,
                       roc=RocCurve.from_dict(roc) if roc else None)
        classic = {k: rest.pop(k) for k in _CLASSIC_KEYS if k in rest}
        flat = {k: rest.pop(k) for k in _TRAINING_KEYS if k in rest}
        if rest:
            warnings.warn(f"results.json: stage info keys {sorted(rest)} are not part of any schema; left out",
                          stacklevel=2)
        training = [TrainingInfo.from_v2(s) for s in stages] if stages else [TrainingInfo.from_v2(flat)] if flat else []
        return cls(**own, training=training, classic=ClassicInfo.from_dict(classic) if classic else None,
                   roc=RocCurve.from_dict(roc) if roc else None, reused=reused)

    @classmethod
    def from_saved(cls, data: dict[str, Any], compressed: bool = False) -> StageInfo:
        """What ``RunPaths.save_info`` wrote: schema 3 (marked) or the schema-2 dict before it
        (``compressed``: of a compress step's stage)."""
        return cls.from_dict(_unmarked(data)) if data.get(SAVED_MARK) == 3 else cls.from_v2(data, compressed)


#: The key ``RunPaths.save_info`` marks a schema-3 stage file with.
SAVED_MARK = "schema"


def _unmarked(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != SAVED_MARK}


def training_from_saved(data: dict[str, Any]) -> TrainingInfo:
    """A training stage as ``RunPaths.save_info`` wrote it (schema 3, or the schema-2 dict)."""
    return TrainingInfo.from_dict(_unmarked(data)) if data.get(SAVED_MARK) == 3 else TrainingInfo.from_v2(data)
