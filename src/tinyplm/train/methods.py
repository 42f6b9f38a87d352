"""The fine-tuning methods of a ``TrainSpec`` (config/finetune.py): what the loop trains and what it
hands back.

:func:`adapt` runs before training: it freezes parameters (``frozen``, ``bitfit``), wraps the model
(``peft``'s LoRA, IA3, prompt and prefix tuning; the last-four-layers head) or leaves it untouched
(``full``, ``ulmfit``: the loop builds ULMFiT's groups and unfreezing from ``train/ulmfit.py``).
:func:`finish` runs after it: LoRA and IA3 are merged into the weights, so the result is a plain
``transformers`` model that saves, loads, distils and compresses like any other. Prompt and prefix
tuning stay ``peft`` models (their learned tokens cannot be merged): :func:`save_adapter` /
:func:`load_adapter` keep them as ``peft`` writes them (adapter_config.json and
adapter_model.safetensors: the virtual-token table and the trained task head) beside the base.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tinyplm.config.finetune import DEFAULT_TARGETS, IA3_FEEDFORWARD, PEFT_METHODS, Method
from tinyplm.config.schema import TrainSpec
from tinyplm.errors import RecipeError
from tinyplm.models import roles
from tinyplm.train.feature_head import LastLayersClassifier

#: Task-model class name suffix -> peft task type.
_TASK_TYPES = {"ForSequenceClassification": "SEQ_CLS", "ForTokenClassification": "TOKEN_CLS",
               "ForQuestionAnswering": "QUESTION_ANS"}


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of a trained model: those that train, and all of them (adapters included)."""

    trainable: int
    total: int

    @property
    def share(self) -> float:
        """Trainable parameters as a fraction of all of them."""
        return self.trainable / self.total if self.total else 0.0


def param_counts(model: nn.Module) -> ParamCounts:
    """Count ``model``'s trainable and total parameters (a shared parameter once)."""
    params = {id(p): p for p in model.parameters()}.values()
    return ParamCounts(sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params))


def adapt(model: nn.Module, spec: TrainSpec) -> nn.Module:
    """The module the loop trains for ``spec.method`` (``model`` itself for full and ulmfit, with
    only its ``requires_grad`` flags changed for frozen/pooled and bitfit, else a wrapper). New
    parameters are initialised from ``spec.seed``.

    Raises ``ValueError`` for a method the model's head cannot take (prompt/prefix tuning and the
    last-four-layers head are for sequence classifiers)."""
    method, options = spec.method, spec.method_options
    if method in (Method.FULL, Method.ULMFIT):
        return model
    torch.manual_seed(spec.seed)  # new parts (adapters, prompts, a head) start the same in every run
    if method is Method.FROZEN and options.features == "last4":
        _require_sequence_head(model, "frozen with features: last4")
        return LastLayersClassifier(model)
    if method in (Method.FROZEN, Method.BITFIT):
        heads = {id(p) for head in roles.task_heads(model).values() for p in head.parameters()}
        for name, p in model.named_parameters():
            p.requires_grad_(id(p) in heads or (method is Method.BITFIT and name.endswith(".bias")))
        return model
    return _peft_model(model, spec)


def _peft_model(model: nn.Module, spec: TrainSpec) -> nn.Module:
    """``model`` wrapped by ``peft`` for a method of :data:`PEFT_METHODS`; the task head trains too."""
    import peft  # imported here: only the peft methods need it

    method, options = spec.method, spec.method_options
    task_type = _task_type(model)
    heads = list(roles.task_heads(model))
    if method in (Method.PROMPT_TUNING, Method.PREFIX_TUNING):
        _require_sequence_head(model, method.value)
        if method is Method.PREFIX_TUNING:
            roles.require(model, roles.Stage.PREFIX_TUNING)
        config = _prompt_config(model, method, task_type, options.virtual_tokens)
    else:
        table = roles.roles_of(model)
        problem = options.targets and split_module_problem(table.model_type, table.linears, options.targets)
        if problem:  # the defaults adapt what the family has: a fused module once, for its roles named
            raise RecipeError(f"method_options.targets: {problem}")
        targets = _target_roles(model, options.targets or DEFAULT_TARGETS[method])
        if method is Method.LORA:
            _check_rank(options.r, int(roles.base_model(model).config.hidden_size))
            config = peft.LoraConfig(task_type=task_type, r=options.r, lora_alpha=options.alpha,
                                     lora_dropout=options.dropout, target_modules=list(targets), modules_to_save=heads)
        else:
            ff = [name for name, role in targets.items() if role in IA3_FEEDFORWARD]
            config = peft.IA3Config(task_type=task_type, target_modules=list(targets), feedforward_modules=ff,
                                    modules_to_save=heads)
    return peft.get_peft_model(model, config)


def _check_rank(r: int, hidden: int) -> None:
    """Raise ``RecipeError`` when LoRA's rank ``r`` is not below the model's ``hidden`` size, which every
    target role has on one side: the update of every layer is full rank with more parameters than the
    layer. (A layer pruned narrower than ``r`` is allowed: the others still gain from the low rank.)"""
    if r >= hidden:
        raise RecipeError(f"method_options.r = {r} is not below {hidden}, the hidden size of the model LoRA adapts "
                          f"here: a rank-{r} update of its Linear layers is full rank with more parameters than the "
                          f"layers; use r < {hidden} (a small fraction of it), or method full")


