"""How a training stage adapts its model: the fine-tuning ``method`` of a ``TrainSpec`` and its options.

``full`` trains every weight with one learning rate (the default). ``frozen`` trains the task head
on a frozen encoder (its pooled output, or the [CLS] vectors of the last four layers concatenated:
Devlin et al.'s best feature-based setting). ``ulmfit`` unfreezes layer groups from the top, one per
``unfreeze_every`` steps (default: one per epoch), with learning rates divided by ``lr_decay`` per
group down and a slanted-triangular schedule (Howard & Ruder 2018). ``bitfit`` trains the biases
and the head (Ben Zaken et al. 2022). ``lora``, ``ia3``, ``prompt_tuning`` and ``prefix_tuning``
come from the ``peft`` library.

The options are one flat section; an option set for a method that does not read it is an error
naming the option and the methods that do.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Method(StrEnum):
    """The fine-tuning methods (the recipe's ``method:``)."""

    FULL = "full"
    FROZEN = "frozen"
    ULMFIT = "ulmfit"
    BITFIT = "bitfit"
    LORA = "lora"
    IA3 = "ia3"
    PROMPT_TUNING = "prompt_tuning"
    PREFIX_TUNING = "prefix_tuning"


#: Methods the ``peft`` library implements.
PEFT_METHODS = frozenset({Method.LORA, Method.IA3, Method.PROMPT_TUNING, Method.PREFIX_TUNING})
#: Methods that train the model's own weights, so ``train.keep_start_weights`` can average them with the start.
START_AVERAGE_METHODS = frozenset({Method.FULL, Method.ULMFIT, Method.BITFIT})
#: Methods whose trained model is saved as a plain checkpoint (LoRA and IA3 merged into the weights).
CHECKPOINT_METHODS = frozenset({Method.FULL, Method.ULMFIT, Method.BITFIT, Method.LORA, Method.IA3})
#: Encoder Linear roles (models/roles.py) each adapter method wraps when ``targets`` is not given.
#: LoRA adapts every encoder Linear, not the paper's query/value only: at an equal budget on SST-2,
#: scored on held-out training examples (benchmarks/finetune_methods.py --holdout), rank 8 on all six
#: roles read higher than on query/value (the figures: docs/results/finetune-methods.md).
DEFAULT_TARGETS = {Method.LORA: ("query", "key", "value", "attn_out", "ffn_in", "ffn_out"),
                   Method.IA3: ("key", "value", "ffn_out")}
#: IA3 scales a feed-forward layer's input rather than its output: the roles that are feed-forward.
IA3_FEEDFORWARD = ("ffn_out",)


class MethodOptions(BaseModel):
    """Options of the fine-tuning methods; each names the methods that read it.

    (A plain pydantic model with the ``Section`` settings: ``config.base`` imports this module, so
    it cannot import ``Section`` back.)"""

    model_config = ConfigDict(extra="forbid", frozen=True)

    features: Literal["pooled", "last4"] = Field(
        "pooled", description="frozen: head on the pooled output or on the last four layers' [CLS] concatenated")
    unfreeze_every: int | None = Field(
        None, ge=1, description="ulmfit: steps between unfreezing the next layer group down (default: one epoch)")
    lr_decay: float = Field(2.6, ge=1, description="ulmfit: learning rate divided by this per layer group down")
    stlr_cut: float = Field(0.1, gt=0, lt=1, description="ulmfit: fraction of training spent raising the LR")
    stlr_ratio: float = Field(32.0, ge=1, description="ulmfit: how much smaller the lowest LR is than the peak")
    r: int = Field(8, ge=1, description="lora: rank of the update")
    alpha: float = Field(16.0, gt=0, description="lora: scaling numerator (update scaled by alpha / r)")
    dropout: float = Field(0.1, ge=0, lt=1, description="lora: dropout on the adapter's input")
    targets: tuple[str, ...] | None = Field(
        None, min_length=1, description="lora, ia3: encoder Linear roles to adapt (query key value attn_out ffn_in "
                                        "ffn_out); default lora: all six, ia3: key value ffn_out")
    virtual_tokens: int = Field(20, ge=1, description="prompt_tuning, prefix_tuning: learned tokens")


#: Option -> the methods that read it (an option set for another method is an error).
OPTION_METHODS: dict[str, frozenset[Method]] = {
    "features": frozenset({Method.FROZEN}),
    "unfreeze_every": frozenset({Method.ULMFIT}),
    "lr_decay": frozenset({Method.ULMFIT}),
    "stlr_cut": frozenset({Method.ULMFIT}),
    "stlr_ratio": frozenset({Method.ULMFIT}),
    "r": frozenset({Method.LORA}),
    "alpha": frozenset({Method.LORA}),
    "dropout": frozenset({Method.LORA}),
    "targets": frozenset({Method.LORA, Method.IA3}),
    "virtual_tokens": frozenset({Method.PROMPT_TUNING, Method.PREFIX_TUNING}),
}

LINEAR_ROLE_NAMES = ("query", "key", "value", "attn_out", "ffn_in", "ffn_out")  # = models.roles.LINEAR_ROLES


def check_options(method: Method, options: MethodOptions) -> None:
    """Raise ``ValueError`` when ``options`` sets an option ``method`` does not read, or names an
    unknown Linear role in ``targets``."""
    for name in sorted(options.model_fields_set):
        readers = OPTION_METHODS[name]
        if method not in readers:
            raise ValueError(f"method_options.{name} is read by {', '.join(sorted(readers))}, "
                             f"not by method {method.value}")
    unknown = [t for t in options.targets or () if t not in LINEAR_ROLE_NAMES]
    if unknown:
        raise ValueError(f"method_options.targets: unknown role(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(LINEAR_ROLE_NAMES)}")


def saves_checkpoint(method: Method, options: MethodOptions) -> bool:
    """Whether a model trained with ``method`` is saved as a plain checkpoint (loadable by
    ``models.load_classifier``, so it can be a teacher, a student or a compression input)."""
    return method in CHECKPOINT_METHODS or (method is Method.FROZEN and options.features == "pooled")


def trained_sections(section: BaseModel, where: str = "") -> list[tuple[str, BaseModel]]:
    """Every training section (a ``TrainSpec``: it has ``method`` and ``method_options``) inside a
    recipe section, with its dotted place (``students.0.train``)."""
    if isinstance(getattr(section, "method_options", None), MethodOptions):
        return [(where, section)]
    found: list[tuple[str, BaseModel]] = []
    for name in type(section).model_fields:
        value = getattr(section, name)
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            if isinstance(item, BaseModel):
                place = ".".join(p for p in (where, name, None if i is None else str(i)) if p)
                found += trained_sections(item, place)
    return found


def unsaved_form_error(recipe: BaseModel) -> str | None:
    """The message for the first training section of a run recipe whose method leaves no plain
    checkpoint (a run saves, measures, distils from and compresses every stage's model as one),
    or None when every section's does."""
    for where, spec in trained_sections(recipe):
        if not saves_checkpoint(spec.method, spec.method_options):
            form = "features: last4" if spec.method is Method.FROZEN else f"method: {spec.method.value}"
            return (f"{where}: {form} trains a model that is not a plain checkpoint (a peft adapter or a head over "
                    "four layers), so a run cannot save, measure or distil it; use lora, ia3, bitfit, frozen "
                    "(features: pooled), ulmfit or full here, or benchmarks/finetune_methods.py to compare it")
    return None
