"""A trained head's outputs matched to a task's labels by name, not by position.

A checkpoint fine-tuned elsewhere (or by another run) names its outputs in ``config.json``'s
``id2label``. A task names its labels in its own order (GLUE's fixed order; a custom task's
``task.labels`` or its sorted label values). When both name the same labels in another order, the
head's rows are put in the task's order (:func:`reorder_outputs`), so output ``i`` of the loaded
model is the task's label ``i``, as everything downstream assumes. When they name some of the same
labels at other positions and not the same set, no order can be trusted and the checkpoint is
refused (:func:`output_order`). Default names (``LABEL_0``...) or names the task does not use at all
(``NEG``/``POS`` against ``negative``/``positive``) say nothing of the order: the head is taken as it
is, in the task's order.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import nn

from tinyplm.errors import ModelError
from tinyplm.tasks.heads import Head
from tinyplm.tasks.io import quoted

#: transformers' names for outputs a config never named.
DEFAULT_NAME = re.compile(r"label_\d+")


def _key(name: object) -> str:
    return str(name).strip().lower()


def head_names(cfg: dict) -> list[str] | None:
    """The names of a head's outputs in row order from ``config.json``'s ``id2label`` (None when it
    has none, or only transformers' default names)."""
    id2label = cfg.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    try:
        rows = sorted((int(k), v) for k, v in id2label.items())
    except (TypeError, ValueError):
        return None
    names = [str(v) for _, v in rows]
    return None if all(DEFAULT_NAME.fullmatch(_key(n)) for n in names) else names


def output_order(path: Path, cfg: dict, outputs: tuple[str, ...]) -> tuple[int, ...] | None:
    """For a head that has the task's ``outputs`` (label names, in the task's order): the head's row
    for each of them when its ``id2label`` names the same labels in another order (case and spaces
    aside); None when the rows are to be taken as they are. Raises ``ModelError`` naming
    ``config.json``'s ``id2label`` when it names some of the task's labels at other rows but not the
    same set (no order can be trusted)."""
    names = head_names(cfg)
    if names is None or len(names) != len(outputs):
        return None
    mine, wanted = [_key(n) for n in names], [_key(o) for o in outputs]
    if mine == wanted:
        return None
    if sorted(mine) == sorted(wanted) and len(set(mine)) == len(mine):
        return tuple(mine.index(w) for w in wanted)
    moved = [w for i, w in enumerate(wanted) if w in mine and mine.index(w) != i]
    if moved:
        raise ModelError(f"{path / 'config.json'}: id2label names its outputs {names}, the task's labels are "
                         f"{list(outputs)}: {', '.join(repr(m) for m in moved)} sit at other rows, and the two do "
                         "not name the same labels, so no order can be trusted; give a custom task's labels "
                         "in the checkpoint's order (task.labels) or rename them in id2label")
    return None


def reorder_outputs(model: nn.Module, order: tuple[int, ...], path: Path) -> None:
    """Put the rows of ``model``'s last output layer (a ``Linear`` outside its encoder with one row
    per label) in ``order`` (row ``i`` becomes the old row ``order[i]``), in place. Raises
    ``ModelError`` naming ``path`` when no such layer is found (a head tinyplm cannot reorder)."""
    prefix = getattr(model, "base_model_prefix", "") or "\0"
    last = None
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and module.out_features == len(order) and not name.startswith(prefix):
            last = module
    if last is None:
        raise ModelError(f"{path}: its head names the task's labels in another order, and tinyplm finds no output "
                         "layer of one row per label to put in the task's order; give a custom task's labels "
                         "in the checkpoint's order (task.labels)")
    index = torch.tensor(order)
    with torch.no_grad():
        last.weight.copy_(last.weight[index])
        if last.bias is not None:
            last.bias.copy_(last.bias[index])


def head_outputs(path: Path, cfg: dict, labels: tuple[str, ...], is_regression: bool,
                 head: Head, *, replace: bool = False) -> tuple[tuple[str, ...], bool]:
    """(the outputs a task of ``labels`` needs of ``head``, whether ``cfg`` (``path``'s config.json)
    holds such a head to keep). A trained head that cannot serve the task (:func:`head_misfit`: another
    number of outputs, a multi-label head, an ``id2label`` that contradicts the task's order) raises
    ``ModelError``, or with ``replace`` (the model is about to be trained on the task) is dropped:
    the second value is then False and the loader initialises a new head, as for a bare encoder."""
    row = head.row
    outputs = row.output_labels(labels, is_regression)  # the head's own (start, end), 'score' or the labels
    has_head = holds_head(path, cfg, head)
    misfit = head_misfit(path, cfg, outputs, named=row.named_by_labels and not is_regression) if has_head else None
    if misfit and not replace:
        raise ModelError(misfit)
    return outputs, has_head and misfit is None


def shown(outputs: tuple[str, ...], limit: int = 12) -> str:
    """``outputs`` for a one-line message: the first ``limit`` names (each cut and kept on one line by
    :func:`~tinyplm.tasks.io.quoted`), then how many there are in all."""
    named = ", ".join(quoted(name, "", limit=40) for name in outputs[:limit])
    return named if len(outputs) <= limit else f"{named}, ... ({len(outputs)} in all)"


def id2label_problem(path: Path, id2label: dict, label2id: object = None) -> str | None:
    """Why ``id2label`` (of ``path``'s config.json) cannot name a head's outputs, in one line naming
    the file: keys that are not the numbers 0 to n-1 (a gap would renumber the outputs silently: a
    user's label 2 answered as 1), two outputs sharing a name (one score would hide the other's), a
    ``label2id`` of the same names that puts some at other outputs (transformers reads id2label, a
    pipeline or a user's code label2id: one of them answers every such label wrongly, and tinyplm
    cannot tell which); None when it can."""
    where = f"{path / 'config.json'}: id2label"
    try:
        keys = sorted(int(k) for k in id2label)
    except (TypeError, ValueError):
        return f"{where} keys should be class numbers, got {list(id2label)[:5]}"
    if keys != list(range(len(keys))):
        return f"{where} numbers its outputs {keys[:8]}; expected 0 to {len(keys) - 1}, one per output"
    labels = [str(id2label[k]) for k in sorted(id2label, key=int)]
    twice = sorted({name for name in labels if labels.count(name) > 1})
    if twice:
        return f"{where} names two outputs {twice[0]!r}; expected a name of its own for each output"
    return _label2id_contradiction(where, labels, label2id)


def _label2id_contradiction(where: str, labels: list[str], label2id: object) -> str | None:
    """Why ``label2id`` contradicts ``labels`` (id2label's names in output order), when it names the
    same labels and puts some at other outputs; None otherwise (no label2id, or one of other names:
    transformers' defaults left beside a hand-edited id2label say nothing of the order)."""
    if not isinstance(label2id, dict) or sorted(map(str, label2id)) != sorted(labels):
        return None
    moved = [(name, label2id[name]) for name in label2id if str(label2id[name]) != str(labels.index(str(name)))]
    if not moved:
        return None
    name, number = moved[0]
    return (f"{where} puts {name!r} at output {labels.index(str(name))} but label2id at {number}: the two "
            "disagree on which output is which label; make label2id the reverse of id2label (or drop it)")


def head_misfit(path: Path, cfg: dict, outputs: tuple[str, ...], named: bool = True) -> str | None:
    """Why the trained head of ``cfg`` (``path``'s config.json, which holds one) cannot serve a task
    whose head has ``outputs``, in one line naming the file; None when it can. ``named``: the
    task's labels name the outputs (classes, tags), so ``id2label`` must name them one by one
    (:func:`id2label_problem`); a reader's or a regression head's leftover id2label is not read."""
    id2label = cfg.get("id2label")
    if named and isinstance(id2label, dict) and (problem := id2label_problem(path, id2label, cfg.get("label2id"))):
        return problem
    # transformers leaves num_labels/id2label out of config.json for the default of 2 labels.
    found = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    if found != len(outputs):
        kind = "regression head (one score)" if found == 1 else "classifier"
        return f"{path}: its {kind} has {found} outputs but the task needs {len(outputs)} ({shown(outputs)})"
    if cfg.get("problem_type") == "multi_label_classification":
        return (f"{path / 'config.json'}: problem_type multi_label_classification: its head scores each "
                "label on its own (a sigmoid each, any number of labels per text), while tinyplm's tasks, "
                "predict and serve give one label per text (a softmax) and would answer otherwise")
    try:
        output_order(path, cfg, outputs)  # refuses a head whose names contradict the task's order
    except ModelError as err:
        return str(err)
    return None


def fresh_head(model: nn.Module) -> None:
    """Draw the head of ``model`` anew, in place, as BERT initialises one (every ``Linear`` outside its
    encoder ``N(0, initializer_range)`` with zero bias, every ``LayerNorm`` 1 and 0): a trained head
    replaced because it does not fit the task but has the task's shape (a 2-output multi-label head,
    names that contradict the task's) would otherwise keep its weights, since loading drops only
    tensors of another shape. (Not transformers' ``_init_weights``: it skips weights it loaded.)"""
    prefix = getattr(model, "base_model_prefix", "") or "\0"
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
    with torch.no_grad():
        for name, module in model.named_modules():
            if not name or name.startswith(prefix):
                continue
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm) and module.weight is not None:
                module.weight.fill_(1.0)
                if module.bias is not None:
                    module.bias.zero_()