def _target_roles(model: nn.Module, wanted: tuple[str, ...]) -> dict[str, str]:
    """Module name -> Linear role of every module playing one of the ``wanted`` roles in a layer step,
    found on the model as it is: a layer group that ALBERT's steps share is adapted once and stays
    shared (naming layers by index would first give each step a copy of its own, growing the
    model), and a module playing several roles (ModernBERT's fused Wqkv) is named once."""
    wanted_ids = {id(roles.layer_linear(step, role)): role for step in roles.layer_steps(model) for role in wanted}
    return {name: wanted_ids[id(module)] for name, module in model.named_modules(remove_duplicate=False)
            if id(module) in wanted_ids}


def split_module_problem(family: str, linears: Mapping[str, str], wanted: tuple[str, ...]) -> str | None:
    """Why ``wanted`` cannot be adapted on a ``family`` whose ``linears`` (role -> module path inside a
    layer, the role table's) put several roles in one module: an adapter changes a whole Linear, so
    naming some of a fused module's roles (ModernBERT's Wqkv: query, key and value) would adapt the
    others too. None when every module is named with all its roles or none."""
    for path in dict.fromkeys(linears.values()):
        plays = [role for role, at in linears.items() if at == path]
        named = [role for role in plays if role in wanted]
        if named and len(named) < len(plays):
            return (f"{', '.join(named)} is one Linear ({path}) with {', '.join(r for r in plays if r not in named)} "
                    f"in {family}, and an adapter changes the whole of it: name {', '.join(plays)} together, "
                    "or none of them")
    return None


def _prompt_config(model: nn.Module, method: Method, task_type: str, tokens: int):
    """peft's prompt- or prefix-tuning config with the sizes read off the model: prompt tokens are
    word embeddings (E wide in ELECTRA and ALBERT), prefixes are keys and values (hidden wide)."""
    import peft

    config = model.config
    sizes = {"num_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads}
    if method is Method.PROMPT_TUNING:
        return peft.PromptTuningConfig(task_type=task_type, num_virtual_tokens=tokens, **sizes,
                                       token_dim=roles.word_embeddings(model).weight.shape[1])
    return peft.PrefixTuningConfig(task_type=task_type, num_virtual_tokens=tokens, token_dim=config.hidden_size,
                                   **sizes)


def finish(model: nn.Module, spec: TrainSpec) -> nn.Module:
    """The trained model as the rest of tinyplm takes it: LoRA/IA3 merged into a plain model (the
    same logits, no adapter modules left), every parameter trainable again for later stages;
    ``full``/``ulmfit``/``frozen``/``bitfit`` models with every parameter trainable again; prompt
    and prefix tuning's ``peft`` model and the last-four-layers classifier unchanged."""
    if spec.method in (Method.LORA, Method.IA3):
        _unwrap_saved_heads(model)
        model = model.merge_and_unload()
    if spec.method in (Method.PROMPT_TUNING, Method.PREFIX_TUNING) or isinstance(model, LastLayersClassifier):
        return model
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def _unwrap_saved_heads(model: nn.Module) -> None:
    """Put each trained head peft kept aside (``modules_to_save``) back in its place: peft's IA3
    unload cannot do it for a head of several modules (RoBERTa's two-Linear classifier)."""
    from peft.utils import ModulesToSaveWrapper

    for name, module in list(model.named_modules()):
        if isinstance(module, ModulesToSaveWrapper):
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent), leaf, module.modules_to_save[module.active_adapters[0]])


def save_adapter(model: nn.Module, folder: Path) -> Path:
    """Write a prompt- or prefix-tuned ``peft`` model's adapter (its virtual tokens and task head)
    to ``folder`` as safetensors with peft's adapter_config.json; the base model is saved apart.

    Raises ``ValueError`` for a model that is not a ``peft`` model."""
    import peft

    if not isinstance(model, peft.PeftModel):
        raise ValueError(f"{type(model).__name__} is not a peft model: save it with models.save_model")
    model.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)


def load_adapter(base: nn.Module, folder: Path) -> nn.Module:
    """``base`` (the task model the adapter was trained on, freshly loaded) with the adapter saved
    in ``folder`` by :func:`save_adapter` (safetensors only, no remote code), in eval mode."""
    import peft

    return peft.PeftModel.from_pretrained(base, str(folder), is_trainable=False).eval()


def uses_peft(spec: TrainSpec) -> bool:
    """Whether ``spec``'s method comes from the ``peft`` library."""
    return spec.method in PEFT_METHODS


def _task_type(model: nn.Module) -> str:
    name = type(model).__name__
    for suffix, task_type in _TASK_TYPES.items():
        if name.endswith(suffix):
            return task_type
    raise ValueError(f"{name}: peft methods need a sequence-, token- or span-classification task model")


def _require_sequence_head(model: nn.Module, what: str) -> None:
    if not type(model).__name__.endswith("ForSequenceClassification"):
        raise ValueError(f"{what} needs a sentence classifier (a sequence-classification head); "
                         f"this task's model is {type(model).__name__}")
