"""Typed recipe sections. Each stage reads only its own section.

Every model forbids unknown keys, so a typo fails at load time naming the key (see
``config.load``). Defaults are the CPU-sized values a user would reach for first."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tinyplm.config import data_sources as sources
from tinyplm.config.base import (  # noqa: F401  (re-exported: the recipe's schema in one place)
    LAYERWISE_TERMS,
    LOSS_TERMS,
    MLM_TERMS,
    VECTOR_TERMS,
    Exact,
    ObjectiveSpec,
    Precision,
    Section,
    ShapeSpec,
    TrainSpec,
)
from tinyplm.config.classic import FamilySpec, check_family_student
from tinyplm.config.compress import AFTER_TRIM, TERMINAL_KINDS, CompressStep, check_step_order, step_name
from tinyplm.config.data_sources import AugmentSpec, CorpusSpec  # noqa: F401  (re-exported)
from tinyplm.config.finetune import unsaved_form_error
from tinyplm.config.holdout import count_or_share, not_a_switch
from tinyplm.config.names import logits_source_problem, student_name, teacher_copies  # noqa: F401  (re-exported)
from tinyplm.config.seeding import spread_seed
from tinyplm.config.task_section import task_section
from tinyplm.config.tracking import TrackingSpec
from tinyplm.config.train_shares import check_train_shares


class TaskSpec(Section):
    """Which task to read and how to encode it."""

    _unwritten_defaults = ("holdout", "holdout_seed", "holdout_min_words", "holdout_drop_parts", "train_texts",
                           "eval_sets", "eval_max_length", "holdout_passages", "train_shares", "pair_questions")

    name: str = Field("sst2", description="GLUE task name (cola, sst2, ...), squad, squad_v2, conll2003, a spoiler "
                      "task (goodreads_spoilers, goodreads_spoilers_reviews, tvtropes_spoilers), 'custom', or "
                      "'embedding' (a sentence encoder distilled on texts, judged on similarity and retrieval sets)")
    data_dir: str | None = Field(None, description="GLUE folder (or data root); default TINYPLM_DATA or ../shared/data")
    max_length: int = Field(128, ge=8, le=512, description="tokens per example after truncation")
    max_train_examples: int | None = Field(None, ge=1, description="use the first N training examples")
    max_eval_examples: int | None = Field(None, ge=1, description="use the first N examples of each eval split")
    holdout: int | float | None = Field(None, description="hold out N training examples (a seeded random draw), "
                                        "or a share of them (a number under 0.5: 0.1 holds out a tenth, the "
                                        "same rule over tasks of any size), never trained on: every stage's kept "
                                        "checkpoint and the final model are chosen on them, and dev is only "
                                        "reported (sentence tasks; SQuAD: whole articles; see tasks/holdout.py)")
    holdout_seed: int = Field(0, description="seed of the held-out draw")
    holdout_min_words: int = Field(0, ge=0, description="draw the held-out examples only among training examples "
                                   "of at least this many words, so they look like the reported split where "
                                   "training is phrases (SST-2: dev is whole sentences); 0: any")
    holdout_drop_parts: bool = Field(False, description="also leave out of training every training example that "
                                     "is part of a held-out one (its words a contiguous run of the held-out "
                                     "example's: SST-2's phrases of a held-out sentence), so the held-out "
                                     "examples are as unseen as dev's")
    # Custom CSV/JSONL tasks (name: custom)
    train_file: str | None = None
    dev_file: str | None = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    labels: list[str] | None = None
    regression: bool = False
    # SQuAD: windows of max_length overlapping by doc_stride; train_file/dev_file: official files (else dev split)
    doc_stride: int | None = Field(None, ge=1, description="SQuAD: tokens shared by consecutive windows of a long "
                                   "context; default 128, or half a window's context room when that is less")
    max_query_length: int = Field(64, ge=1, description="SQuAD: question tokens kept")
    train_articles: int = Field(38, ge=1, description="SQuAD v1.1 default split: first N dev articles to train on")
    # Spoiler tasks
    context_sentences: int = Field(0, ge=0, le=64, description="goodreads_spoilers_reviews, tvtropes_spoilers: "
                                   "each sentence's N preceding sentences (of its review; of the file, a show's "
                                   "page in order) as a text pair")
    context_after: int = Field(0, ge=0, le=64, description="goodreads_spoilers_reviews, tvtropes_spoilers: "
                               "also each sentence's N following sentences, after a '|' in the text pair")
    # The embedding task (name: embedding; tasks/embedding_task.py)
    train_texts: list[str] | None = Field(
        None, min_length=1, description="embedding: the texts students learn the teacher's vectors on, in order: "
        "'stsb' (STS-B train sentences), 'corpus' (the corpus section, cut into sentences), 'paragraphs' (its "
        "paragraphs whole, of 20 words or more), 'questions' (questions made from its sentences) or your own "
        "text file (one text per line) or folder of *.txt; "
        "default [stsb]. Evaluated and held-out texts are left out")
    train_shares: dict[str, float] | None = Field(
        None, description="embedding: the share of task.max_train_examples a source of train_texts takes "
        "({questions: 0.2}: a fifth of the sample are questions); the sources not named fill the rest in proportion "
        "to their size, as without shares; needs max_train_examples")
    pair_questions: bool = Field(False, description="embedding: train each of train_texts' 'questions' in one "
                                 "batch with the corpus paragraph it was made from (in place of another text of "
                                 "the sample), so the similarity term compares it with its own passage")
    eval_sets: list[str] | None = Field(
        None, min_length=1, description="embedding: the sets it is judged on: 'stsb' (STS-B dev, Spearman), "
        "'squad' (SQuAD v1.1 dev questions ranking its paragraphs, nDCG@10), 'pairs:FILE' (your scored pairs) or "
        "'beir:FOLDER' (a BEIR folder; 'beir:FOLDER:SPLIT'); default [stsb, squad]; the first is primary")
    holdout_passages: int = Field(0, ge=0, le=100000, description="embedding: hold out N corpus paragraphs as a "
                                  "retrieval check (one sentence cut out of each ranks the rest of all N); never "
                                  "trained on, and the final model must keep final.guard_retention (default "
                                  "min_retention) of the teacher's nDCG@10 on them too; needs a corpus section")
    eval_max_length: int = Field(256, ge=8, le=8192, description="embedding: word pieces each evaluated text is "
                                 "read at (paragraphs are longer than sentences; max_length is the training texts')")
    class_weights: Literal["balanced", "none"] | None = Field(
        None, description="class weights in the cross-entropy: balanced (n / (classes x n_c) from the training "
        "labels) or none; default: the task's (balanced for the Goodreads spoiler tasks)")
    _not_a_switch = field_validator("holdout", mode="before")(not_a_switch)
    _task_section = model_validator(mode="before")(task_section)
    _count_or_share = field_validator("holdout")(count_or_share)

    @model_validator(mode="after")
    def _windows_have_room(self) -> TaskSpec:
        room = self.max_length - self.max_query_length - 3  # [CLS] question [SEP] context [SEP]
        if self.name.lower().startswith("squad"):
            if room < 8:
                raise ValueError(f"max_length {self.max_length} leaves {room} context tokens after max_query_length "
                                 f"{self.max_query_length}: raise max_length or lower max_query_length")
            if self.doc_stride is not None and self.doc_stride >= room:
                raise ValueError(f"doc_stride {self.doc_stride} must be smaller than a window's context room "
                                 f"(max_length - max_query_length - 3 = {room})")
        embedding = self.name.strip().lower() == "embedding"
        for key in ("train_texts", "eval_sets", "train_shares"):
            if getattr(self, key) is not None and not embedding:
                raise ValueError(f"task.{key} is for the embedding task (name: embedding), not '{self.name}'")
        check_train_shares(self.train_shares, self.train_texts, self.max_train_examples, self.pair_questions)
        if self.holdout_passages and not embedding:
            raise ValueError(f"task.holdout_passages is for the embedding task (name: embedding), not '{self.name}'")
        if embedding and (self.holdout_min_words or self.holdout_drop_parts):
            raise ValueError("the embedding task holds out whole STS-B training pairs (task.holdout); "
                             "holdout_min_words and holdout_drop_parts are for sentence tasks")
        what = (f"holdout_min_words {self.holdout_min_words} shapes a held-out draw" if self.holdout_min_words else
                "holdout_drop_parts leaves out the parts of held-out examples" if self.holdout_drop_parts else None)
        if what and not self.holdout:
            raise ValueError(f"{what}, but task.holdout is not set: give task.holdout (how many training examples "
                             "to hold out)")
        return self

    def window_stride(self) -> int:
        """The SQuAD document stride in effect: ``doc_stride``, or its default for this window."""
        room = self.max_length - self.max_query_length - 3
        return self.doc_stride or max(1, min(128, room // 2))


class TeacherSpec(Section):
    """The teacher: a local HF checkpoint dir or an alias, optionally fine-tuned here."""

    _unwritten_defaults = ("logits_from",)

    model: str = Field("minilm-l6", description="alias (minilm-l6) or a local Hugging Face model dir")
    finetune: TrainSpec | None = Field(None, description="fine-tune on the task first; omit if already fine-tuned")
    logits_precision: Exact = Field("fp32", description="precision of the teacher's logits that students learn "
                                    "from (cached per precision)")
    logits_from: str | None = Field(
        None, description="compute the teacher's logits that students learn from with this stage of the run "
        "instead of the PyTorch teacher: a compression step of a copy of the teacher (a student with "
        "init_from: teacher and stages: []), e.g. teacher-best.runtime, the teacher on its fastest runtime. "
        "On a base-size teacher int8 OpenVINO computes them several times faster; they are the logits of that "
        "stage as it runs (its dev agreement with the teacher is in the report)")


#: A transformer student's architecture as a recipe names it: the families of the role table
#: (``models.roles``; a test keeps the two in step), ``deberta`` for DeBERTa-v2.
StudentArch = Literal["bert", "roberta", "deberta", "distilbert", "electra", "xlm-roberta", "camembert", "albert",
                      "mpnet", "modernbert"]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # names become folder names in the run dir


class StageSpec(Section):
    """One distillation stage of a student; each starts from the previous stage's weights.

    ``data``: ``task`` (the task's training set), ``augmented`` (it plus its TinyBERT copies, the
    run's ``augment`` section), ``corpus`` (unlabelled text from the run's ``corpus`` section:
    general distillation, layer-wise or masked-LM terms only), ``task+corpus`` or ``augmented+corpus``
    (the first two with the corpus texts beside them, learnt from the fine-tuned teacher's logits
    alone: the transfer set made larger and more varied; ``config.data_sources.StageDataKind``).
    ``teacher``: ``finetuned`` (the task teacher), ``base`` (the teacher's source checkpoint
    before fine-tuning, as TinyBERT's general distillation uses) or a model dir/alias. Stages
    with ``mlm_soft``/``mlm_hard`` (DistilBERT) need a teacher with a masked-LM head: ``base``
    or a dir made by ``tinyplm fit-mlm-head``.
    """

    name: str | None = Field(None, pattern=NAME_PATTERN)
    data: sources.StageDataKind = "task"
    teacher: str = Field("finetuned", min_length=1, description="finetuned | base | a model dir")
    objective: ObjectiveSpec = ObjectiveSpec()
    train: TrainSpec = TrainSpec()

    @model_validator(mode="after")
    def _corpus_is_unlabelled(self) -> StageSpec:
        o = self.objective
        if self.data == "corpus" and (o.kd_weight > 0 or o.hard_weight > 0):
            raise ValueError("a corpus stage has no labels or task logits: set kd_weight and hard_weight to 0")
        if self.data in sources.MIXED_KINDS and (self.teacher != "finetuned" or max(o.kd_weight, o.logit_mse) <= 0):
            raise ValueError(f"data: {self.data}: its corpus texts are learnt from the fine-tuned teacher's logits "
                             "only: use teacher: finetuned and kd_weight (or logit_mse) > 0")
        if self.teacher != "finetuned" and o.kd_weight > 0:
            raise ValueError(f"teacher '{self.teacher}' has no task logits: only a 'teacher: finetuned' stage "
                             "can use kd_weight > 0")
        if o.masked_lm and self.teacher == "finetuned":
            raise ValueError("mlm_soft/mlm_hard need a teacher with a masked-LM head, which the fine-tuned "
                             "teacher has not: use 'teacher: base' or a dir made by `tinyplm fit-mlm-head`")
        return self


class StudentSpec(Section):
    """One student: its shape, how it is initialised and how it is distilled.

    With ``teacher_layers`` the student takes the teacher's width and copies the embeddings,
    the listed encoder layers (0-based), the pooler and the classifier (DistilBERT-style init).
    """

    name: str | None = Field(None, pattern=NAME_PATTERN, description="stage name; default student-L{layers}-H{hidden}")
    shape: ShapeSpec | None = None
    teacher_layers: list[int] | None = Field(None, description="copy these teacher layers (0-based)")
    init_from: str | None = Field(None, description="start from a saved model dir (e.g. a general student), "
                                  "an alias (minilm-l6, mpnet-base), 'teacher' (the run's teacher) or the name "
                                  "of an earlier student of the recipe")
    objective: ObjectiveSpec = ObjectiveSpec()
    train: TrainSpec = TrainSpec()
    stages: list[StageSpec] | None = Field(None, description="several stages; replaces objective/train; [] = none")
    compress: list[CompressStep] = Field(default_factory=list,
                                         description="compression steps after the stages, in order")
    family: FamilySpec | None = Field(None, description="a classic model of the neural-LM family instead of a BERT "
                                      "student: TF-IDF + LR, (Bi)LSTM over word vectors, BiLSTM over frozen features")
    arch: StudentArch | None = Field(
        None, description="the transformer student's architecture, a family of the role table (deberta: "
        "DeBERTa-v2): the teacher's own, or bert, roberta or deberta beside any teacher; default: the "
        "teacher's family for a student of teacher_layers, else bert. Every one uses the teacher's tokenizer")
    word_embeddings: bool = Field(False, description="start a student without teacher_layers from the teacher's "
                                  "word table (PCA to a narrower width); any arch")

    @model_validator(mode="after")
    def _shape_or_layers(self) -> StudentSpec:
        if self.family is not None:
            if self.arch is not None or self.word_embeddings:
                raise ValueError("'arch' and 'word_embeddings' are for transformer students; a classic student "
                                 "is described by family.arch")
            check_family_student(self)
            return self
        if self.word_embeddings and (self.teacher_layers or self.init_from):
            raise ValueError("'word_embeddings' starts a student built from 'shape' alone; one with teacher_layers "
                             "or init_from already has its word table")
        if self.shape is None and not self.teacher_layers and not self.init_from:
            raise ValueError("give a student 'shape', 'teacher_layers' or 'init_from'")
        if self.shape is not None and self.shape.keep_heads is not None and not self.teacher_layers:
            raise ValueError("shape.keep_heads keeps the strongest of the teacher's heads: it needs teacher_layers")
        if self.stages is not None and not self.stages and not (self.init_from and self.compress):
            raise ValueError("'stages' is empty: list at least one stage or drop the key (an empty list "
                             "is for a student that is only compressed, with init_from)")
        terminal = [s.kind for s in self.compress[:-1] if s.kind in TERMINAL_KINDS]
        if terminal:
            raise ValueError(f"compress step {terminal[0]} gives a model that cannot be compressed further: "
                             "it must be the last step")
        kinds = [s.kind for s in self.compress]
        if "trim_vocab" in kinds:
            after = [k for k in kinds[kinds.index("trim_vocab") + 1:] if k not in AFTER_TRIM]
            if after:
                raise ValueError(f"compress step {after[0]} cannot follow trim_vocab (the student's token ids no "
                                 f"longer match the teacher's); only {', '.join(AFTER_TRIM)} can")
        check_step_order(self.compress)
        names = [step_name(s) for s in self.compress]
        if len(set(names)) != len(names):
            raise ValueError(f"compress step names must be unique within a student; got {names} "
                             "(give repeated kinds a 'name')")
        if self.shape and self.teacher_layers and len(self.teacher_layers) != self.shape.layers:
            raise ValueError(
                f"teacher_layers lists {len(self.teacher_layers)} layers but shape.layers is {self.shape.layers}"
            )
        return self

    @property
    def compress_only(self) -> bool:
        """True for a student that is not trained (``stages: []``): a copy of its ``init_from``
        that only goes through its ``compress`` steps, reported where it came from."""
        return self.stages is not None and not self.stages

    def stage_specs(self) -> list[StageSpec]:
        """The training stages in order: ``stages``, or one stage from ``objective`` and ``train``."""
        return list(self.stages) if self.stages is not None else [StageSpec(objective=self.objective, train=self.train)]


class MeasureSpec(Section):
    """How speed is measured: batch-1 latency and batch-N throughput over dev sentences."""

    latency_sentences: int = Field(200, ge=1, description="dev sentences timed at batch 1 per round")
    throughput_batch: int = Field(32, ge=1)
    throughput_sentences: int = Field(1024, ge=1, description="dev sentences per throughput round")
    warmup: int = Field(10, ge=0, description="untimed batches per model before timing")
    rounds: int = Field(3, ge=1, description="interleaved rounds; the median is reported")
    threads: int | None = Field(None, ge=1, description="torch threads while measuring; default all")
    sort_by_length: bool = Field(True, description="throughput batches as deployed: the measured sentences "
                                 "sorted by length (false: dev order)")
    precision: Exact = Field("fp32", description="precision of every reported metric of a PyTorch stage (a model "
                             "on another runtime or quantized is scored as it runs); recorded per stage")


class FinalSpec(Section):
    """How the run's final model (``RUN_DIR/model``) is chosen among the students and compressed
    stages: of those keeping at least ``min_retention`` of the teacher's primary dev metric, the
    ``fastest`` (throughput; ties within ``speed_tie``: the smallest), the ``smallest`` (on disk) or
    the ``most_accurate``; when none keeps it, the most accurate one (the report says so). A task's
    guard metrics (the embedding task's held-out passages) must keep ``guard_retention`` of its value."""

    _unwritten_defaults = ("guard_retention", "speed_tie")

    rule: Literal["fastest", "smallest", "most_accurate"] = "fastest"
    min_retention: float = Field(0.98, gt=0, le=1.5, description="share of the teacher's primary metric to keep")
    speed_tie: float = Field(0.05, ge=0, lt=1, description="rule fastest: throughputs within this share of the "
                             "fastest's tie (noise); the smallest on disk of them wins. 0 = the fastest as measured")
    guard_retention: float | None = Field(None, gt=0, le=1.5, description="share of the teacher's value each guard "
                                          "metric (task.holdout_passages' nDCG@10) must keep; default min_retention")


class RunConfig(Section):
    """A whole recipe: task -> teacher -> students -> measure -> report."""

    name: str = Field("run", pattern=NAME_PATTERN)
    output_dir: str = Field("runs/{name}", description="run directory; {name} is replaced")
    cache_dir: str | None = Field(None, description="teacher-logit cache; default TINYPLM_CACHE or ~/.cache/tinyplm")
    task: TaskSpec = TaskSpec()
    teacher: TeacherSpec = TeacherSpec()
    students: list[StudentSpec] = Field(default_factory=list)
    measure: MeasureSpec = MeasureSpec()
    final: FinalSpec = FinalSpec()
    augment: AugmentSpec | None = None
    corpus: CorpusSpec | None = None
    tracking: TrackingSpec = Field(TrackingSpec(), description="MLflow / TensorBoard tracking of the run (off by "
                                   "default; not part of the resolved recipe, see config/tracking.py)")
    seed: int | None = Field(None, description="one seed for the whole run, written into every training section "
                             "and augment (config/seeding.py): a repeat under another seed is this one key")
    _unwritten_defaults = ("seed",)

    @model_validator(mode="before")
    @classmethod
    def _one_seed(cls, data: Any) -> Any:
        return spread_seed(data)

    @model_validator(mode="after")
    def _stage_inputs(self) -> RunConfig:
        for spec in self.students:
            for stage in spec.stages or []:
                if sources.uses_augment(stage.data) and (self.augment is None or not self.augment.mlm):
                    raise ValueError(f"student {student_name(spec)}: a 'data: {stage.data}' stage needs an 'augment' "
                                     "section with 'mlm' (a model dir with a masked-LM head, see "
                                     "`tinyplm fit-mlm-head`)")
                if (sources.uses_augment(stage.data) and self.augment.neighbours_from == "word2vec"
                        and not self.augment.word2vec_corpus and self.corpus is None):
                    raise ValueError("augment.neighbours_from: word2vec needs augment.word2vec_corpus "
                                     "or a 'corpus' section to train on")
                if sources.uses_corpus(stage.data) and self.corpus is None:
                    raise ValueError(f"student {student_name(spec)}: a 'data: {stage.data}' stage needs a 'corpus' "
                                     "section")
        return self

    @model_validator(mode="after")
    def _family_inputs(self) -> RunConfig:
        family = {student_name(s) for s in self.students if s.family is not None}
        for spec in self.students:
            if spec.family and spec.family.corpus_needed and not spec.family.own_corpus and self.corpus is None:
                where = "bilm" if spec.family.arch == "elmo_bilstm" else "embeddings"
                raise ValueError(f"student {student_name(spec)}: its {where} are trained on a corpus: give "
                                 f"family.{where}.corpus or a 'corpus' section")
            if spec.init_from in family:
                raise ValueError(f"student {student_name(spec)}: init_from names the classic student "
                                 f"{spec.init_from}, which no transformer student can start from")
        return self

    @model_validator(mode="after")
    def _saved_forms(self) -> RunConfig:
        # every stage is saved as one plain checkpoint: forms that cannot be are refused before any work
        message = unsaved_form_error(self)
        if message:
            raise ValueError(message)
        return self

    @model_validator(mode="after")
    def _logits_source(self) -> RunConfig:
        named = self.teacher.logits_from
        problem = logits_source_problem(self.students, named) if named is not None else None
        if problem:
            raise ValueError(f"teacher.logits_from {named!r}: {problem}")
        return self

    def earlier_student(self, spec: StudentSpec) -> StudentSpec | None:
        """The earlier student of this recipe that ``spec.init_from`` names, if it names one."""
        here = self.students.index(spec)
        return next((s for s in self.students[:here] if student_name(s) == spec.init_from), None)

    @model_validator(mode="after")
    def _unique_student_names(self) -> RunConfig:
        names = [student_name(s) for s in self.students]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"student names must be unique; repeated: {dupes}")
        if "teacher" in names:
            raise ValueError("a student cannot be named 'teacher'")
        return self
