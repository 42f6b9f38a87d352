"""Tiny models with each head, tiny inputs in every format, and a forward-pass counter, for the
predict and serve tests."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import httpx
import yaml

from conftest import FILLER, NEGATIVE, POSITIVE, WORDS, make_tiny_glue, make_tiny_model_dir

TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


def make_sst2_run(root: Path, n_dev: int) -> Path:
    """A fake SST-2 run dir ``root/run`` (its recipe: max_length 32; ``model/``, the tiny BERT of seed 3)
    beside tiny SST-2 data in ``root/glue`` (``n_dev`` dev rows); returns the data's folder."""
    glue = make_tiny_glue(root / "glue", n_train=8, n_dev=n_dev)
    run = root / "run"
    run.mkdir()
    (run / "config.resolved.yaml").write_text(yaml.safe_dump(
        {"name": "tiny", "task": {"name": "sst2", "max_length": 32, "data_dir": str(glue)}}))
    make_tiny_model_dir(run / "model", seed=3)
    return glue


def make_tiny_head_dir(path: Path, head: str, seed: int = 0) -> Path:
    """The conftest tiny BERT saved with a ``span`` (QA) or ``token`` (9 CoNLL tags) head."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertForTokenClassification

    make_tiny_model_dir(path)  # tokenizer files (and a classifier, replaced below)
    torch.manual_seed(seed)
    kw = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
              max_position_embeddings=128)
    if head == "span":
        model = BertForQuestionAnswering(BertConfig(**kw, num_labels=2))
    else:
        model = BertForTokenClassification(BertConfig(**kw, num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                                                      label2id={t: i for i, t in enumerate(TAGS)}))
    (path / "model.safetensors").unlink()
    model.save_pretrained(path)
    return path


def make_regression_dir(path: Path) -> Path:
    """The tiny BERT with one regression output (like an STS-B model)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    make_tiny_model_dir(path)
    torch.manual_seed(1)
    cfg = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                     max_position_embeddings=64, num_labels=1, problem_type="regression")
    BertForSequenceClassification(cfg).save_pretrained(path)
    return path


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` tiny-vocabulary sentences of 1 to 12 words (varied lengths, so sorting matters)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def squad_doc(n: int, seed: int = 0) -> dict:
    """An official-layout SQuAD document with ``n`` questions (answers included, as in dev files)."""
    rng = random.Random(seed)
    paragraphs = []
    for q in range(n):
        adjective = rng.choice(POSITIVE + NEGATIVE)
        before = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 30)))
        context = f"{before} {adjective} movie {' '.join(rng.choice(FILLER) for _ in range(3))}."
        paragraphs.append({"context": context, "qas": [
            {"id": f"q{q}", "question": f"what was {adjective}",
             "answers": [{"text": f"{adjective} movie", "answer_start": len(before) + 1}]}]})
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def write_squad(path: Path, n: int, seed: int = 0) -> Path:
    path.write_text(json.dumps(squad_doc(n, seed)), encoding="utf-8")
    return path


def write_conll(path: Path, n: int, seed: int = 0) -> Path:
    """A CoNLL-2003 file of ``n`` sentences (4 columns, IOB2 tags)."""
    rng = random.Random(seed)
    rows = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(n):
        for w in (rng.choice(WORDS) for _ in range(rng.randint(1, 9))):
            rows.append(f"{w} NN I-NP {'B-PER' if w == 'actor' else 'O'}")
        rows.append("")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


class CountingModel:
    """Wraps a model: counts forward calls and the examples in each; ``gate`` (a threading.Event)
    when set blocks every call until it is set, to hold a batch in flight."""

    def __init__(self, model, gate=None) -> None:
        self.model, self.gate = model, gate
        self.calls: list[int] = []
        self.config, self.training = model.config, False

    def __call__(self, **inputs):
        self.calls.append(int(inputs["input_ids"].shape[0]))
        if self.gate is not None:
            self.gate.wait(10)
        return self.model(**inputs)

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


async def post_all(app, bodies: list[dict], delay: float = 0.0) -> list[httpx.Response]:
    """POST each body to ``app``'s /predict at once (the i-th after ``delay * i`` seconds)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        async def post(i: int, body: dict) -> httpx.Response:
            await asyncio.sleep(delay * i)
            return await c.post("/predict", json=body)

        return await asyncio.gather(*(post(i, b) for i, b in enumerate(bodies)))


def fastapi_app(app):
    """The FastAPI app inside the middlewares."""
    while not hasattr(app, "router"):
        app = app.app
    return app


async def serving(app, state, scenario):
    """Run ``scenario()`` once the app is started (lifespan) and warmed up."""
    api = fastapi_app(app)
    async with api.router.lifespan_context(api):
        while not state.ready:
            await asyncio.sleep(0.01)
        return await scenario()
