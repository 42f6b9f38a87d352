"""A classic student in the run: built, trained by the one loop (or fitted), saved, measured.

``tfidf_lr`` is fitted by scikit-learn on the task's training set (balanced class weights when
the task weighs its classes). The LSTM-based ones take their vocabulary from the training texts
(``lstm``/``bilstm``: word vectors random, or word2vec / GloVe trained on the corpus and cached
under ``cache_dir/family/``; ``feature_bilstm``: the teacher's tokenizer and a frozen encoder;
``static``/``static_cnn``/``static_bilstm``: the teacher's tokenizer and a table made from an encoder's outputs),
then train stage by stage with :func:`tinyplm.train.train` and a
:class:`~tinyplm.train.prediction.PredictionObjective` (hard labels, soft-target KD or Tang et al.'s
logit MSE against the fine-tuned teacher's cached logits). A word-tokenised student is trained on
the *same examples in the same order* as the teacher's encoding of that data
(``StageData.split``), so row i of the teacher's logits is its example i. The student's own
encodings of the eval splits go with its :class:`StageResult`, so it is scored and timed on the
same sentences as every other model.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tinyplm.config.classic import SENTENCE_ARCHS, BiLMSpec, EmbeddingSpec, FamilySpec
from tinyplm.config.schema import StageSpec, StudentSpec, student_name
from tinyplm.errors import RecipeError
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.files import atomic_path, write_json_atomic
from tinyplm.models import load_classifier, save_model
from tinyplm.models.classic import FamilyConfig, WordTokenizer, build_module, family_shape
from tinyplm.models.classic.config import STATIC_ARCHS, TEACHER_TOKENIZED
from tinyplm.models.classic.vectors import WordVectors, train_glove, train_word2vec
from tinyplm.models.infer import use_bf16
from tinyplm.report.info import (
    BiLMInfo,
    ClassicInfo,
    StageInfo,
    StaticTableInfo,
    TrainingInfo,
    WordVectorsInfo,
    training_from_saved,
)
from tinyplm.report.records import StageKind
from tinyplm.run.classic_embedding import run_static_sentence
from tinyplm.run.inputs import RunInputs, stamp_task
from tinyplm.run.results import StageResult, StudentOutcome, train_info
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.tasks.heads import Head
from tinyplm.tasks.holdout import selection_evals, selection_metric
from tinyplm.train import StageIO, get_accelerator, train
from tinyplm.train.objective import Batch
from tinyplm.train.prediction import PredictionObjective


def run_classic(spec: StudentSpec, inp: RunInputs) -> StudentOutcome:
    """Build, train (or fit) and save one classic student -> its outcome (reloaded when a
    finished one is in the run dir). The task is a sentence classification (``run.preflight``
    checks it before anything trains), or the embedding task for a sentence arch
    (:mod:`tinyplm.run.classic_embedding`)."""
    if spec.family.arch in SENTENCE_ARCHS:  # the embedding task's: a sentence encoder, no classifier
        return run_static_sentence(spec, inp)
    name, acc = student_name(spec), get_accelerator()
    out = inp.paths.student(name)
    if (finished := inp.paths.finished(out)) is not None:
        model, tok = load_classifier(out, inp.data.labels, False, inp.data.head)
        return _outcome(name, model, tok, inp, replace(StageInfo.from_saved(finished), reused=True))
    if spec.family.arch == "tfidf_lr":
        model, tok, info = _fit_tfidf(spec.family, inp)
    else:
        model, tok, info = _train_stages(spec, inp)
    if acc.is_main_process:
        stamp_task(model, inp.task)
        save_model(model, tok, out)
        inp.paths.save_info(out, info)
    acc.wait_for_everyone()
    return _outcome(name, model, tok, inp, info)


def _outcome(name: str, model: nn.Module, tok, inp: RunInputs, info: StageInfo) -> StudentOutcome:
    own = None if tok is inp.tokenizer else encode_evals(inp.data, tok, inp.task.max_length, inp.task.max_eval_examples)
    result = StageResult(name, model, f"students/{name}", StageKind.STUDENT, family_shape(model.config),
                         info=info, evals=own)
    return StudentOutcome(model, result, name)


def _fit_tfidf(fam: FamilySpec, inp: RunInputs) -> tuple[nn.Module, WordTokenizer, StageInfo]:
    from tinyplm.models.classic.tfidf import fit_tfidf

    ex, t = fam.tfidf, time.perf_counter()
    examples = inp.stage_data.split("task").examples
    model, tok, info = fit_tfidf([e.text for e in examples], [e.label for e in examples], len(inp.data.labels),
                                 pairs=[e.text_pair for e in examples], ngram_max=ex.ngram_max, min_df=ex.min_df,
                                 max_features=ex.max_features, c=ex.c, max_iter=ex.max_iter,
                                 balanced=inp.data.class_weights is not None, id2label=dict(enumerate(inp.data.labels)))
    fitted = model.weight.numel() + model.bias.numel()  # the coefficients; the idf is counted, not trained
    fit = TrainingInfo(train_seconds=round(time.perf_counter() - t, 1), examples=len(examples),
                       trainable_params=fitted, total_params=sum(p.numel() for p in model.parameters()))
    return model, tok, StageInfo(init="scikit-learn fit", training=[fit], classic=ClassicInfo(**info))


def _train_stages(spec: StudentSpec, inp: RunInputs) -> tuple[nn.Module, object, StageInfo]:
    """The student's stages in order (each saved as ``students/<name>.stage-<k>`` when there are
    several, so a resumed run skips finished ones) -> (model, tokenizer, info)."""
    name, stages = student_name(spec), spec.stage_specs()
    torch.manual_seed(stages[0].train.seed)
    model, tok, made = initial_model(spec.family, inp, tuple(dict.fromkeys(s.data for s in stages)))
    evals = inp.evals if tok is inp.tokenizer else encode_evals(inp.data, tok, inp.task.max_length,
                                                                inp.task.max_eval_examples)
    infos = []
    for k, stage in enumerate(stages):
        last = k == len(stages) - 1
        label = stage.name or (f"stage-{k}" if len(stages) > 1 else "")
        stage_dir = inp.paths.student(f"{name}.stage-{k}")
        if not last and (finished := inp.paths.finished(stage_dir)) is not None:
            model, _ = load_classifier(stage_dir, inp.data.labels, False, inp.data.head)
            infos.append(replace(training_from_saved(finished), reused=True))
            continue
        model, info = train_classic_stage(model, tok, stage, inp, evals, f"{name}/{label}" if label else name,
                                         f"{name}.stage-{k}")
        infos.append(replace(info, stage=label, data=stage.data))
        if not last and get_accelerator().is_main_process:
            save_model(model, tok, stage_dir)
            inp.paths.save_info(stage_dir, infos[-1])
    return model, tok, replace(made, training=infos)


def train_classic_stage(model: nn.Module, tok, stage: StageSpec, inp: RunInputs, evals: dict, log_name: str,
                       ckpt_name: str) -> tuple[nn.Module, TrainingInfo]:
    """One stage by the one training loop -> (trained model, info for the report)."""
    teacher_enc = inp.stage_data.get(stage.data)
    enc = teacher_enc if tok is inp.tokenizer else encode_split(inp.stage_data.split(stage.data), tok,
                                                                inp.task.max_length)
    o = stage.objective
    objective = PredictionObjective(o.kd_weight, o.hard_weight, o.temperature, False, Head.SEQUENCE, o.logit_mse,
                                    inp.data.class_weights)
    bf16, spec, chosen_on = use_bf16(stage.train.eval_precision), stage.train, selection_evals(inp.data, evals)
    result = train(model, enc, objective, spec=spec, primary=selection_metric(inp.data),
                   io=StageIO(log_name, inp.paths.checkpoints(ckpt_name), inp.paths.log, resume=True),
                   evaluate=lambda m: evaluate_model(m, inp.data, chosen_on, bf16=bf16,
                                                     batch_size=spec.eval_batch_size),
                   teacher_logits=inp.teachers.logits(teacher_enc) if objective.needs_teacher_logits else None)
    shown = {k: v for k, v in o.model_dump(include={"kd_weight", "hard_weight", "logit_mse"}).items() if v}
    return result.model, replace(train_info(result, spec, shown, method=False), examples=len(enc))


def initial_model(fam: FamilySpec, inp: RunInputs,
                  data: tuple[str, ...] = ("task",)) -> tuple[nn.Module, object, StageInfo]:
    """The untrained student, its tokenizer and how it was initialised (``data``: the kinds of
    training data its stages read; a static student's table keeps the pieces they use)."""
    labels = dict(enumerate(inp.data.labels))
    if fam.arch in TEACHER_TOKENIZED:
        from tinyplm.models.roles import base_model

        encoder = base_model(inp.teachers.finetuned) if fam.encoder == "finetuned" else inp.teachers.get(fam.encoder)
    if fam.arch in STATIC_ARCHS:
        return _static_model(fam, encoder, labels, inp, data)
    if fam.arch == "feature_bilstm":
        from tinyplm.models.classic.features import feature_bilstm

        model = feature_bilstm(encoder, len(labels), hidden=fam.hidden, layers=fam.lstm_layers,
                               feature_layers=fam.feature_layers, pooling=fam.pooling, dropout=fam.dropout,
                               id2label=labels)
        return model, inp.tokenizer, StageInfo(init=f"frozen {fam.encoder} encoder, last {fam.feature_layers} layers")
    examples = inp.stage_data.split("task").examples
    tok = WordTokenizer.build([t for e in examples for t in (e.text, e.text_pair) if t], fam.vocab_size,
                              fam.min_count)
    if fam.arch == "elmo_bilstm":
        return _elmo_model(fam, tok, labels, inp)
    e = fam.embeddings
    config = FamilyConfig(arch=fam.arch, vocab_size=len(tok), embed_dim=e.dim, hidden=fam.hidden,
                          layers=fam.lstm_layers, bidirectional=fam.arch == "bilstm", pooling=fam.pooling,
                          dropout=fam.dropout, embeddings=e.kind, num_labels=len(labels), id2label=labels)
    model = build_module(config)
    words = ClassicInfo(words=len(tok) - 3)
    if e.kind != "random":
        recipe = inp.stage_data.corpus
        corpus, field = (e.corpus, e.text_field) if e.corpus else (recipe.paths, recipe.text_field)
        vectors, made = word_vectors(e, corpus, inp.stage_data.cache_dir, field)
        table, found = vectors.table_for(tok.vocab, seed=e.seed)
        with torch.no_grad():
            model.embeddings.weight.copy_(table)
        words = replace(words, vectors=made, vocabulary_found=round(found, 4))
    model.embeddings.weight.requires_grad_(not e.freeze)
    return model, tok, StageInfo(init=f"{e.kind} embeddings", classic=words)


def _static_model(fam: FamilySpec, encoder: nn.Module, labels: dict, inp: RunInputs,
                  data: tuple[str, ...]) -> tuple[nn.Module, object, StageInfo]:
    """A static student whose table ``fam.encoder`` makes from the pieces of the data it trains on
    (``models.classic.static_init``); raises ``RecipeError`` when fewer pieces are kept than
    ``family.static.dims``."""
    from tinyplm.models.classic.static_init import LstmShape, TrainingPieces, static_student

    extra = [ids for kind in data if kind != "task" for ids in inp.stage_data.get(kind).input_ids]
    pieces = TrainingPieces(inp.stage_data.get("task").input_ids, extra)
    try:
        model, made = static_student(encoder, inp.tokenizer, fam.arch, fam.static, pieces, len(labels),
                                     dropout=fam.dropout, id2label=labels,
                                     lstm=LstmShape(fam.hidden, fam.lstm_layers, fam.pooling))
    except ValueError as exc:
        raise RecipeError(f"family.static.dims: {exc} (fewer dims, or static.tokens: all)") from None
    return model, inp.tokenizer, StageInfo(init=f"{fam.encoder} encoder's piece vectors, PCA {fam.static.dims}",
                                           classic=ClassicInfo(table=StaticTableInfo(**made)))


def _elmo_model(fam: FamilySpec, tok: WordTokenizer, labels: dict,
                inp: RunInputs) -> tuple[nn.Module, object, StageInfo]:
    """A BiLSTM over the frozen biLM (pre-trained here, or the cached or named one)."""
    from tinyplm.models.classic.elmo import ElmoBiLstm

    own, recipe = fam.bilm.corpus, inp.stage_data.corpus
    paths, field = (own, fam.bilm.text_field) if own else (recipe.paths, recipe.text_field) if recipe else ([], None)
    settings, state, made = pretrained_bilm(fam.bilm, paths, inp.stage_data.cache_dir, inp.paths.log, field)
    config = FamilyConfig(arch="elmo_bilstm", vocab_size=len(tok), embed_dim=0, hidden=fam.hidden,
                          layers=fam.lstm_layers, pooling=fam.pooling, dropout=fam.dropout, bilm=settings,
                          num_labels=len(labels), id2label=labels)
    model = ElmoBiLstm(config, tok.vocab)
    model.bilm.load_state_dict(state)
    model.record_params()
    return model, tok, StageInfo(init="frozen biLM, scalar mix",
                                 classic=ClassicInfo(words=len(tok) - 3, bilm=BiLMInfo(**made)))


def _corpus_key(settings: dict, texts: list[str]) -> str:
    """sha256 of the settings and every text: the cache key of what is trained on a corpus."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:20]


class BiLMObjective:
    """The biLM's training objective for the one loop: both LMs' mean cross-entropy."""

    needs_teacher_logits = False
    needs_teacher = False

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Any :class:`~tinyplm.models.classic.elmo.BiLM` trains with it."""

    def prepare(self, batch: dict[str, torch.Tensor]) -> Batch:
        return Batch({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}, None,
                     batch["index"])

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> None:
        return None

    def loss(self, model: nn.Module, batch: Batch, teacher_out: object) -> torch.Tensor:
        return model(**batch.inputs)


def pretrained_bilm(b: BiLMSpec, paths: list[str], cache_dir: Path, log: Path,
                    text_field: str | None = None) -> tuple[dict, dict, dict]:
    """The biLM's settings, encoder weights and how it was made: read from ``b.model`` or the
    cache (``cache_dir/family/bilm-<key>/``), else pre-trained by the one loop on the corpus
    (``text_field``: the text column of its tables) and scored on held-out paragraphs (perplexity
    of both LMs against a unigram model's)."""
    from safetensors.torch import load_file, save_file

    from tinyplm.models.classic.elmo import BILM_VERSION, BiLM
    from tinyplm.pretrain.corpus import read_corpus, split_holdout

    if b.model is None:
        texts = read_corpus([Path(p) for p in paths], max_docs=b.max_docs, text_field=text_field)
        key = _corpus_key({**b.model_dump(exclude={"model", "corpus"}), "layers": BILM_VERSION}, texts)
        folder = Path(cache_dir) / "family" / f"bilm-{key}"
    else:
        folder = Path(b.model)
    if (folder / "bilm.safetensors").is_file():
        info = json.loads((folder / "bilm.json").read_text(encoding="utf-8"))
        return info["settings"], load_file(str(folder / "bilm.safetensors")), {**info["made"], "reused": str(folder)}
    if b.model is not None:
        raise RecipeError(f"family.bilm.model: {folder} holds no bilm.safetensors (a biLM made by a run)")
    train_texts, held = split_holdout(texts, b.holdout, seed=b.train.seed)
    tok = WordTokenizer.build(train_texts, b.vocab_size - 3)
    corpus = encode_split(Split("corpus", [Example(t, None, 0, i) for i, t in enumerate(train_texts)], None),
                          tok, b.max_words)
    held_enc = encode_split(Split("held", [Example(t, None, 0, i) for i, t in enumerate(held)], None), tok, b.max_words)
    lm = BiLM(b.settings(), tok.vocab)
    t0 = time.perf_counter()
    result = train(lm, corpus, BiLMObjective(), spec=b.train,
                   io=StageIO("bilm", folder.with_name(folder.name + ".checkpoints"), log, resume=True))
    made = {"paragraphs": len(train_texts), "held_out": len(held), "steps": result.steps,
            "train_seconds": round(time.perf_counter() - t0, 1), **held_out_perplexity(lm, corpus, held_enc)}
    settings = {**b.settings(), "vocab_size": len(tok)}
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in lm.encoder.state_dict().items()}
    with atomic_path(folder / "bilm.safetensors") as tmp:
        save_file(state, str(tmp))
    write_json_atomic(folder / "bilm.json", {"settings": settings, "made": made})
    return settings, state, made


