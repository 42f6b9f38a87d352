"""The checks of a run's preflight on its compress steps against the task's head and the student's
shape: a step that has no rule for the head, or settings the shape cannot take, is refused before
the teacher trains, not when the step is reached. Run by
:func:`tinyplm.run.preflight.preflight`, before anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from tinyplm.config.compress import step_name
from tinyplm.config.schema import RunConfig, StudentSpec, student_name
from tinyplm.errors import ModelError, RecipeError
from tinyplm.models import check_model_dir, resolve_model_dir, roles
from tinyplm.models.shape import SHAPE_KEY
from tinyplm.tasks.heads import Head


def check_compress(cfg: RunConfig, head: Head, teacher: dict) -> None:
    """:func:`check_compress_heads` and :func:`check_compress_shapes` (``teacher``: its config dict)."""
    check_compress_heads(cfg, head)
    check_compress_shapes(cfg, teacher)


#: Steps that keep a PyTorch model with its weights quantized in place (torch.ao int8, int4, bf16).
TORCH_QUANTIZED = ("dynamic_int8", "int4_weight", "bf16")


def check_compress_heads(cfg: RunConfig, head: Head) -> None:
    """Refuse, naming the student and the step, accuracy-controlled int8 (``openvino_int8`` with
    ``max_drop``) for a head whose held-out score it has no rule for (``compress.openvino.CONTROLS``:
    a tagger's or a reader's examples are not scored one by one), and a PyTorch quantization step
    for a sentence-embedding model (saved so, it could not be loaded again as one)."""
    from tinyplm.compress.openvino import CONTROLS

    for spec in cfg.students:
        for step in spec.compress if head.row.vectors else ():
            if step.kind in TORCH_QUANTIZED:
                raise RecipeError(f"student {student_name(spec)}, compress step {step_name(step)}: {step.kind} "
                                  f"keeps a PyTorch model quantized, which a sentence-embedding model (task "
                                  f"'{cfg.task.name}') cannot be loaded as again; use onnx_dynamic_int8, openvino "
                                  "or {kind: runtime, runtime: fastest}, whose forms keep the pooling")
    if head in CONTROLS:
        return
    for spec in cfg.students:
        for step in spec.compress:
            if step.kind == "openvino_int8" and getattr(step, "max_drop", None) is not None:
                have = ", ".join(h.value for h in CONTROLS)
                raise RecipeError(f"student {student_name(spec)}, compress step {step_name(step)}: max_drop "
                                  f"(accuracy-controlled int8) has no rule for the {head.value} head of task "
                                  f"'{cfg.task.name}' (it has one for: {have}); drop max_drop, or use "
                                  "{kind: runtime, runtime: fastest}, which judges a tagger word by word and a "
                                  "reader window by window")


@dataclass(frozen=True)
class _Start:
    """What a student's first compress step is sure to find: its layer count, the widest input of
    an encoder Linear (hidden or FFN width), its vocabulary and word-table width (the largest it
    may be where the recipe leaves it open); and, where every layer is alike (None otherwise: a
    pruned checkpoint), its width, heads per layer and FFN width."""

    layers: int
    widest: int
    vocab: int
    table: int
    hidden: int | None = None
    heads: int | None = None
    head_size: int | None = None
    ffn: int | None = None


def _start_of(cfg: RunConfig, spec: StudentSpec, teacher: dict) -> _Start | None:
    """The shape a transformer student starts its compress steps with (None: a classic student, or
    a checkpoint this check cannot read; the step itself still checks when it runs)."""
    if spec.family is not None:
        return None
    earlier = cfg.earlier_student(spec) if spec.init_from else None
    if earlier is not None:  # a copy of the earlier student as distilled, before its own compress steps
        return _start_of(cfg, earlier, teacher)
    source = teacher
    if spec.init_from and spec.init_from != "teacher":
        try:
            source = check_model_dir(resolve_model_dir(spec.init_from))
        except ModelError:
            return None
    try:
        c = roles.config_shape(SimpleNamespace(**source))
    except ModelError:
        return None
    table = int(source.get("embedding_size") or c.hidden)
    if spec.init_from:
        alike = (None,) * 4 if source.get(SHAPE_KEY) else (c.hidden, c.heads, c.hidden // c.heads, c.ffn)
        return _Start(c.layers, max(c.hidden, c.ffn), int(source["vocab_size"]), table, *alike)
    shape = spec.shape
    layers = len(spec.teacher_layers) if spec.teacher_layers else shape.layers
    hidden, ffn = (shape.hidden, shape.ffn) if shape is not None else (c.hidden, c.ffn)
    heads, size = ((shape.keep_heads or shape.heads), shape.hidden // shape.heads) if shape is not None \
        else (c.heads, c.hidden // c.heads)
    own_table = int(source.get("embedding_size") or hidden)  # a narrowed student's word table is its width
    return _Start(layers, max(hidden, ffn), int(source["vocab_size"]), own_table, hidden, heads, size, ffn)


def _step_problem(step, layers: int, start: _Start) -> tuple[str | None, int]:
    """What in ``step`` cannot work on a model of ``layers`` layers -> (the problem or None, the
    layer count after the step)."""
    if step.kind == "drop_layers":
        if step.layers is not None:
            out = sorted({i for i in step.layers if not 0 <= i < layers})
            if out:
                return f"layers {out} are out of range: the model has layers 0..{layers - 1} here", layers
            if len(set(step.layers)) >= layers:
                return f"it would drop all {layers} layers; keep at least one", layers
            return None, layers - len(set(step.layers))
        if step.count >= layers:
            return f"count {step.count} would drop all {layers} layers; at most {layers - 1}", layers
        return None, layers - step.count
    if step.kind == "share" and step.groups:
        flat = [i for g in step.groups for i in g]
        if len(set(flat)) != len(flat) or any(not 0 <= i < layers for i in flat):
            return f"groups {step.groups} must list distinct layers in 0..{layers - 1} (the model's here)", layers
    if step.kind == "factorize_embeddings" and step.rank >= min(start.vocab, start.table):
        return (f"rank {step.rank} is not below the word table's size ({start.vocab} x {start.table}); "
                f"give a rank of at most {min(start.vocab, start.table) - 1}"), layers
    if step.kind == "int4_weight" and step.group_size > start.widest:
        return (f"group_size {step.group_size} is wider than any row of the encoder's Linear layers (at most "
                f"{start.widest} weights): each row would be padded to a whole group, larger than fp32; "
                f"use at most {start.widest}"), layers
    return None, layers


def check_compress_shapes(cfg: RunConfig, teacher: dict) -> None:
    """Compress step settings the student's shape cannot take (layers out of range, dropping every
    layer, an embedding rank not below the table, an int4 group wider than every row) are refused
    here, naming the student, the step and what would work, not after the training before the step.
    ``teacher``: the teacher's config dict. Raises ``RecipeError``."""
    for spec in cfg.students:
        start = _start_of(cfg, spec, teacher) if spec.compress else None
        if start is None:
            continue
        layers = start.layers
        for step in spec.compress:
            problem, layers = _step_problem(step, layers, start)
            if problem:
                raise RecipeError(f"student {student_name(spec)}, compress step {step_name(step)} "
                                  f"({step.kind}): {problem}")


