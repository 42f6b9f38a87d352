"""What the stages of one run share: where they write, the teachers, and each kind of training data.

Each piece is built once per run and handed to the stages that need it; no stage reads the whole
recipe. :class:`Teachers` loads a stage's teacher (the fine-tuned one, its source checkpoint, or a
named dir) once, and computes the fine-tuned teacher's logits through the on-disk cache.
:class:`StageData` builds a stage's training data (the task's, its TinyBERT augmentation, or
corpus text, or the task's training set with corpus text beside it) on first use.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tinyplm.config.data_sources import MIXED_KINDS, StageDataKind
from tinyplm.config.schema import AugmentSpec, CorpusSpec, MeasureSpec, TaskSpec
from tinyplm.distill import cached_teacher_logits
from tinyplm.distill.across_tokenizers import student_targets
from tinyplm.distill.cache import KnownRows
from tinyplm.errors import RecipeError
from tinyplm.files import write_json_atomic
from tinyplm.models import fingerprint, is_complete
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import use_bf16
from tinyplm.models.sentence import declare_max_length
from tinyplm.report.info import SAVED_MARK, StageInfo, TrainingInfo
from tinyplm.report.run_info import CutTexts
from tinyplm.tasks.base import Example, Split, TaskData, unlabelled
from tinyplm.tasks.embedding_task import EMBEDDING_TASK
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.train import get_accelerator
from tinyplm.train.progress import JsonlLog

log = logging.getLogger(__name__)

DataKind = StageDataKind  # what a stage trains on, as its recipe's ``data`` names it


@dataclass(frozen=True)
class RunPaths:
    """The layout of a run directory (see docs/quickstart.md, "A run directory")."""

    root: Path

    @property
    def log(self) -> Path:
        return self.root / "logs" / "train.jsonl"

    def checkpoints(self, name: str) -> Path:
        return self.root / "checkpoints" / name

    def work(self, stage: str) -> Path:
        """Scratch space of a compress step (removed once the step is saved)."""
        return self.root / "work" / stage

    def student(self, name: str) -> Path:
        return self.root / "students" / name

    def _info(self, model_dir: Path) -> Path:
        return self.root / "checkpoints" / Path(model_dir).name / "stage.json"

    def save_info(self, model_dir: Path, info: StageInfo | TrainingInfo) -> None:
        """Keep what the report shows about the stage just saved in ``model_dir`` (how it was
        made, or the one training stage it is), so a resumed run reports a stage it reloads as the
        run that made it did. Written as results.json's schema 3, marked so
        (``report.info.SAVED_MARK``): a file of an earlier tinyplm is read as schema 2."""
        write_json_atomic(self._info(model_dir), {SAVED_MARK: 3, **info.to_dict()})

    def finished(self, model_dir: Path) -> dict[str, Any] | None:
        """The report's facts of the stage saved in ``model_dir`` (see :meth:`save_info`) when it
        finished, else None: its dir is whole and those facts were written after it. The caller
        reads them as what it saved (``StageInfo.from_saved``, ``report.info.training_from_saved``)."""
        path = self._info(model_dir)
        if not is_complete(model_dir):
            return None
        if not path.is_file():  # a whole model without its record: a run copied without checkpoints/
            log.warning("%s is whole, but its record %s is missing (a kill right after its save, or a run "
                        "copied without its checkpoints/ folder): the stage is made again", model_dir, path)
            return None
        try:
            facts = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning("%s: damaged (%s); the stage saved in %s is made again", path, exc, model_dir)
            return None
        return facts if isinstance(facts, dict) else None


@dataclass(frozen=True)
class LogitsSource:
    """A saved stage of the run that computes the teacher's logits (``teacher.logits_from``):
    its ``stage`` name, its ``model_dir``, and the ``task`` it is loaded for (labels,
    is_regression, head: :func:`tinyplm.models.head_loading.load_for_head`'s arguments)."""

    stage: str
    model_dir: Path
    task: tuple


class Teachers:
    """The run's teachers: ``finetuned`` (the task teacher, already loaded), ``base`` (its source
    checkpoint before fine-tuning) or a model dir/alias, each loaded once; and the fine-tuned
    teacher's logits on a training set (``cache_dir`` keeps them across runs; within the run, an
    example whose logits were computed for one set is not run through the teacher again for the next)."""

    def __init__(self, finetuned: nn.Module, finetuned_dir: Path, source_dir: Path, precision: str,
                 cache_dir: Path, logits_from: LogitsSource | None = None) -> None:
        self.finetuned, self.finetuned_dir, self.source_dir = finetuned, finetuned_dir, source_dir
        self.precision, self.cache_dir, self.logits_from = precision, cache_dir, logits_from
        self._loaded: dict[tuple[str, bool], nn.Module] = {}
        self._fingerprint: str | None = None
        self._logits_model: nn.Module | None = None
        self._known = KnownRows()

    def get(self, which: str, masked_lm: bool = False) -> nn.Module:
        """A stage's teacher; with ``masked_lm`` loaded with its masked-LM head."""
        if which == "finetuned":
            return self.finetuned
        key = (which, masked_lm)
        if key not in self._loaded:
            from transformers import AutoModel

            from tinyplm.models import resolve_model_dir
            from tinyplm.models.loaded import loaded
            from tinyplm.pretrain.mlm_head import load_mlm

            path = self.source_dir if which == "base" else resolve_model_dir(which)
            self._loaded[key] = load_mlm(path)[0] if masked_lm else \
                loaded(AutoModel.from_pretrained(str(path)), path).eval()
        return self._loaded[key]

    def logits(self, enc: Encoded) -> torch.Tensor:
        """Fine-tuned teacher logits on ``enc`` ``(examples, ...)``, from the cache when present:
        computed by the PyTorch teacher, or by the stage ``logits_from`` names (the teacher on
        another runtime), which must be saved by then."""
        if self._fingerprint is None:  # hashing the teacher's weights once per run is enough
            self._logits_model, self._fingerprint = self._logits_source()
        bf16 = use_bf16(self.precision) if self.logits_from is None else False
        with get_accelerator().main_process_first():
            logits, _ = cached_teacher_logits(self._logits_model, self._fingerprint, enc, self.cache_dir,
                                              bf16=bf16, known=self._known)
        return logits

    def _logits_source(self) -> tuple[nn.Module, str]:
        """(the model that computes the teacher's logits, its fingerprint for the cache)."""
        source = self.logits_from
        if source is None:
            return self.finetuned, fingerprint(self.finetuned_dir)
        if not is_complete(source.model_dir):
            raise RecipeError(f"teacher.logits_from names {source.stage}, which is not saved when the teacher's "
                              f"logits are first needed ({source.model_dir} is missing or incomplete): list its "
                              "student before every student that learns from the teacher")
        model, _ = load_for_head(source.model_dir, *source.task)
        return model, fingerprint(source.model_dir)


class StageData:
    """Training data of a stage by kind (``task``, ``augmented``, ``corpus``, ``task+corpus``,
    ``augmented+corpus``), each built once.

    ``task+corpus`` is the task's training examples followed by the corpus texts as unlabelled
    examples (:func:`~tinyplm.tasks.base.unlabelled`: the hard loss skips them, the fine-tuned
    teacher's logits are their targets): more, and more varied, text to learn the teacher from than
    the task's own; on a pair task, the corpus's pairs (``corpus.pair_field``). A corpus text (or
    pair) that is also an evaluated, held-out or training one is left out. ``augmented+corpus`` is
    the same beside the ``augmented`` examples (the training set and its TinyBERT copies).
    """

    def __init__(self, task: TaskSpec, data: TaskData, tokenizer, train: Encoded, augment: AugmentSpec | None,
                 corpus: CorpusSpec | None, paths: RunPaths, cache_dir: Path) -> None:
        self.task, self.data, self.tokenizer, self.train = task, data, tokenizer, train
        self.augment, self.corpus, self.paths, self.cache_dir = augment, corpus, paths, cache_dir
        self._augmented: Encoded | None = None
        self._augmented_split: Split | None = None
        self._corpus: Encoded | None = None
        self._mixed: dict[str, Split] = {}  # task+corpus, augmented+corpus
        self._mixed_enc: dict[str, Encoded] = {}
        self._texts: list[str] | None = None

    def get(self, kind: DataKind) -> Encoded:
        """The encoded training data of ``kind``."""
        if kind == "augmented":
            if self._augmented is None:
                self._augmented = encode_split(self.split("augmented"), self.tokenizer, self.task.max_length)
            return self._augmented
        if kind == "corpus":
            if self._corpus is None:
                self._corpus = self._make_corpus()
            return self._corpus
        if kind in MIXED_KINDS:
            if kind not in self._mixed_enc:
                self._mixed_enc[kind] = encode_split(self.split(kind), self.tokenizer, self.task.max_length)
            return self._mixed_enc[kind]
        return self.train

    def split(self, kind: DataKind) -> Split:
        """The examples behind :meth:`get` (every kind but ``corpus``), in the same order, for a
        student with its own tokenizer (a classic student): row i of its encoding and of the
        teacher's logits on ``get(kind)`` are the same example."""
        if kind == "augmented":
            if self._augmented_split is None:  # augmented once, encoded only where a stage reads it
                self._augmented_split = self._make_augmented()
            return self._augmented_split
        if kind == "corpus":
            raise ValueError("corpus text has no labels: only the task's (and augmented) splits are examples")
        if kind in MIXED_KINDS:
            if kind not in self._mixed:
                self._mixed[kind] = self._with_corpus(self.split(kind.removesuffix("+corpus")))
            return self._mixed[kind]
        limit = self.task.max_train_examples
        examples = self.data.train.examples[:limit] if limit else self.data.train.examples
        return replace(self.data.train, examples=examples)

    def _make_augmented(self) -> Split:
        """The training examples and their TinyBERT copies (the copies cached by ``augment``)."""
        from tinyplm.distill.augment import augment, augmented_share, resolve_pair
        from tinyplm.pretrain.mlm_head import load_mlm

        page_context = self.task.context_sentences > 0 or self.task.context_after > 0
        a, acc = resolve_pair(self.augment, page_context), get_accelerator()
        mlm, tok = load_mlm(Path(a.mlm))
        examples, rest = augmented_share(self.data.train.examples, a.min_words, a.max_examples)
        log = JsonlLog(self.paths.log, "augment", acc.is_main_process)
        with acc.main_process_first():
            result = augment(examples, mlm, tok, a, self._neighbours(mlm, tok), self.cache_dir, log,
                             progress=acc.is_main_process, max_length=self.task.max_length,
                             mlm_fingerprint=fingerprint(Path(a.mlm)))
        return Split("train-augmented", result.examples + rest, self.data.train.source)  # rest: trained once each

    def _neighbours(self, mlm, tok):
        """Neighbours of multi-piece words: the MLM's input embeddings, or word2vec on a corpus."""
        from tinyplm.distill.augment import EmbeddingNeighbours, word2vec_neighbours
        from tinyplm.pretrain.corpus import read_corpus

        a = self.augment
        if a.neighbours_from == "embeddings":
            return EmbeddingNeighbours(tok, mlm.get_input_embeddings().weight, k=a.neighbours)
        paths, field = (a.word2vec_corpus, None) if a.word2vec_corpus else (self.corpus.paths, self.corpus.text_field)
        texts = read_corpus([Path(p) for p in paths], max_docs=a.word2vec_max_docs, text_field=field)
        with get_accelerator().main_process_first():
            return word2vec_neighbours(texts, k=a.neighbours, seed=a.seed, cache_dir=self.cache_dir)

    def _corpus_texts(self) -> list[str]:
        """The corpus section's texts, read once for the kinds that read it."""
        from tinyplm.pretrain.corpus import read_corpus

        if self._texts is None:
            c = self.corpus
            self._texts = read_corpus([Path(p) for p in c.paths], max_docs=c.max_docs, text_field=c.text_field)
        return self._texts

    def _make_corpus(self) -> Encoded:
        c = self.corpus
        label: int | float = 0.0 if self.data.is_regression else 0
        examples = [Example(t, None, label, i) for i, t in enumerate(self._corpus_texts())]
        return encode_split(Split("corpus", examples, Path(c.paths[0])), self.tokenizer, c.max_length)

    def _corpus_items(self) -> list[tuple[str, str | None]]:
        """The corpus as (text, second text or None): its pairs where it names ``pair_field``."""
        from tinyplm.pretrain.corpus import read_corpus_pairs

        c = self.corpus
        if c.pair_field is None:
            return [(t, None) for t in self._corpus_texts()]
        return read_corpus_pairs([Path(p) for p in c.paths], c.text_field, c.pair_field, max_docs=c.max_docs)

    def _with_corpus(self, task: Split) -> Split:
        """``task``'s examples, then each corpus text or pair (not an evaluated or held-out one, nor a
        training one) as an unlabelled example, read at the task's ``max_length``."""
        seen = {(ex.text, ex.text_pair) for split in self.data.evals.values() for ex in split.examples}
        seen |= {(ex.text, ex.text_pair) for ex in task.examples}
        label = unlabelled(self.data.is_regression)
        extra = [Example(t, p, label, i) for i, (t, p) in enumerate(self._corpus_items(), 1) if (t, p) not in seen]
        return replace(task, name=f"{task.name}+corpus", examples=[*task.examples, *extra])


#: config.json key recording the task a model was trained for (``name``, ``max_length`` and, for
#: SQuAD, the window settings; for a spoiler task read with context, ``context_sentences`` and
#: ``context_after``), so a model copied out of its run still predicts as evaluated.
TASK_KEY = "tinyplm_task"


def stamp_task(model, task: TaskSpec) -> None:
    """Record ``task``'s name and encoding settings in ``model``'s config (saved with it). An
    embedding model also declares ``task.eval_max_length`` as its own token limit (its
    sentence-transformers ``max_seq_length``): its metrics were measured reading that far, so
    ``SentenceTransformer(dir)``, ``tinyplm predict`` and ``serve`` read as far."""
    if task.name.strip().lower() == EMBEDDING_TASK:
        declare_max_length(model, task.eval_max_length)
    record = {"name": task.name, "max_length": task.max_length}
    if task.name.lower().startswith("squad"):
        record.update(doc_stride=task.window_stride(), max_query_length=task.max_query_length)
    if task.context_sentences:
        record["context_sentences"] = task.context_sentences
    if task.context_after:
        record["context_after"] = task.context_after
    if task.name == "custom":  # a copy out of its run dir still says whether it reads pairs
        record["pairs"] = task.text_pair_column is not None
    setattr(model.config, TASK_KEY, record)


@dataclass(frozen=True)
class OwnTokens:
    """A student that reads its own tokenizer's ids (prediction distillation across tokenizers): the
    task's training and eval splits encoded with it. The teacher still reads its own ids; both
    encodings hold the same examples in the same order, so row i of the teacher's logits on its
    encoding is the target of row i of the student's."""

    tokenizer: object
    train: Encoded
    evals: dict[str, Encoded]
    cut: tuple[CutTexts, ...] = ()  # the splits task.max_length cuts in these pieces (the teacher's are logged)


@dataclass
class RunInputs:
    """What the stages of one run share: the task's data, tokenizer and encodings (``train``, and
    one encoding per eval split), the teachers, each kind of training data, the run dir's layout,
    how models are timed, and the students finished so far (by name; a later student may start from one).

    ``own`` is set on the copy a student with its own tokenizer works with (:meth:`with_tokenizer`);
    the ``student_*`` members then give its tokenizer and encodings, else the teacher's."""

    task: TaskSpec
    data: TaskData
    tokenizer: object
    train: Encoded
    evals: dict[str, Encoded]
    teachers: Teachers
    stage_data: StageData
    paths: RunPaths
    measure: MeasureSpec = field(default_factory=MeasureSpec)
    students: dict[str, nn.Module] = field(default_factory=dict)
    student_tokens: dict[str, OwnTokens] = field(default_factory=dict)  # finished students of own tokenizers
    own: OwnTokens | None = None

    def with_tokenizer(self, tokenizer) -> RunInputs:
        """A copy for a student that reads ``tokenizer``'s ids: the task's data encoded with it (the
        shared parts, teachers and finished students, are the same objects)."""
        from tinyplm.evaluate.model_eval import encode_evals
        from tinyplm.run.cut_texts import cut_texts

        t, split = self.task, self.stage_data.split("task")
        train = encode_split(split, tokenizer, t.max_length)
        evals = encode_evals(self.data, tokenizer, t.max_length, t.max_eval_examples)
        cut = cut_texts({"train": (split, train), **{k: (self.data.evals[k], e) for k, e in evals.items()}},
                        tokenizer, t.max_length)
        return replace(self, own=OwnTokens(tokenizer, train, evals, tuple(cut)))

    @property
    def student_tokenizer(self):
        """The tokenizer the student reads (and is saved with)."""
        return self.own.tokenizer if self.own else self.tokenizer

    @property
    def student_train(self) -> Encoded:
        """The task's training examples in the student's ids (row for row those of :attr:`train`)."""
        return self.own.train if self.own else self.train

    @property
    def student_evals(self) -> dict[str, Encoded]:
        """The eval splits in the student's ids."""
        return self.own.evals if self.own else self.evals

    def stage_encodings(self, kind: DataKind) -> tuple[Encoded, Encoded]:
        """(the student's encoding of ``kind``'s training data, the teacher's encoding of the same
        examples, which its logits are computed on); one object when the two share a tokenizer."""
        teacher_enc = self.stage_data.get(kind)
        if self.own is None:
            return teacher_enc, teacher_enc
        if kind == "task":
            return self.own.train, teacher_enc
        return encode_split(self.stage_data.split(kind), self.own.tokenizer, self.task.max_length), teacher_enc

    def targets(self, student_enc: Encoded, teacher_enc: Encoded) -> torch.Tensor:
        """The fine-tuned teacher's logits on ``teacher_enc`` as targets of ``student_enc`` (the
        same examples): as they are when the two are one encoding, else carried across the two
        tokenizers by the head's rule (``distill.across_tokenizers``: a tagger's word by word, a
        reader's by character)."""
        logits = self.teachers.logits(teacher_enc)
        if student_enc is teacher_enc:
            return logits
        return student_targets(self.data.head, logits, teacher_enc, student_enc)
