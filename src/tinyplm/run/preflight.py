"""Everything a run reads, checked before it writes anything."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tinyplm import tasks
from tinyplm.compress.vocab import trim_refusal
from tinyplm.config.classic import CLASSIFIER_ARCHS, SENTENCE_ARCHS
from tinyplm.config.compress import step_name
from tinyplm.config.data_sources import uses_augment
from tinyplm.config.schema import (
    LAYERWISE_TERMS,
    MLM_TERMS,
    CorpusSpec,
    RunConfig,
    StageSpec,
    StudentSpec,
    TaskSpec,
    student_name,
)
from tinyplm.distill.across_tokenizers import ACROSS
from tinyplm.distill.aligned_pieces import ALIGNED_HEADS, SHARED_ID_TERMS
from tinyplm.errors import DataError, ModelError, RecipeError
from tinyplm.files import check_creatable
from tinyplm.models import check_model_dir, load_tokenizer, resolve_model_dir, roles
from tinyplm.models.classic.config import TEACHER_TOKENIZED
from tinyplm.models.embedder import model_dir as teacher_dir
from tinyplm.models.head_labels import holds_head
from tinyplm.models.loading import check_config
from tinyplm.models.onnx import FORMAT_KEY
from tinyplm.models.pooling import layout_similarity
from tinyplm.models.roles import ROLES
from tinyplm.models.sentence_fit import check_sentence_dir
from tinyplm.models.student import model_type_of
from tinyplm.models.token_ids import token_id_mismatch
from tinyplm.pretrain.corpus import corpus_files, read_corpus
from tinyplm.pretrain.mlm_head import check_bert, has_mlm_head
from tinyplm.run.preflight_checkpoints import check_checkpoints, check_task_head, eval_length_note, teacher_tokenizer
from tinyplm.run.preflight_classic import check_vocabularies
from tinyplm.run.preflight_compress import check_compress, compress_notes, shared_layer_notes
from tinyplm.run.preflight_corpus import check_corpus_stages
from tinyplm.run.preflight_embedding import check_vector_terms
from tinyplm.run.preflight_metrics import check_metrics_defined
from tinyplm.run.preflight_objectives import check_objectives, temperature_notes
from tinyplm.run.preflight_precision import precision_notes
from tinyplm.run.preflight_students import check_layer_shapes, check_student_families
from tinyplm.run.read_once import once
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.overlap import eval_overlap_note
from tinyplm.track import check_places


@dataclass(frozen=True)
class Preflight:
    """What a run reads, checked: the task's data, the teacher's directory and its tokenizer;
    ``head_note``: why the teacher's trained head is replaced by a new one before its fine-tune
    (:func:`~tinyplm.run.preflight_checkpoints.check_task_head`), None when it is kept or it has none;
    ``notes``: what the user should know before the run starts (``validate`` prints them, the run
    logs them), the head note among them."""

    data: TaskData
    teacher_dir: Path
    tokenizer: object
    head_note: str | None = None
    notes: tuple[str, ...] = ()


def load_task(spec: TaskSpec, corpus: CorpusSpec | None = None, *, check_keys: bool = True,
              train: bool = True) -> TaskData:
    """Read the task's train and eval splits (see :func:`tinyplm.tasks.load_task`); an embedding
    task whose ``train_texts`` name ``corpus`` reads the paragraphs of ``corpus`` (the recipe's
    section). ``check_keys=False`` for a finished run's stored recipe, which may hold keys its
    task never read (refused only for new recipes); ``train`` False reads the eval splits alone
    (:func:`tinyplm.tasks.load_task`)."""
    def paragraphs() -> list[str]:
        return read_corpus([Path(p) for p in corpus.paths], max_docs=corpus.max_docs, text_field=corpus.text_field)

    return tasks.load_task(spec, paragraphs if corpus is not None else None, check_keys=check_keys, train=train)


def _check_outputs(cfg: RunConfig, run_dir: Path | None) -> None:
    """The run dir (``run_dir``, else the recipe's ``output_dir``) and the stores its tracking sends
    to (``track.check_places``) can be made; nothing is made here."""
    run_dir = Path(run_dir) if run_dir is not None else Path(cfg.output_dir.replace("{name}", cfg.name))
    check_creatable(run_dir)
    check_places(cfg.tracking, run_dir)


def preflight(cfg: RunConfig, run_dir: Path | None = None) -> Preflight:
    """Check all a run reads before it writes: where it writes, the task's data files (every line) and metrics,
    the teacher dir, its tokenizer, a head on a teacher used as is, each stage's teacher. Raises ``TinyplmError``."""
    _check_outputs(cfg, run_dir)
    data, src = once(load_task, cfg.task, cfg.corpus), teacher_dir(cfg.teacher.model)
    check_metrics_defined(data, cfg.task.max_eval_examples)
    enc = check_sentence_dir(src)  # src, or a sentence-transformers folder's encoder (e.g. 0_Transformer/)
    if Head(data.head).row.vectors:  # every model of the run is judged as the teacher is meant to be compared
        data = replace(data, similarity=layout_similarity(src))
    model_cfg = check_model_dir(enc)
    if not model_cfg.get(FORMAT_KEY):  # an ONNX or OpenVINO teacher's config is read by its runtime
        check_config(enc)
    tok = teacher_tokenizer(src, enc, model_cfg, Head(data.head))
    stages = [(spec, st) for spec in cfg.students for st in spec.stage_specs()]
    _check_config_limits(cfg, model_cfg, enc)
    check_checkpoints(cfg, data, enc, model_cfg)
    if any(st.objective.layerwise for _, st in stages) and model_cfg["model_type"] not in ROLES:
        raise ModelError(f"{src}: layer-wise distillation needs a teacher of a family in the role table "
                         f"({', '.join(ROLES)}); this one is '{model_cfg['model_type']}'")
    for spec in cfg.students:
        if (spec.family is None and spec.teacher_layers and spec.arch is not None
                and model_type_of(spec.arch) != model_cfg["model_type"]):
            raise RecipeError(f"student {student_name(spec)}: teacher_layers copies layers of the "
                              f"'{model_cfg['model_type']}' teacher {src}, which a student of arch '{spec.arch}' "
                              "cannot take; drop teacher_layers (a 'shape' from scratch, optionally "
                              "word_embeddings: true) or use arch of the teacher's family")
    check_layer_shapes(cfg, model_cfg, src)
    row = Head(data.head).row
    # a head without a task class of its own (embedding) needs no trained head on the teacher
    finetuned = not cfg.students or any(st.teacher == "finetuned" for _, st in stages)
    needs_head = row.auto_suffix is not None and finetuned
    if needs_head and cfg.teacher.finetune is None and not holds_head(enc, model_cfg, Head(data.head)):
        raise ModelError(
            f"{src}: has no {data.head} head ({row.auto_suffix}) for task '{data.task}'; fine-tune it first (tinyplm "
            "finetune, or a teacher.finetune section in the recipe)"
        )
    augmented = next((st.data for _, st in stages if uses_augment(st.data)), None)
    if row.per_position and augmented:
        raise RecipeError(f"data: {augmented} (TinyBERT word replacement) is for sentence tasks; task '{data.task}' "
                          f"has a {data.head} head whose labels are tied to word positions")
    teacher = _Teacher(src, int(model_cfg["vocab_size"]), tok)
    _check_inits(cfg, teacher, Head(data.head))
    check_student_families(cfg, model_cfg["model_type"])
    _check_trimmable(cfg, teacher)
    _check_augment(cfg)
    check_compress(cfg, Head(data.head), model_cfg)
    check_objectives(cfg, model_cfg, src, Head(data.head))  # after the checks above, which say more
    _check_families(cfg, data)
    check_vocabularies(cfg, data)
    _check_feature_encoders(cfg, model_cfg, teacher)
    check_vector_terms(cfg, data, src)
    check_corpus_stages(cfg, data)
    _check_stage_teachers(cfg, teacher)
    head_note = check_task_head(data, src, model_cfg, finetuned=cfg.teacher.finetune is not None)
    notes = (head_note, eval_length_note(cfg, data, src, model_cfg, tok),
             eval_overlap_note(data, cfg.task.max_train_examples), *compress_notes(cfg, model_cfg),
             *shared_layer_notes(cfg, model_cfg), *temperature_notes(cfg, data.is_regression), *precision_notes(cfg))
    return Preflight(data, src, tok, head_note, tuple(n for n in notes if n))


def _check_stage_teachers(cfg: RunConfig, teacher: _Teacher) -> None:
    """:func:`_check_stage_teacher` on every stage of every student."""
    for spec in cfg.students:
        for k, st in enumerate(spec.stage_specs()):
            _check_stage_teacher(st, teacher, f"student {student_name(spec)}, stage {k}")


def _check_inits(cfg: RunConfig, teacher: _Teacher, head: Head) -> None:
    """Each ``init_from`` is ``teacher``, an earlier student or a model dir. A model dir whose
    tokenizer gives other ids than the teacher's (or an earlier student started from one) reads
    the data in its own ids and learns from the teacher's predictions on the teacher's ids: the
    task's ``head`` must carry them across tokenizers (``distill.across_tokenizers``) and every
    stage it trains must be prediction-level (:func:`_needs_shared_ids`)."""
    own: set[str] = set()  # the students that read their own tokenizer's ids
    for spec in cfg.students:
        name = student_name(spec)
        if not spec.init_from or spec.init_from == "teacher":
            continue
        if cfg.earlier_student(spec) is not None:
            problem = "it starts from student " + spec.init_from if spec.init_from in own else None
        else:
            try:
                path = resolve_model_dir(spec.init_from)  # an alias (minilm-l6, mpnet-base) or a dir
                init_cfg = check_model_dir(path)
            except ModelError as exc:
                names = [student_name(s) for s in cfg.students[:cfg.students.index(spec)]]
                hint = f" (nor 'teacher' or an earlier student: {names})" if names else " (nor 'teacher')"
                raise ModelError(f"student {name}: init_from: {exc}{hint}") from None
            problem = _token_problem(path, init_cfg, teacher)
            if problem is not None:
                problem = f"init_from {path} tokenizes otherwise than the teacher {teacher.path} ({problem})"
        if problem is None:
            continue
        own.add(name)
        if head not in ACROSS:
            raise RecipeError(f"student {name}: {problem}; the {head} head has no {ACROSS.capability}: start the "
                              "student from the teacher's own layers (teacher_layers) or from a checkpoint of the "
                              "teacher's tokenizer")
        blocker = _needs_shared_ids(spec, head)
        if blocker is not None:
            layered = ", layer-wise terms but attention_kl" if head in ALIGNED_HEADS else ""
            raise RecipeError(f"student {name}: {problem}; {blocker} needs the teacher's token ids: distil "
                              f"across tokenizers with prediction-level terms (kd_weight, hard_weight, "
                              f"logit_mse){layered} from the fine-tuned teacher, or start from a checkpoint of "
                              "its tokenizer")


def _check_config_limits(cfg: RunConfig, model_cfg: dict, src: Path) -> None:
    """A teacher config value its family cannot run (the role table's ``limits``) is refused
    before anything runs, naming the file, the key and what would work; a limit of layer-by-layer
    stages names the first student that works on the teacher's layers and how (copies them, is
    compressed, learns from them layer by layer)."""
    general = roles.config_problems(model_cfg, per_layer=False)
    if general:
        raise ModelError(f"{src / 'config.json'}: {'; '.join(general)}")
    layered = [p for p in roles.config_problems(model_cfg, per_layer=True) if p not in general]
    for spec in cfg.students if layered else ():
        how = _per_layer_use(spec)
        if how:
            raise ModelError(f"{src / 'config.json'}: student {student_name(spec)} ({how}): {'; '.join(layered)}")


def _check_trimmable(cfg: RunConfig, teacher: _Teacher) -> None:
    """A ``trim_vocab`` step whose student's tokenizer cannot be trimmed (slow, or of a model type
    trimming lacks) is refused before training, naming the student, the step and why."""
    for spec in cfg.students:
        step = next((s for s in spec.compress if s.kind == "trim_vocab"), None)
        if step is None or spec.family is not None:
            continue
        own = spec.init_from and spec.init_from != "teacher" and cfg.earlier_student(spec) is None
        if own:
            path = resolve_model_dir(spec.init_from)
            tok = once(load_tokenizer, path, int(check_model_dir(path)["vocab_size"]))
        why = trim_refusal(tok if own else teacher.tokenizer)
        if why:
            raise RecipeError(f"student {student_name(spec)}: compress step {step_name(step)} cannot trim the "
                              f"vocabulary: {why}; drop the step or use a checkpoint with a fast tokenizer")


def _per_layer_use(spec: StudentSpec) -> str:
    """How ``spec`` works on the teacher's layers, in words ('' when it does not)."""
    if spec.family is not None:
        return ""
    uses = ["teacher_layers"] if spec.teacher_layers else []
    uses += ["init_from: teacher"] if spec.init_from == "teacher" else []
    uses += [f"compress step {step_name(step)}" for step in spec.compress[:1]]
    uses += ["layer-wise distillation"] if any(st.objective.layerwise for st in spec.stage_specs()) else []
    return ", ".join(uses)


def _needs_shared_ids(spec: StudentSpec, head: Head) -> str | None:
    """What in ``spec``'s training needs the teacher's own token ids (a masked-LM term or
    ``attention_kl``: distributions over one tokenizer's pieces; any layer-wise term on a head whose
    rows differ by tokenizer, a reader's windows; corpus text; a stage teacher other than the
    fine-tuned one), in words, or None when every stage and recovery can learn across tokenizers
    (layer-wise terms on the positions both cut alike: ``distill.aligned_pieces``)."""
    trained = [(f"stage {k}", st.objective, st.data, st.teacher) for k, st in enumerate(spec.stage_specs())]
    trained += [(f"the recovery of compress step {step_name(c)}", c.recover.objective, c.recover.data, "finetuned")
                for c in spec.compress if c.recover is not None]
    for where, objective, data, stage_teacher in trained:
        needs_ids = SHARED_ID_TERMS if head in ALIGNED_HEADS else (*LAYERWISE_TERMS, *MLM_TERMS)
        terms = [t for t in needs_ids if getattr(objective, t) > 0]
        if terms:
            return f"{where}'s {', '.join(terms)}"
        if data == "corpus":
            return f"{where}'s corpus text (no task teacher's predictions)"
        if stage_teacher != "finetuned":
            return f"{where}'s teacher {stage_teacher}"
    return None


def _check_augment(cfg: RunConfig) -> None:
    """``augment.mlm`` is a model dir with a masked-LM head when a stage trains on augmented data
    (found now, not after the teacher has been fine-tuned for minutes)."""
    if cfg.augment is None or not any(uses_augment(st.data) for s in cfg.students for st in s.stage_specs()):
        return
    path = Path(cfg.augment.mlm)
    try:
        check_model_dir(path)
    except ModelError as exc:
        raise ModelError(f"augment.mlm: {exc} (make it with `tinyplm fit-mlm-head minilm-l6 --out {path}`)") from None
    try:
        check_bert(path, "TinyBERT augmentation")
    except ModelError as exc:
        raise ModelError(f"augment.mlm: {exc}") from None
    if not has_mlm_head(path):
        raise ModelError(f"augment.mlm: {path} has no masked-LM head; fit one with "
                         f"`tinyplm fit-mlm-head {path} --out DIR` and name DIR here")


#: The classic archs a task of each head trains: the classifiers on a head whose row says classic students
#: learn it (single-label sentence tasks), the sentence encoders on the embedding task.
FAMILY_ARCHS: PerHead = PerHead("classic students", {**{h: CLASSIFIER_ARCHS for h in Head if h.row.classic},
                                                     Head.EMBEDDING: SENTENCE_ARCHS})


def _check_families(cfg: RunConfig, data: TaskData) -> None:
    """Classic students: a single-label sentence task for the classifiers, the embedding task for
    the sentence encoders (:data:`FAMILY_ARCHS`), and every corpus and saved biLM they read exists
    (corpora default to the recipe's ``corpus`` section, checked like it)."""
    for spec in cfg.students:
        fam = spec.family
        if fam is None:
            continue
        where, head = f"student {student_name(spec)}", Head(data.head)
        if data.is_regression or head not in FAMILY_ARCHS:
            kind = "regression" if data.is_regression else f"a {data.head} task"
            raise RecipeError(f"{where}: classic students classify sentences; task {data.task} is {kind}")
        if fam.arch not in FAMILY_ARCHS[head]:
            what = "makes sentence vectors (the embedding task)" if fam.arch in SENTENCE_ARCHS else "is a classifier"
            raise RecipeError(f"{where}: family.arch {fam.arch} {what}; task {data.task} has the {head} head, whose "
                              f"classic archs are {', '.join(FAMILY_ARCHS[head])}")
        if fam.corpus_needed:  # word vectors or a biLM trained here, on its own corpus or the recipe's
            key = f"family.{'bilm' if fam.arch == 'elmo_bilstm' else 'embeddings'}.corpus"
            paths, key = (fam.own_corpus, key) if fam.own_corpus else (cfg.corpus.paths, "corpus.paths")
            try:
                corpus_files([Path(p) for p in paths])
            except DataError as exc:
                raise DataError(f"{where}: {key}: {exc}") from None
        bilm = Path(fam.bilm.model) if fam.arch == "elmo_bilstm" and fam.bilm.model else None
        if bilm is not None and not (bilm / "bilm.safetensors").is_file():
            raise ModelError(f"{where}: family.bilm.model: {bilm} holds no bilm.safetensors "
                             "(a biLM saved by an earlier run's elmo_bilstm student)")


def _check_feature_encoders(cfg: RunConfig, teacher_cfg: dict, teacher: _Teacher) -> None:
    """A ``feature_bilstm`` student's frozen encoder, or the one a static student's table is made
    from (``base``, ``finetuned``: the teacher; or a model dir), exists, has the layers it
    concatenates or the width the table's PCA keeps, and shares the teacher's vocabulary (the
    student reads the teacher tokenizer's ids), found before the teacher is fine-tuned."""
    for spec in cfg.students:
        fam = spec.family
        if fam is None or fam.arch not in TEACHER_TOKENIZED:
            continue
        where = f"student {student_name(spec)}: family.encoder"
        if fam.encoder in ("base", "finetuned"):
            path, enc_cfg = teacher.path, teacher_cfg
        else:
            try:
                path = resolve_model_dir(fam.encoder)
                enc_cfg = check_model_dir(path)
            except ModelError as exc:
                raise ModelError(f"{where}: {exc} (base, finetuned or a model dir)") from None
            _check_token_ids(path, enc_cfg, teacher, f"{where}:",
                             "the encoder reads the teacher tokenizer's ids, so it must share them")
        width = enc_cfg.get("hidden_size", enc_cfg.get("dim"))
        if fam.arch != "feature_bilstm":
            if isinstance(width, int) and fam.static.dims > width:
                raise RecipeError(f"student {student_name(spec)}: family.static.dims {fam.static.dims} is more than "
                                  f"the hidden size {width} of the encoder {path}")
            continue
        layers = enc_cfg.get("num_hidden_layers")
        if isinstance(layers, int) and fam.feature_layers > layers:
            raise RecipeError(f"student {student_name(spec)}: family.feature_layers {fam.feature_layers} is more than "
                              f"the {layers} layers of the encoder {path}")


@dataclass(frozen=True)
class _Teacher:
    """The teacher as the checks below compare with it: its dir, vocabulary size and tokenizer."""

    path: Path
    vocab_size: int
    tokenizer: object


def _check_token_ids(path: Path, cfg: dict, teacher: _Teacher, what: str, why: str) -> None:
    """Raise when model ``path`` (``what`` it is) cannot read the teacher's encoding: ``ModelError``
    when its config's ``vocab_size`` is not the teacher's, ``RecipeError`` in one line naming both
    and the first difference when its tokenizer gives other ids (``models.token_ids``); ``why``
    says what depends on it."""
    if Path(path).resolve() == teacher.path.resolve():
        return
    if int(cfg.get("vocab_size", -1)) != teacher.vocab_size:
        raise ModelError(f"{what} {path} has a vocabulary of {cfg.get('vocab_size')} word pieces, the teacher's "
                         f"tokenizer {teacher.vocab_size}; {why}")
    problem = _token_problem(path, cfg, teacher)
    if problem is not None:
        raise RecipeError(f"{what} {path} tokenizes otherwise than the teacher {teacher.path} ({problem}); {why}")


def _token_problem(path: Path, cfg: dict, teacher: _Teacher) -> str | None:
    """How model ``path``'s tokenizer differs from the teacher's (``models.token_ids``), or None."""
    if Path(path).resolve() == teacher.path.resolve():
        return None
    return token_id_mismatch(once(load_tokenizer, path, int(cfg["vocab_size"])), teacher.tokenizer)


def _check_stage_teacher(stage: StageSpec, teacher: _Teacher, where: str) -> None:
    """A stage's own teacher (``base`` or a dir) exists, shares the tokenizer's ids, and has a
    masked-LM head when the stage's objective needs one."""
    if stage.teacher == "finetuned":
        return
    path = teacher.path if stage.teacher == "base" else resolve_model_dir(stage.teacher)
    cfg = check_model_dir(path)
    _check_token_ids(path, cfg, teacher, f"{where}: teacher", "a stage teacher must share the tokenizer")
    if stage.objective.masked_lm and not has_mlm_head(path):
        raise ModelError(f"{where}: mlm_soft/mlm_hard need a teacher with a masked-LM head and {path} has none; "
                         f"fit one with `tinyplm fit-mlm-head {path} --corpus PATH --out DIR` and use "
                         "'teacher: DIR' (or DIR as teacher.model)")