def compress_notes(cfg: RunConfig, teacher: dict) -> tuple[str, ...]:
    """Compress steps that cannot make their student smaller, said before the run (a step is no
    mistake the run must refuse, but one that removes nothing still costs its scoring and its
    recovery, and a stage in the report that repeats its parent): pruning that keeps every head or
    neuron (``keep`` rounds to all of them), an SVD whose rank by ``ratio`` holds at least as many
    weights as the matrix it replaces (larger and slower), sharing where every group is one layer.
    Judged on the shape the step finds while every layer is alike; from the first step that
    leaves layers unlike (pruning by ``scope: global``), the later ones are not judged."""
    notes = []
    for spec in cfg.students:
        start = _start_of(cfg, spec, teacher) if spec.compress else None
        if start is None or start.heads is None:
            continue
        sizes: dict[str, int | None] = {"layers": start.layers, "hidden": start.hidden, "heads": start.heads,
                                        "head_size": start.head_size, "ffn": start.ffn}
        for step in spec.compress:
            if None in sizes.values():
                break
            said = _step_note(step, sizes)
            if said:
                notes.append(f"student {student_name(spec)}, compress step {step_name(step)} ({step.kind}): {said}")
    return tuple(notes)


def _step_note(step, sizes: dict[str, int | None]) -> str | None:
    """What ``step`` would not do on a model of ``sizes`` (every layer alike) -> a note or None;
    ``sizes`` is updated to the step's result (a value None: layers no longer alike)."""
    layers = sizes["layers"]
    if step.kind in ("prune_heads", "prune_ffn"):
        unit = "heads" if step.kind == "prune_heads" else "ffn"
        each = sizes[unit]
        by_layer = step.scope == "layer"
        kept = max(1, round(step.keep * each)) if by_layer else max(layers, round(step.keep * each * layers))
        total = kept * layers if by_layer else kept
        if total >= each * layers:
            what = "attention heads" if unit == "heads" else "FFN neurons"
            return (f"keep {step.keep:g} keeps all {each * layers} {what} ({each} in each of {layers} layers): it "
                    "removes nothing; lower keep, or drop the step")
        sizes[unit] = kept if by_layer else None
    elif step.kind == "drop_layers":
        sizes["layers"] = layers - (len(set(step.layers)) if step.layers is not None else step.count)
    elif step.kind == "share":
        groups = step.groups or [list(range(layers))]
        if all(len(set(g)) <= 1 for g in groups):
            return "every group is one layer: nothing is shared; list groups of two or more layers"
    elif step.kind == "svd":
        said = _svd_note(step, sizes)
        sizes["hidden"] = None  # factorized layers: the steps after it are not judged
        return said
    return None