@torch.no_grad()
def held_out_perplexity(lm: nn.Module, train_enc, held_enc) -> dict[str, float]:
    """Perplexity of the biLM on the held-out segments (both directions' predictions together)
    and of a unigram model of the training segments (add-one counts) on the same predictions."""
    from tinyplm.tasks.encoding import collate, length_sorted_batches

    lm.eval()
    total, count = 0.0, 0.0
    for idx in length_sorted_batches(held_enc, 64):
        b = collate(held_enc, idx)
        s, n = lm.token_losses(b["input_ids"], b["attention_mask"])
        total, count = total + float(s), count + float(n)
    counts = np.ones(len(lm.char_table), dtype=np.float64)  # add-one
    for ids in train_enc.input_ids:
        np.add.at(counts, ids, 1.0)
    logp = np.log(counts / counts.sum())
    # each held-out word is predicted by the forward LM (all but the first) and the backward (all but the last)
    uni = -sum(logp[ids[1:]].sum() + logp[ids[:-1]].sum() for ids in held_enc.input_ids)
    return {"perplexity": round(float(np.exp(total / max(count, 1))), 2),
            "unigram_perplexity": round(float(np.exp(uni / max(count, 1))), 2), "predictions": int(count)}


def word_vectors(e: EmbeddingSpec, paths: list[str], cache_dir: Path,
                 text_field: str | None = None) -> tuple[WordVectors, WordVectorsInfo]:
    """word2vec or GloVe vectors of the corpus at ``paths`` (``text_field``: its tables' text
    column) under ``e``'s settings, trained once
    and cached (``cache_dir/family/<kind>-<key>.npz``: words and vectors, no pickles) -> (vectors,
    how they were made)."""
    from tinyplm.pretrain.corpus import read_corpus

    texts = read_corpus([Path(p) for p in paths], max_docs=e.max_docs, text_field=text_field)
    file = Path(cache_dir) / "family" / f"{e.kind}-{_corpus_key(e.model_dump(exclude={'corpus', 'freeze'}), texts)}.npz"
    if file.is_file():
        with np.load(file, allow_pickle=False) as z:
            return WordVectors([str(w) for w in z["words"]], z["vectors"]), WordVectorsInfo(kind=e.kind,
                                                                                            cached=str(file))
    t0 = time.perf_counter()
    if e.kind == "word2vec":
        vec = train_word2vec(texts, e.dim, e.window, e.min_count, e.epochs or 5, e.seed)
    else:
        vec = train_glove(texts, e.dim, e.window, e.vocab_size, e.min_count, e.epochs or 25, seed=e.seed)
    with atomic_path(file) as tmp, tmp.open("wb") as fh:
        np.savez(fh, words=np.asarray(vec.words), vectors=vec.vectors)
    return vec, WordVectorsInfo(kind=e.kind, paragraphs=len(texts), words=len(vec.words),
                                train_seconds=round(time.perf_counter() - t0, 1))