def holds_head(path: Path, cfg: dict, head: Head) -> bool:
    """Whether the checkpoint in ``path`` (``cfg`` its config.json) holds a trained head of ``head``'s
    kind: its ``architectures`` (where given) name one, and its weights hold every tensor of such a
    head (:func:`weights_hold_head`; unknown: read as transformers reads it, a head). A config that
    names a classifier over weights saved without one (a bare encoder's) would otherwise be
    answered by a head drawn at random, differently at each load."""
    names = cfg.get("architectures") or []
    if names and not any(head.row.auto_suffix in a for a in names):
        return False
    return weights_hold_head(path, head) is not False  # named, but the weights may still lack it


def weights_hold_head(path: Path, head: Head) -> bool | None:
    """Whether the safetensors weights in ``path`` hold every tensor of a ``head`` head (the ones
    outside the base model of its transformers class, built on the meta device: no memory), by
    name, read from the files' headers; None when it cannot tell (weights in
    ``pytorch_model.bin``, a config transformers cannot build). For a config without
    ``architectures``, where a bare encoder would otherwise get a head drawn at random."""
    from tinyplm.models.safetensors_header import safetensors_shapes

    single = path / "model.safetensors"
    files = [single] if single.is_file() else sorted(path.glob("model-*-of-*.safetensors"))
    if not files:
        return None
    try:
        import transformers

        config = transformers.AutoConfig.from_pretrained(str(path), trust_remote_code=False)
        with torch.device("meta"):
            model = getattr(transformers, head.row.auto_class).from_config(config)
    except Exception:  # noqa: BLE001  (only a diagnostic: loading names what is wrong with the config)
        return None
    found = {name for file in files for name in safetensors_shapes(file)}
    prefix = f"{model.base_model_prefix}."
    wanted = {k for k in model.state_dict() if not k.startswith(prefix)}
    return bool(wanted) and wanted <= found


