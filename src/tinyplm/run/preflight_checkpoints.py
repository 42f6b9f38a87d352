"""What the teacher's checkpoint and those students start from allow a run, from their config.json,
checked before any work: the positions they read (``task.max_length``), the segment ids a pair task
gives them, the SQuAD windows their tokenizers can cut (:func:`check_checkpoints`), and a teacher's
task head that serves the task, or is replaced because the recipe fine-tunes it
(:func:`check_task_head`)."""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import ModelError, RecipeError, TinyplmError
from tinyplm.models import check_model_dir, load_tokenizer, resolve_model_dir, roles
from tinyplm.models.classic.io import is_family_dir
from tinyplm.models.head_labels import head_misfit, head_outputs
from tinyplm.models.loading import FORMAT_KEY, QUANT_KEY
from tinyplm.models.pooling import read_layout
from tinyplm.models.sentence import read_as_layout
from tinyplm.models.sentence_fit import config_positions, own_limit
from tinyplm.models.token_ids import offsets_problem, padding_problem, segment_problem
from tinyplm.run.read_once import once
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head
from tinyplm.tasks.squad_features import window_problem


def check_checkpoints(cfg: RunConfig, data: TaskData, src: Path, model_cfg: dict) -> None:
    """Every check of this module on the teacher ``src`` (its config.json ``model_cfg``) and the
    model dirs students start from; raises ``TinyplmError`` subclasses naming the file and key."""
    _check_window(cfg, model_cfg, src)
    _check_segments(cfg, data, src, model_cfg)
    _check_doc_stride(cfg, data, src, model_cfg)
    _check_offsets(cfg, data, src, model_cfg)


def check_task_head(data: TaskData, src: Path, model_cfg: dict, *, finetuned: bool) -> str | None:
    """A teacher whose task head cannot serve the task (trained for another number of outputs than
    the task's, such as a 3-class classifier on SST-2; multi-label; labels named against the task's
    order) is refused naming it when the run uses it as it is (it would refuse it when it loads the
    teacher). When the recipe fine-tunes it (``finetuned``) the head is replaced by a new one
    instead: the returned line says so, for the log and the report. Checked after the students'
    own refusals, which say more."""
    head = Head(data.head)
    if head.row.auto_suffix is None or is_family_dir(src):
        return None
    trainable = finetuned and not (model_cfg.get(FORMAT_KEY) or model_cfg.get(QUANT_KEY))
    outputs, kept = head_outputs(src, model_cfg, data.labels, data.is_regression, head, replace=trainable)
    if kept or not any(head.row.auto_suffix in a for a in model_cfg.get("architectures") or []):
        return None
    return (f"{head_misfit(src, model_cfg, outputs)}: teacher.finetune trains a new {data.head} head "
            "for the task's outputs in its place")


def read_checkpoints(cfg: RunConfig, src: Path, model_cfg: dict) -> list[tuple[str, Path, dict]]:
    """(who, folder, config.json) of the teacher and of each model dir a student starts from."""
    checked = [("teacher", src, model_cfg)]
    for s in cfg.students:
        if s.family is None and s.init_from and s.init_from != "teacher" and cfg.earlier_student(s) is None:
            try:
                folder = resolve_model_dir(s.init_from)
                checked.append((f"student {student_name(s)}'s init_from", folder, check_model_dir(folder)))
            except TinyplmError:  # a missing or damaged start is named by the student's own check below
                continue
    return checked


def _check_segments(cfg: RunConfig, data: TaskData, src: Path, model_cfg: dict) -> None:
    """A pair task on a checkpoint whose tokenizer gives the second text a segment id its
    ``type_vocab_size`` has no row for (BERT's tokenizer on a model trained without segments) is
    refused before any work: the first batch would index past the table."""
    if not data.train.examples or getattr(data.train.examples[0], "text_pair", None) is None:
        return
    for who, folder, config in read_checkpoints(cfg, src, model_cfg):
        if not config.get("type_vocab_size"):  # no segment embeddings (DistilBERT, MPNet; DeBERTa-v3's 0)
            continue
        problem = segment_problem(folder, config, load_tokenizer(folder, int(config["vocab_size"])), who)
        if problem:
            raise ModelError(f"{problem} (task '{data.task}' is a pair task)")


