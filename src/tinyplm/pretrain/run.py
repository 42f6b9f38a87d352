"""``tinyplm pretrain``: one pre-training run from a :class:`PretrainRecipe`.

Data path: corpus files -> paragraphs (documents kept for NSP/SOP) -> held-out split -> texts or
sentence pairs -> tokenised with word boundaries -> the core training loop with a
:class:`~tinyplm.pretrain.objective.PretrainObjective` (checkpoints, resume, bf16, progress bar
and JSONL log as in every stage) -> held-out evaluation before and after -> the model saved in
Hugging Face format with its tokenizer.

Run dir::

    config.resolved.yaml   the recipe as run
    checkpoints/           the loop's checkpoints (resume)
    logs/train.jsonl       train/eval events
    mlm_head/              continued pre-training of a checkpoint without an MLM head: the head
                           fitted first (``fit-mlm-head``), the starting point
    model/                 the pre-trained model (MLM: BertForMaskedLM or BertForPreTraining;
                           ELECTRA: the discriminator as BertModel) and tokenizer
    pretrain.json          held-out metrics before and after, steps, time, objective
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import yaml

from tinyplm.config.changes import resume_blockers
from tinyplm.config.pretrain import PretrainRecipe
from tinyplm.errors import ModelError, RecipeError
from tinyplm.files import claim_run_dir, reuse_finished, write_json_atomic
from tinyplm.models.infer import use_bf16
from tinyplm.models.io import save_model
from tinyplm.models.loaded import loaded
from tinyplm.models.loading import (
    check_model_dir,
    load_tokenizer,
    quiet_transformers,
    resolve_model_dir,
)
from tinyplm.pretrain.corpus import read_documents, split_holdout
from tinyplm.pretrain.data import encode_texts
from tinyplm.pretrain.evaluate import (
    evaluate_electra,
    evaluate_mlm,
    held_out_targets,
    pseudo_perplexity,
    unigram_log_probs,
)
from tinyplm.pretrain.objective import PretrainObjective
from tinyplm.pretrain.pairs import build_pairs
from tinyplm.pretrain.preflight_checks import check_coverage, check_init, check_texts, check_tokenizer
from tinyplm.tasks.encoding import Encoded
from tinyplm.train import StageIO, train
from tinyplm.train.masking import Masking

RESULT_FILE = "pretrain.json"


@dataclass
class PretrainData:
    """Tokenised training and held-out texts, and the unigram distribution of the training tokens."""

    train: Encoded
    held: Encoded
    unigram: torch.Tensor


@dataclass(kw_only=True)
class PretrainResult:
    """What one pre-training run did: ``pretrain.json`` is :meth:`to_dict`.

    ``objective``: the recipe's objective section as run; ``init``: the checkpoint it continued
    (None: from scratch, in ``shape``); ``params``: the saved model's parameters; ``train_texts`` /
    ``held_texts``: training and held-out examples encoded: windows of ``corpus.max_length`` pieces
    (a longer text is read in several), or pairs; ``train_items``: the corpus items the training
    windows come from; ``steps``, ``train_seconds`` and
    ``stopped_by`` (epochs, max_steps, budget) of the loop; ``before`` / ``after``: the held-out
    figures before and after training (``tinyplm.pretrain.evaluate``: MLM loss and accuracy, the
    unigram loss, pseudo-perplexity, NSP/SOP or replaced-token accuracy); ``history``: the dev
    evaluations during training; ``seconds``: the whole run, data preparation included.
    """

    name: str
    objective: dict[str, Any]
    init: str | None = None
    shape: dict[str, Any] | None = None
    params: int = 0
    train_texts: int = 0
    held_texts: int = 0
    train_items: int = 0
    steps: int = 0
    train_seconds: float = 0.0
    stopped_by: str = "epochs"
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PretrainResult:
        """A result from ``pretrain.json``; keys this version does not know are left out."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def output_dir(recipe: PretrainRecipe) -> Path:
    return Path(recipe.output_dir.replace("{name}", recipe.name))


def model_class(recipe: PretrainRecipe):
    """The transformers class trained: BertForPreTraining (pairs), BertForMaskedLM, or BertModel (ELECTRA)."""
    from transformers import BertForMaskedLM, BertForPreTraining, BertModel

    if recipe.objective.kind == "electra":
        return BertModel
    return BertForPreTraining if recipe.objective.pairs else BertForMaskedLM