def refuse_headless(path: Path, cfg: dict, head: Head) -> None:
    """A checkpoint that holds no ``head`` of the task's kind (:func:`holds_head`: its
    ``architectures`` name a bare encoder, a pre-training head, a tagger read for a sentence task, a
    sentence-embedding model; or, without them, its weights are a bare encoder's) would answer
    from a head initialised at random: ``ModelError`` naming the file and what would work."""
    names = cfg.get("architectures") or []
    if not names:
        if weights_hold_head(path, head) is False:
            raise ModelError(f"{path / 'config.json'}: names no architectures, and its weights hold no {head} head "
                             f"(...{head.row.auto_suffix}): its answers would come from an untrained one; fine-tune "
                             "it on the task first (tinyplm finetune, or teacher.finetune in a recipe)")
        return
    what = ("; a sentence-embedding model is scored with tinyplm embed-eval" if (path / "modules.json").is_file()
            else "")
    if any(head.row.auto_suffix in a for a in names):  # named, but not in the weights (holds_head)
        raise ModelError(f"{path / 'config.json'}: architectures {names} name a {head} head, but the weights in "
                         f"{path} hold none of its tensors (they are a bare encoder's), so its answers would come from "
                         "an untrained one, drawn anew at each load; fine-tune it on the task first (tinyplm "
                         f"finetune, or teacher.finetune in a recipe){what}")
    raise ModelError(f"{path / 'config.json'}: architectures {names} hold no {head} head (...{head.row.auto_suffix}) "
                     "for this task, so its answers would come from an untrained one; fine-tune it on the task "
                     f"first (tinyplm finetune, or teacher.finetune in a recipe){what}")