def _check_offsets(cfg: RunConfig, data: TaskData, src: Path, model_cfg: dict) -> None:
    """A task read through character offsets (tagging, SQuAD) on a checkpoint whose tokenizer is slow
    is refused before any work, naming it: the first encoding failed, after the teacher's fine-tune
    where a student's start was slow."""
    head = Head(data.head)
    if not head.row.offsets:
        return
    for who, folder, config in read_checkpoints(cfg, src, model_cfg):
        if problem := offsets_problem(folder, load_tokenizer(folder, int(config["vocab_size"])), head):
            raise ModelError(f"{problem} (the {who})")


def _check_doc_stride(cfg: RunConfig, data: TaskData, src: Path, model_cfg: dict) -> None:
    """A SQuAD stride (``task.doc_stride``, or its default) that leaves a window no new context with
    the special tokens a checkpoint's tokenizer adds to a pair (RoBERTa's and MPNet's 4, where the
    recipe check counts BERT's 3) is refused before any work, naming the checkpoint: the tokenizers
    library panicked at the first encoding."""
    if not Head(data.head).row.windows:
        return
    task = cfg.task
    for who, folder, config in read_checkpoints(cfg, src, model_cfg):
        tokenizer = load_tokenizer(folder, int(config["vocab_size"]))
        problem = window_problem(tokenizer, task.max_length, task.window_stride(), task.max_query_length)
        if problem:
            raise RecipeError(f"task: {problem}, for the {who} {folder}; lower task.doc_stride")


def _check_window(cfg: RunConfig, model_cfg: dict, src: Path) -> None:
    """``task.max_length`` (and an embedding task's ``task.eval_max_length``) longer than the
    teacher's position table, or that of a model a student starts from (``init_from``), can read is
    refused before any work (a text that long would fail mid-training or at the first evaluation),
    naming both numbers and what would work."""
    task = cfg.task
    checked = read_checkpoints(cfg, src, model_cfg)
    limits = [("task.max_length", task.max_length)]
    limits += [("task.eval_max_length", task.eval_max_length)] if task.name.strip().lower() == "embedding" else []
    for who, folder, config in checked:
        usable = roles.usable_positions(config)
        for key, value in limits:
            if usable is not None and value > usable:
                rows = config.get("max_position_embeddings")
                why = f" (max_position_embeddings {rows}, counted after the padding id)" if rows != usable else ""
                raise RecipeError(f"{key} {value} is longer than the {usable} positions the {who} "
                                  f"{folder / 'config.json'} can read{why}; set {key} to at most {usable}")


def eval_length_note(cfg: RunConfig, data: TaskData, src: Path, model_cfg: dict, tokenizer) -> str | None:
    """For a task judged on vectors: a line saying that ``task.eval_max_length`` reads the evaluation
    sets at another length than the teacher's own (its ``max_seq_length``, else its tokenizer's limit,
    capped at its positions: what sentence-transformers and ``tinyplm embed-eval`` read), so its
    scores in the run differ from theirs; None when they agree or the teacher has no layout."""
    if not Head(data.head).row.vectors:
        return None
    layout = read_layout(src)
    if layout is None:
        return None
    own = own_limit(layout.max_seq_length, int(tokenizer.model_max_length), config_positions(model_cfg))
    asked = cfg.task.eval_max_length
    if own is None or own == asked:
        return None
    return (f"task.eval_max_length {asked} reads the evaluation sets at {asked} pieces, but the teacher {src} "
            f"reads {own} (its own limit, as sentence-transformers and tinyplm embed-eval read it), so a text "
            f"longer than {min(own, asked)} pieces scores otherwise than they score it; set "
            f"task.eval_max_length: {own} to read as they do")


def teacher_tokenizer(src: Path, enc: Path, model_cfg: dict, head: Head):
    """The tokenizer of the teacher ``src`` (its encoder folder ``enc``), reading text as a sentence
    model's layout says (``do_lower_case``) where the run is judged on vectors; refused
    (``ModelError``) when the model would not read its padding as padding."""
    tok = once(load_tokenizer, enc, int(model_cfg["vocab_size"]))
    if head.row.vectors:  # the splits are encoded as the teacher's layout reads text
        read_as_layout(tok, src)
    if padding := padding_problem(enc, model_cfg, tok):
        raise ModelError(padding)
    return tok
