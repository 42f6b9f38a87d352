"""What a saved model predicts and how its inputs must be encoded, read from the model dir and,
when the model sits in a run dir, from the run's recipe.

- ``MODEL_DIR`` may be a model dir (``config.json``) or a run dir (its ``model/`` is used).
- An embedding model (``modules.json``: a sentence-transformers layout; or a static sentence
  encoder's config) has the ``embedding`` head; its max length is ``--max-length`` when given, else
  the model's own limit once loaded (:func:`embedding_limit`: the layout's ``max_seq_length``; none
  for a static encoder, which reads every piece), as ``tinyplm embed-eval`` encodes.
- Otherwise the head comes from ``config.json``'s ``architectures``, the label names from its ``id2label``
  (tinyplm saves the task's labels there), regression from ``problem_type`` (or one output).
- The max length: ``--max-length`` when given; else the ``task.max_length`` the model was trained
  and evaluated with, from the run's ``config.resolved.yaml`` (beside the model dir: ``RUN/model``,
  ``RUN/teacher``; or one level up: ``RUN/students/NAME``, ``RUN/export/STAGE``); else 128, the
  default of ``tinyplm evaluate``, so predictions match its defaults. Never more than the model's
  position embeddings. ``max_length_from`` says which applied.
- SQuAD windows (``doc_stride``, ``max_query_length``) follow the same order, with the rules of
  :meth:`tinyplm.config.TaskSpec.window_stride`; a ``squad_v2`` run turns on the no-answer rule.
- A ``goodreads_spoilers_reviews`` or ``tvtropes_spoilers`` model trained with
  ``context_sentences: N`` (and ``context_after: M``) keeps them: predict gives each sentence the
  same context as in training (of its review; of the lines around it in a text, CSV or
  JSON-lines file). The service takes the context as each request's ``text_pair``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from tinyplm.config import TaskSpec
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.files import RESOLVED
from tinyplm.inference.pairs import CUSTOM_TASK, task_pairs
from tinyplm.models.head_labels import id2label_problem
from tinyplm.models.loading import check_model_dir
from tinyplm.tasks import named_labels
from tinyplm.tasks.heads import Head

#: ``tinyplm evaluate``'s default max length, used when nothing records the model's own.
DEFAULT_MAX_LENGTH = 128
#: The whole-number settings of a task section (a run's recipe or a model's ``tinyplm_task``).
INT_KEYS = ("max_length", "doc_stride", "max_query_length", "context_sentences", "context_after")


@dataclass(frozen=True)
class RunTask:
    """The task section of the run a model came from (``None`` fields: not recorded)."""

    recipe: Path
    name: str | None
    max_length: int | None
    doc_stride: int | None
    max_query_length: int | None
    context_sentences: int | None = None
    context_after: int | None = None
    pairs: bool | None = None  # a custom task's: whether its recipe names a text_pair_column


@dataclass(frozen=True)
class ModelInfo:
    """A model dir and everything prediction needs to know about it (see the module docstring).

    ``labels`` are the class names (sequence) or tags (token), empty for span and regression
    models; ``null_threshold`` is set for SQuAD v2.0 models (answer empty when the no-answer
    score beats the best span by more than it); ``context_sentences`` and ``context_after`` are
    the sentences before and after each that a Goodreads-reviews or TV Tropes model was trained
    with as context (0: none); ``dimension``: an embedding model's vector width (set when it is
    loaded); ``pairs``: whether its task's examples are pairs of texts (None: unknown, or either;
    :mod:`tinyplm.inference.pairs`)."""

    path: Path
    head: Head
    labels: tuple[str, ...]
    is_regression: bool
    max_length: int | None  # None: no limit (a static sentence encoder)
    max_length_from: str
    task: str | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    null_threshold: float | None = None
    context_sentences: int = 0
    context_after: int = 0
    dimension: int | None = None  # an embedding model's vector width, once loaded
    pairs: bool | None = None

    def describe(self) -> dict:
        """A JSON-able summary (``/ready``, ``predict``'s report)."""
        out = {"model": str(self.path), "head": str(self.head), "task": self.task, "labels": list(self.labels),
               "regression": self.is_regression, "max_length": self.max_length,
               "max_length_from": self.max_length_from}
        if self.head.row.windows:
            out.update(doc_stride=self.doc_stride, max_query_length=self.max_query_length,
                       null_threshold=self.null_threshold)
        if self.context_sentences or self.context_after:
            out.update(context_sentences=self.context_sentences, context_after=self.context_after)
        if self.pairs is not None:  # what a request's examples must be (tinyplm.inference.pairs)
            out["pairs"] = self.pairs
        return out


def model_dir_of(target: Path) -> Path:
    """``target`` if it is a model dir, its ``model/`` if it is a run dir; raises ``ModelError``."""
    target = Path(target).expanduser()
    if (target / "config.json").is_file() or not (target / "model" / "config.json").is_file():
        return target  # a model dir, or nothing usable: check_model_dir names what is missing
    return target / "model"


def run_task(model_dir: Path) -> RunTask | None:
    """The task section of the run ``model_dir`` belongs to, or None when no recipe is found.
    Raises ``TinyplmError`` naming the recipe file when it is not YAML."""
    for folder in (model_dir.parent, model_dir.parent.parent):
        recipe = folder / RESOLVED
        if recipe.is_file():
            try:
                raw = yaml.safe_load(recipe.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise TinyplmError(f"{recipe}: cannot read the run's recipe ({exc.__class__.__name__})") from None
            task = raw.get("task") if isinstance(raw, dict) else None
            if not isinstance(task, dict):
                return None  # a pre-training run: no task section
            ints = {k: task.get(k) if isinstance(task.get(k), int) else None for k in INT_KEYS}
            name = task.get("name") if isinstance(task.get("name"), str) else None
            pairs = bool(task.get("text_pair_column")) if name == CUSTOM_TASK else None
            return RunTask(recipe, name, **ints, pairs=pairs)
    return None


def stamped_task(cfg: dict, path: Path) -> RunTask | None:
    """The task a run recorded in the model's own config.json (``tinyplm_task``), for a model dir
    that no longer sits in its run dir; None when it has none."""
    task = cfg.get("tinyplm_task")
    if not isinstance(task, dict):
        return None
    ints = {k: task.get(k) if isinstance(task.get(k), int) else None for k in INT_KEYS}
    name = task.get("name") if isinstance(task.get("name"), str) else None
    pairs = task.get("pairs") if name == CUSTOM_TASK and isinstance(task.get("pairs"), bool) else None
    return RunTask(path / "config.json", name, **ints, pairs=pairs)


def trained_task(target: Path) -> RunTask | None:
    """The task settings ``target`` (a model dir or run dir) was trained with: its run's recipe,
    else its config's ``tinyplm_task`` stamp; None when neither records them or it is no HF model dir."""
    path = model_dir_of(target)
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # loading the model names the damage
    return run_task(path) or (stamped_task(cfg, path) if isinstance(cfg, dict) else None)


def other_task_note(model_dir: Path, task: str) -> str | None:
    """A line saying that ``model_dir`` was trained for another task than ``task`` (its run's recipe
    or config stamp): scored as it is, by its outputs' order, which may be right (a sentiment model
    on another sentiment set) or meaningless (an SST-2 model's MCC on CoLA); None when it was not."""
    from tinyplm.tasks import canonical

    run = trained_task(model_dir)
    if run is None or not run.name or canonical(run.name) == canonical(task):
        return None
    return f"{model_dir} was trained for {run.name}; scored on {task} as it is, its outputs read as {task}'s labels " \
           "in their order"


def model_info(target: Path, max_length: int | None = None, doc_stride: int | None = None,
               max_query_length: int | None = None, null_threshold: float | None = None) -> ModelInfo:
    """Resolve ``target`` (a model dir or run dir) to a :class:`ModelInfo`; the arguments are the
    user's explicit choices, which win. Raises ``ModelError`` for a missing or damaged model dir
    and ``TinyplmError`` for a max length the model cannot take or SQuAD windows without room."""
    path = model_dir_of(target)
    embedding = is_embedding_dir(path)  # its Transformer may sit in 0_Transformer/: load_embedder checks its files
    cfg = _root_config(path) if embedding else check_model_dir(path)
    head = Head.EMBEDDING if embedding else Head.of_architectures(cfg.get("architectures") or [])
    if not embedding:
        _check_task_head(path, cfg)
    id2label = cfg.get("id2label") or {}
    outputs = cfg.get("num_labels") or len(id2label) or 2
    if head.row.may_regress and cfg.get("problem_type") == "regression" and outputs != 1:
        raise ModelError(f"{path / 'config.json'}: problem_type regression, but its head has {outputs} outputs; "
                         "expected num_labels 1 for a regression head (one score), or a classifier's problem_type")
    regression = head.row.may_regress and (cfg.get("problem_type") == "regression" or outputs == 1)
    if not head.row.named_by_labels or regression:  # outputs named by the head (start, end) or a score
        labels = ()
    elif id2label:  # the names it answers with: checked only where they are read
        labels = _label_names(path, id2label, cfg.get("label2id"))
    else:
        labels = tuple(f"LABEL_{i}" for i in range(outputs))
    run = run_task(path) or stamped_task(cfg, path)
    labels = named_labels(run.name if run else None, labels)
    length, source = _max_length(max_length, run, cfg, path)
    spec = _window_spec(run, length, doc_stride, max_query_length) if head.row.windows else None
    if null_threshold is not None and math.isnan(null_threshold):  # it would compare false with every score
        raise TinyplmError("--null-threshold: expected a number, got nan")
    if null_threshold is None and run is not None and run.name == "squad_v2":
        null_threshold = 0.0
    return ModelInfo(path=path, head=head, labels=labels, is_regression=regression, max_length=length,
                     max_length_from=source, task=run.name if run else None,
                     doc_stride=spec.window_stride() if spec else 128,
                     max_query_length=spec.max_query_length if spec else 64, null_threshold=null_threshold,
                     context_sentences=(run.context_sentences or 0) if run else 0,
                     context_after=(run.context_after or 0) if run else 0,
                     pairs=task_pairs(run.name, run.pairs, bool(run.context_sentences or run.context_after))
                     if run and head.row.task_texts else None)


def _label_names(path: Path, id2label: dict, label2id: object) -> tuple[str, ...]:
    """The output names ``id2label`` gives, in output order. Raises ``ModelError`` naming the file
    when its keys are not the numbers 0 to n-1 (a gap would renumber the outputs silently: a user's
    label 2 answered as 1), two outputs share a name (one score would hide the other's) or
    ``label2id`` puts its names at other outputs (:func:`id2label_problem`)."""
    problem = id2label_problem(path, id2label, label2id)
    if problem:
        raise ModelError(problem)
    return tuple(str(id2label[k]) for k in sorted(id2label, key=int))


def _check_task_head(path: Path, cfg: dict) -> None:
    """A checkpoint whose ``architectures`` name only a bare encoder (``BertModel``) or a
    pre-training head has no trained task head: predicting with it would answer from a random
    classifier, so it is refused (``ModelError``) naming the file and what would work. A config
    without ``architectures`` is read as a classifier, as transformers reads it, unless its weights
    hold none (:func:`~tinyplm.models.head_labels.refuse_headless`)."""
    from tinyplm.models.classic.io import is_family_dir
    from tinyplm.tasks.heads import HEADS

    names = cfg.get("architectures") or []
    suffixes = [row.auto_suffix for row in HEADS.values() if row.auto_suffix]
    if not names and not is_family_dir(path):  # read as a classifier, as transformers reads it, if it holds one
        from tinyplm.models.head_labels import refuse_headless

        refuse_headless(path, cfg, Head.of_architectures(names))
    if names and not any(n.endswith(x) for n in names for x in suffixes) and not is_family_dir(path):
        raise ModelError(f"{path / 'config.json'}: architectures {names} hold no task head "
                         f"({', '.join('...' + x for x in suffixes)}), so its predictions would come from an "
                         "untrained classifier; fine-tune it first (tinyplm finetune), or save a sentence-embedding "
                         "model in the sentence-transformers layout (modules.json)")


def pair_problem(info: ModelInfo) -> str | None:
    """Why the model ``info`` describes cannot read pairs of texts
    (:func:`~tinyplm.models.token_ids.segment_problem`), from its config.json and tokenizer alone,
    without loading the model; None when it can."""
    from tinyplm.models import check_model_dir, load_tokenizer
    from tinyplm.models.token_ids import segment_problem

    config = check_model_dir(info.path)
    return segment_problem(info.path, config, load_tokenizer(info.path, int(config["vocab_size"])))


def is_embedding_dir(path: Path) -> bool:
    """Whether ``path`` holds an embedding model: a sentence-transformers layout (``modules.json``)
    or a static sentence encoder (see :func:`tinyplm.models.embedder.embedder_kind`)."""
    from tinyplm.models.classic.static_sentence import is_static_sentence_dir

    return (Path(path) / "modules.json").is_file() or is_static_sentence_dir(path)


def _root_config(path: Path) -> dict:
    """An embedding model's root ``config.json`` as a dict, or ``{}`` when it has none (a layout with
    its Transformer in ``0_Transformer/``) or it is damaged (loading the model names the damage)."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def embedding_limit(embedder) -> tuple[int | None, str]:
    """(the token limit a loaded :class:`~tinyplm.models.embedder.Embedder` cuts texts at when given
    no max length, where it comes from): a transformer's is sentence-transformers' own
    (:func:`~tinyplm.models.sentence.default_max_length`); a static encoder has none (None)."""
    from tinyplm.models.embedder import EmbedderKind
    from tinyplm.models.sentence import default_max_length
    from tinyplm.models.sentence_fit import positions_cap

    if embedder.kind is EmbedderKind.STATIC:
        return None, "a static sentence encoder, which reads every piece"
    capped = positions_cap(embedder.model)
    source = f"the model's own: its {capped}" if capped else "the model's own (max_seq_length, as embed-eval)"
    return default_max_length(embedder.model, embedder.tokenizer), source


def fitting_max_length(asked: int | None, run: RunTask | None, paths: list[Path]) -> int:
    """The max length to read a task with for every model of ``paths`` (``evaluate``, ``bench``):
    ``asked``, refused with ``TinyplmError`` where a model has fewer positions; else the trained
    one (``run``) or the default, cut to the fewest positions among them."""
    return min(_max_length(asked, run, _root_config(model_dir_of(p)), p)[0] for p in paths)


def embedding_window(asked: int | None, paths: list[Path]) -> int | None:
    """The pieces to read an embedding task's evaluation sets at for every model of ``paths``
    (``bench --task embedding``): ``asked`` (``--max-length``), refused with ``TinyplmError`` where a
    model has fewer positions; else the least of the models' own limits
    (:func:`~tinyplm.models.sentence_fit.own_limit`, as ``embed-eval`` reads each alone); None when
    none has one (the task's default)."""
    from tinyplm.models.pooling import read_layout
    from tinyplm.models.sentence_fit import own_limit

    own = []
    for p in paths:
        folder = model_dir_of(p)
        layout = read_layout(folder)  # None without modules.json (a static encoder: its positions, if any)
        encoder = folder / layout.transformer_path if layout is not None else folder  # older layouts: 0_Transformer/
        positions = _positions(_root_config(encoder))
        if asked is not None and positions is not None and asked > positions:
            raise TinyplmError(f"--max-length {asked} is longer than the {positions} positions of {p}")
        limit = positions if layout is None else own_limit(layout.max_seq_length, _tokenizer_limit(encoder), positions)
        if limit is not None:
            own.append(limit)
    return asked if asked is not None else min(own, default=None)


def _tokenizer_limit(folder: Path) -> int | None:
    """The ``model_max_length`` of the tokenizer in ``folder`` (its ``tokenizer_config.json``), read
    without loading it; None when it does not say or the file cannot be read."""
    try:
        cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    limit = cfg.get("model_max_length") if isinstance(cfg, dict) else None
    if not isinstance(limit, int | float) or isinstance(limit, bool) or not 0 < limit < math.inf:
        return None
    return int(limit)  # transformers' "no limit" sentinel (1e30) too: own_limit sets it aside


def _max_length(asked: int | None, run: RunTask | None, cfg: dict, path: Path) -> tuple[int, str]:
    """(max length, where it came from); see the module docstring."""
    positions = _positions(cfg)
    if asked is not None:
        if asked < 8:
            raise TinyplmError(f"--max-length: expected at least 8 tokens, got {asked}")
        if positions is not None and asked > positions:
            raise TinyplmError(f"--max-length {asked} is longer than the {positions} positions of {path}")
        return asked, "--max-length"
    if run is not None and run.max_length is not None:
        length, source = run.max_length, f"{run.recipe} (task.max_length, as trained)"
    else:
        length, source = DEFAULT_MAX_LENGTH, f"default {DEFAULT_MAX_LENGTH} (as tinyplm evaluate; no run recipe found)"
    if positions is not None and length > positions:
        length, source = positions, f"{source}, cut to the model's {positions} positions"
    return length, source


def _positions(cfg: dict) -> int | None:
    """The positions the model can read: its own, or (a feature-based classic student) its frozen
    encoder's, recorded under ``encoder`` (the table's rows, less those before RoBERTa's padding
    id: ``roles.usable_positions``); None when it has none (a word-level model)."""
    from tinyplm.models.roles import usable_positions

    for source in (cfg, cfg.get("encoder")):
        if isinstance(source, dict) and isinstance(source.get("max_position_embeddings"), int):
            usable = usable_positions(source)  # RoBERTa's table starts after its padding id
            return usable if usable is not None else source["max_position_embeddings"]
    return None


def _window_spec(run: RunTask | None, length: int, doc_stride: int | None, max_query_length: int | None) -> TaskSpec:
    """The SQuAD window settings as a ``TaskSpec`` (so its checks and default stride apply). Raises
    ``TinyplmError`` naming the flag for a window setting below 1 (a question cut to no pieces would be
    answered as if none had been asked)."""
    for flag, asked in (("--doc-stride", doc_stride), ("--max-query-length", max_query_length)):
        if asked is not None and asked < 1:
            raise TinyplmError(f"{flag}: expected at least 1 token, got {asked}")
    stride = doc_stride if doc_stride is not None else (run.doc_stride if run else None)
    query = max_query_length if max_query_length is not None else (run.max_query_length if run else None)
    room = length - (query or 64) - 3  # [CLS] question [SEP] context [SEP]
    if room < 8:  # named by the flags, not the recipe keys the TaskSpec check names
        said = ("--max-query-length" if max_query_length is not None else
                "the run's task.max_query_length" if query else "--max-query-length's default")
        shorter = (f"give --max-query-length {length - 11} or less, or " if length >= 12 else
                   "a window this short holds no question and context; give ")
        raise TinyplmError(f"SQuAD windows: max length {length} leaves {room} pieces for the context after "
                           f"questions of up to {query or 64} ({said}); {shorter}a longer --max-length where the "
                           "model's positions allow")
    try:
        return TaskSpec(name="squad", max_length=length, doc_stride=stride, max_query_length=query or 64)
    except ValidationError as exc:  # no room for context in a window
        raise TinyplmError(f"SQuAD windows: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