def build_model(recipe: PretrainRecipe, run_dir: Path, train_texts: list[str]):
    """-> (model, tokenizer): a new model of ``shape``, or ``init`` loaded (its MLM head fitted first if missing)."""
    from transformers import AutoTokenizer, BertConfig

    quiet_transformers()
    cls = model_class(recipe)
    if recipe.shape is None:
        src = resolve_model_dir(recipe.init)
        if recipe.objective.kind == "mlm" and not _has_head(src):
            src = _fit_head(recipe, src, run_dir, train_texts)
        config = BertConfig.from_pretrained(str(src))
        if config.model_type != "bert":
            raise ModelError(f"{src}: pre-training supports BERT checkpoints, not {config.model_type}")
        model = loaded(cls.from_pretrained(str(src), trust_remote_code=False), src)
        tok = load_tokenizer(Path(recipe.tokenizer) if recipe.tokenizer else src, model.config.vocab_size)
        return model, tok
    tok_dir = Path(recipe.tokenizer) if recipe.tokenizer else resolve_model_dir("minilm-l6")
    tok = AutoTokenizer.from_pretrained(str(tok_dir), trust_remote_code=False)
    s = recipe.shape
    config = BertConfig(vocab_size=len(tok), hidden_size=s.hidden, num_hidden_layers=s.layers,
                        num_attention_heads=s.heads, intermediate_size=s.ffn,
                        max_position_embeddings=max(512, recipe.corpus.max_length),
                        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else 0)
    torch.manual_seed(recipe.train.seed)
    return cls(config), tok


def _has_head(src: Path) -> bool:
    from tinyplm.pretrain.mlm_head import has_mlm_head

    return has_mlm_head(src)


def _fit_head(recipe: PretrainRecipe, src: Path, run_dir: Path, texts: list[str]) -> Path:
    """Continued pre-training of a bare encoder starts from it with a fitted MLM head."""
    from tinyplm.pretrain.mlm_head import fit_mlm_head

    out = run_dir / "mlm_head"
    if not (out / "model.safetensors").is_file():
        # resumed with the run: an interrupted fit's checkpoints are this run's (a --force run starts anew)
        fit_mlm_head(src, texts, out, steps=recipe.fit_head_steps, max_length=recipe.corpus.max_length,
                     seed=recipe.train.seed, precision=recipe.train.precision, resume=True)
    return out


@dataclass
class Texts:
    """Training and held-out paragraphs, each also grouped by document (for NSP/SOP pairs)."""

    train_docs: list[list[str]]
    held_docs: list[list[str]]

    @property
    def train(self) -> list[str]:
        return [t for d in self.train_docs for t in d]

    @property
    def held(self) -> list[str]:
        return [t for d in self.held_docs for t in d]


def load_texts(recipe: PretrainRecipe) -> Texts:
    """The corpus split into training and held-out paragraphs; deterministic by seed."""
    c = recipe.corpus
    docs = read_documents([Path(p) for p in c.paths], max_items=c.max_docs, text_field=c.text_field)
    items = [(d, text) for d, doc in enumerate(docs) for text in doc]
    train, held = split_holdout(items, c.holdout, recipe.train.seed)

    def grouped(part: list[tuple[int, str]]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in docs]
        for d, text in part:
            out[d].append(text)
        return [d for d in out if d]

    return Texts(grouped(train), grouped(held))


def prepare_data(recipe: PretrainRecipe, tok, texts: Texts, vocab_size: int) -> PretrainData:
    c, spec = recipe.corpus, recipe.objective
    if spec.pairs:
        words = c.segment_words or max(4, int((c.max_length - 3) / 2 / 1.3))
        train_pairs = build_pairs(texts.train_docs, spec.pairs, words, recipe.train.seed)
        held_pairs = build_pairs(texts.held_docs, spec.pairs, words, recipe.train.seed + 1)
        train_enc = encode_texts(train_pairs, tok, c.max_length)
        held_enc = encode_texts(held_pairs[: recipe.eval.max_texts], tok, c.max_length)
    else:
        train_enc = encode_texts(texts.train, tok, c.max_length)
        held_enc = encode_texts(texts.held[: recipe.eval.max_texts], tok, c.max_length)
    unigram = unigram_log_probs(train_enc, vocab_size, tuple(tok.all_special_ids))
    return PretrainData(train_enc, held_enc, unigram)


def make_masking(recipe: PretrainRecipe, tok, vocab_size: int) -> Masking:
    m = recipe.objective.masking
    return Masking.from_tokenizer(tok, m.rate, vocab_size, split=tuple(m.split), strategy=m.strategy,
                                  span_p=m.span_p, max_span=m.max_span, max_ngram=m.max_ngram)


def held_out_metrics(recipe: PretrainRecipe, model, objective: PretrainObjective, data: PretrainData,
                     pppl: bool) -> dict[str, float]:
    """The held-out figures (module docstring of ``tinyplm.pretrain.evaluate``), in the recipe's
    ``eval.precision`` (fp32 by default, whatever the training ran in)."""
    bf16 = use_bf16(recipe.eval.precision)
    if recipe.objective.kind == "electra":
        out = evaluate_electra(model, objective, data.held, bf16=bf16)
    else:
        out = evaluate_mlm(model, data.held, objective.masking, data.unigram, recipe.objective.pairs, bf16=bf16)
        if pppl and recipe.eval.pppl_texts:
            out["pseudo_perplexity"] = pseudo_perplexity(model, data.held, objective.masking, recipe.eval.pppl_texts,
                                                         recipe.eval.pppl_max_length, bf16=bf16)
    model.train()
    return {k: round(v, 5) for k, v in out.items()}