def _svd_note(step, sizes: dict[str, int | None]) -> str | None:
    """The roles whose rank by ratio would hold at least as many weights as the matrix (None: none)."""
    hidden, ffn = sizes["hidden"], sizes["ffn"]
    attention = (hidden, sizes["heads"] * sizes["head_size"])  # (in, out) of query, key and value
    dims = {"query": attention, "key": attention, "value": attention, "attn_out": attention[::-1],
            "ffn_in": (hidden, ffn), "ffn_out": (ffn, hidden)}
    larger = []
    for role, rule in step.rules().items():
        if "ratio" not in rule:
            continue
        n_in, n_out = dims[role]
        full = min(n_in, n_out)
        rank = max(1, min(full, round(rule["ratio"] * full)))
        if rank * (n_in + n_out) >= n_in * n_out:
            larger.append(f"{role} rank {rank} of {n_out} x {n_in} (below {-(-n_in * n_out // (n_in + n_out))} "
                          "is smaller)")
    if not larger:
        return None
    return ("the factors would hold at least as many weights as the matrices they replace, so those layers "
            f"would be larger and slower: {'; '.join(larger)}; lower ratio (or use energy)")


#: Compress steps that give each layer of a grouped encoder (ALBERT) its own copy before they work.
EXPANDING = ("prune_heads", "prune_ffn", "drop_layers")


def shared_layer_notes(cfg: RunConfig, teacher: dict) -> tuple[str, ...]:
    """Students that hold more weights than the model they come from, said before the run: a grouped
    encoder (ALBERT: ``num_hidden_layers`` steps run ``num_hidden_groups`` shared groups) stores a
    layer once per group, and its copies do not share: a student of the teacher's layers holds one
    copy per copied layer, and a structured compress step (:data:`EXPANDING`) first gives each
    layer a copy of its own (``models.roles.expand_groups``), so its stage may be larger than its
    parent. No error: pruning may still pay where speed, not size, is the aim."""
    notes = []
    for spec in cfg.students:
        source = teacher if spec.init_from == "teacher" or spec.teacher_layers else _dir_config(spec.init_from)
        family = roles.ROLES.get(source.get("model_type")) if source else None
        if family is None or not family.group_key or spec.family is not None:
            continue
        groups, layers = int(source.get(family.group_key) or 1), int(source.get("num_hidden_layers") or 1)
        name, kind = student_name(spec), source.get("model_type")
        if spec.teacher_layers and len(spec.teacher_layers) > groups:
            notes.append(f"student {name}: copies {len(spec.teacher_layers)} layers of the {kind} teacher, whose "
                         f"{layers} layers share {groups} group(s): each copy holds its own weights, so the student's "
                         "encoder is larger than the teacher's")
        elif spec.init_from and not spec.teacher_layers and groups < layers:
            step = next((c for c in spec.compress if c.kind in EXPANDING), None)
            if step is not None:
                notes.append(f"student {name}, compress step {step_name(step)} ({step.kind}): the {kind} model's "
                             f"{layers} layers share {groups} group(s), and the step first gives each layer a copy of "
                             f"its own: its stage may hold more weights than its parent (up to {layers // groups}x "
                             "the encoder's) even after pruning")
    return tuple(notes)


def _dir_config(name: str | None) -> dict | None:
    """The config.json of the checkpoint ``name`` names (None: not a readable checkpoint, or an
    earlier student, whose own notes come from its source)."""
    if not name:
        return None
    try:
        return check_model_dir(resolve_model_dir(name))
    except ModelError:
        return None