def preflight(recipe: PretrainRecipe) -> Texts:
    """Check what a pre-training run reads before it writes anything: the corpus (every file
    read; a held-out text, NSP/SOP pairs), the ``init`` checkpoint (BERT, positions for
    ``corpus.max_length``) and the tokenizer (a mask token): :mod:`tinyplm.pretrain.preflight_checks`.
    Returns the corpus split; raises ``DataError``/``ModelError``/``RecipeError`` naming the file or key."""
    texts = load_texts(recipe)
    check_texts(recipe, texts.train_docs, texts.held_docs)
    if recipe.tokenizer and not Path(recipe.tokenizer).is_dir():
        raise ModelError(f"{recipe.tokenizer}: tokenizer dir not found; make it first with `tinyplm tokenizer "
                         f"train CORPUS --out {recipe.tokenizer}` (or point 'tokenizer' at an existing one)")
    if recipe.init is not None:
        src = resolve_model_dir(recipe.init)
        config = check_model_dir(src)
        check_init(recipe, src, config)
        where = Path(recipe.tokenizer) if recipe.tokenizer else src
        tok = load_tokenizer(where, int(config["vocab_size"]))
    elif recipe.tokenizer:  # a model from scratch is sized to its tokenizer: any size fits
        where = Path(recipe.tokenizer)
        tok = load_tokenizer(where, 2**31)
    else:
        return texts  # minilm-l6's own tokenizer
    check_tokenizer(recipe, tok, where)
    check_coverage(recipe, tok, where, texts.train)
    return texts


def pretrain(recipe: PretrainRecipe, *, resume: bool = False, force: bool = False) -> PretrainResult:
    """Run ``recipe`` (see module docstring) -> what it did (``pretrain.json`` holds it).

    The run dir is claimed like any run's (``files.claim_run_dir``): refused while another process
    holds it; a finished run is replaced only with ``force``; an unfinished one continues with
    ``resume`` (same recipe) or restarts with ``force``. Raises ``RunDirError`` for those,
    ``DataError``/``ModelError`` for bad inputs.
    """
    run_dir = output_dir(recipe)
    started = time.perf_counter()
    texts = preflight(recipe)  # bad input fails here, before the run dir is touched
    with claim_run_dir(run_dir, resolved_text(recipe), resume=resume, force=force, finished=RESULT_FILE,
                       compare=resume_blockers) as claim:
        return _pretrain_claimed(recipe, run_dir, texts, claim.resumed, started)


def pretrain_or_reuse(recipe: PretrainRecipe) -> PretrainResult:
    """The record of a finished pre-training run of exactly this recipe if its run dir holds one
    (``files.reuse_finished``: one of another recipe is refused); else the run, continued from
    its checkpoints when an unfinished one is there."""
    if reuse_finished(output_dir(recipe), resolved_text(recipe), finished=RESULT_FILE):
        return PretrainResult.from_dict(json.loads((output_dir(recipe) / RESULT_FILE).read_text(encoding="utf-8")))
    return pretrain(recipe, resume=True)


def resolved_text(recipe: PretrainRecipe) -> str:
    """The recipe with every default, as written to ``config.resolved.yaml``."""
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def _pretrain_claimed(recipe: PretrainRecipe, run_dir: Path, texts: Texts, resume: bool,
                      started: float) -> PretrainResult:
    model, tok = build_model(recipe, run_dir, texts.train)
    vocab = model.config.vocab_size
    data = prepare_data(recipe, tok, texts, vocab)
    objective = PretrainObjective(recipe.objective, make_masking(recipe, tok, vocab), model, recipe.train.seed)
    if not held_out_targets(data.held, objective.masking):
        raise RecipeError(f"objective.masking.rate {recipe.objective.masking.rate} masks no token of the "
                          f"{len(data.held)} held-out texts, so their loss and accuracy would read 0 for any model; "
                          f"raise it or hold out more (corpus.holdout). Nothing was trained; {run_dir} holds no "
                          "model (run it again with --force once the recipe is changed)")
    before = held_out_metrics(recipe, model, objective, data, pppl=recipe.init is not None)
    primary = "rtd_accuracy" if recipe.objective.kind == "electra" else "mlm_accuracy"
    io = StageIO("pretrain", run_dir / "checkpoints", run_dir / "logs" / "train.jsonl", resume=resume)
    result = train(model, data.train, objective, spec=recipe.train, io=io, primary=primary,
                   evaluate=lambda m: held_out_metrics(recipe, m, objective, data, pppl=False))
    after = held_out_metrics(recipe, result.model, objective, data, pppl=True)
    save_model(result.model, tok, run_dir / "model")
    record = PretrainResult(
        name=recipe.name, objective=recipe.objective.model_dump(mode="json"),
        init=recipe.init, shape=recipe.shape.model_dump() if recipe.shape else None,
        params=sum(p.numel() for p in result.model.parameters()),
        train_texts=len(data.train), held_texts=len(data.held), train_items=len(texts.train),
        steps=result.steps, train_seconds=round(result.seconds, 1), stopped_by=result.stopped_by,
        before=before, after=after, history=result.history,
        seconds=round(time.perf_counter() - started, 1),
    )
    write_json_atomic(run_dir / RESULT_FILE, record.to_dict())
    return record
