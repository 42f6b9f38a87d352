"""Shared fixtures: tiny random BERT models and tiny synthetic data.

The tiny model follows DESIGN.md: vocab 99, hidden 32, 2 layers, 4 heads, FFN 37.
"""

from __future__ import annotations

import os
import string
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TINYPLM_SHARED_DATA", REPO.parent / "shared" / "data"))

WORDS = (
    "the a an is was good bad great awful movie film plot actor fun dull not very and but "
    "it this that of to in love hate boring best worst story"
).split()


def tiny_vocab() -> list[str]:
    """99 WordPiece tokens: specials, words, letters and ## pieces."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = list(string.ascii_lowercase)
    pieces = ["##" + c for c in string.ascii_lowercase]
    punct = list(".,!?'-")
    vocab = specials + WORDS + letters + pieces + punct
    vocab = list(dict.fromkeys(vocab))
    filler = [f"tok{i}" for i in range(99 - len(vocab))]
    out = (vocab + filler)[:99]
    assert len(out) == 99
    return out


def make_tiny_model_dir(path: Path, num_labels: int = 2, seed: int = 0) -> Path:
    """Save a tiny random BertForSequenceClassification + fast tokenizer in HF format."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocab()
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # transformers 5: the tokenizers-backed BertTokenizer takes the vocab as a dict.
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    tok.save_pretrained(path)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    model = BertForSequenceClassification(cfg)
    model.save_pretrained(path)
    return path


def make_tiny_mlm_dir(path: Path, seed: int = 0) -> Path:
    """Save a tiny random BertForMaskedLM (same shape and vocabulary as make_tiny_model_dir)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    BertForMaskedLM(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37, max_position_embeddings=64)).save_pretrained(path)
    BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True).save_pretrained(path)
    return path


def write_tiny_corpus(folder: Path, paragraphs: int = 40, words: int = 8) -> Path:
    """A folder with one text file of ``paragraphs`` blank-line-separated runs of tiny-vocab words."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join(" ".join(WORDS[i:i + words]) for i in range(paragraphs))
    (folder / "a.txt").write_text(text, encoding="utf-8")
    return folder


POSITIVE = ["good", "great", "fun", "best", "love"]
NEGATIVE = ["bad", "awful", "dull", "worst", "hate"]
FILLER = [w for w in WORDS if w not in POSITIVE + NEGATIVE]


def tiny_sentiment_rows(n: int, seed: int) -> list[tuple[str, int]]:
    """Learnable toy sentiment data: filler words plus one positive or negative word."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 8))]
        words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if label else NEGATIVE))
        rows.append((" ".join(words), label))
    return rows


def make_tiny_glue(root: Path, n_train: int = 256, n_dev: int = 64, seed: int = 0) -> Path:
    """A GLUE-layout folder holding a toy SST-2 (header ``sentence\tlabel``); returns ``root``."""
    folder = root / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for name, n, s in (("train.tsv", n_train, seed), ("dev.tsv", n_dev, seed + 1)):
        lines = ["sentence\tlabel"] + [f"{t}\t{y}" for t, y in tiny_sentiment_rows(n, s)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


TINY_TRAIN = {"batch_size": 16, "lr": 3.0e-3, "precision": "fp32", "eval_every": 0, "checkpoint_every": 0}


def tiny_recipe(tmp: Path, model_dir: Path, glue_dir: Path, **sections) -> dict:
    """A recipe mapping for a tiny run in ``tmp`` (sections override the defaults)."""
    recipe = {
        "name": "tiny",
        "output_dir": str(tmp / "runs" / "tiny"),
        "cache_dir": str(tmp / "cache"),
        "task": {"name": "sst2", "data_dir": str(glue_dir), "max_length": 32},
        "teacher": {"model": str(model_dir), "finetune": {**TINY_TRAIN, "epochs": 4}},
        "students": [],
        "measure": {"latency_sentences": 8, "throughput_sentences": 32, "rounds": 1, "warmup": 1},
    }
    recipe.update(sections)
    return recipe


def write_recipe(path: Path, recipe: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


#: The bf16 switch's second pass (see the Makefile's ``test``): a file where the first pass lists the
#: tests whose run resolved ``precision: auto`` (the only ones the switch can change), and the
#: option that makes the second pass run just those.
AUTO_LOG = "TINYPLM_AUTO_LOG"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--auto-precision-only", metavar="FILE", default=None,
                     help="run only the tests listed in FILE (written by a pass with TINYPLM_AUTO_LOG=FILE): "
                          "those that resolved precision 'auto', to run again with the bf16 switch the other way")


#: ``make test`` runs the tests on two pytest-xdist workers (``-n 2 --dist load``: a module's
#: fixtures may be built on both); then the tests marked ``ray`` (they
#: start Ray: a local cluster or ``ray start --head``) alone, one after another, with the machine to
#: themselves (``ray stop --force`` at the end of one stops every Ray process on the machine).


def pytest_sessionstart(session: pytest.Session) -> None:
    log = os.environ.get(AUTO_LOG)
    if log:  # appended to by every pass and xdist worker; ``make test`` removes it before the first
        Path(log).parent.mkdir(parents=True, exist_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = config.getoption("--auto-precision-only")
    if listed is None:
        return
    lines = Path(listed).read_text(encoding="utf-8").splitlines() if Path(listed).is_file() else []
    wanted = _one_per_file(dict(_timed(line) for line in lines), items)
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in wanted])
    items[:] = [i for i in items if i.nodeid in wanted]


#: Tests whose parameters are the precision itself, or what it decides: every case runs again.
PRECISION_FILES = ("tests/run/test_precision.py",)
#: Files the second pass leaves out: the real-MiniLM test trains in fp32 by its recipe, so only its
#: measurement resolves ``auto``, which the tiny runs' files rerun in that pass (it is among the
#: slowest tests of the suite).
SECOND_PASS_SKIPPED = ("tests/test_integration_minilm.py",)


def _timed(line: str) -> tuple[str, float]:
    """A line of the auto-precision log -> (test id, seconds it took in the pass that wrote it)."""
    nodeid, _, seconds = line.partition("\t")
    return nodeid, float(seconds or 0)


def _one_per_file(wanted: dict[str, float], items: list[pytest.Item]) -> set[str]:
    """Of the tests of a file listed (test id -> seconds it took), the quickest, except in
    :data:`PRECISION_FILES`: elsewhere the second pass is about the precision ``auto`` resolves to,
    which every test of a file reaches by the same code, where the first pass ran each of them (and
    each case of a parametrized one). One per file, the quickest, keeps the second pass short enough
    for CI's time limit (docs/results/code-choices.md, "The test suite")."""
    kept: set[str] = set()
    quickest: dict[str, str] = {}
    for item in items:
        if item.nodeid not in wanted:
            continue
        file = item.nodeid.split("::", 1)[0]
        if file in SECOND_PASS_SKIPPED:
            continue
        if item.nodeid.startswith(PRECISION_FILES):
            kept.add(item.nodeid)
        elif file not in quickest or wanted[item.nodeid] < wanted[quickest[file]]:
            quickest[file] = item.nodeid
    return kept | set(quickest.values())


@pytest.fixture(autouse=True)
def _note_auto_precision(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """With TINYPLM_AUTO_LOG set, list this test in that file when its code resolved ``auto``
    (asked the bf16 switch) in this process, with the seconds it took (test id, a tab, seconds)."""
    log = os.environ.get(AUTO_LOG)
    if not log:
        yield
        return
    from tinyplm.models import infer

    asked, real = [], infer.forced_bf16

    def traced() -> bool | None:
        asked.append(True)
        return real()

    monkeypatch.setattr(infer, "forced_bf16", traced)
    began = time.perf_counter()
    yield
    if asked:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{request.node.nodeid}\t{time.perf_counter() - began:.3f}\n")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny models run fastest on one thread, and the CI machine has only two cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_glue(tmp_path: Path) -> Path:
    """A toy SST-2 in GLUE layout (256 train, 64 dev)."""
    return make_tiny_glue(tmp_path / "glue")


@pytest.fixture
def tiny_model_dir(tmp_path: Path) -> Path:
    """A directory holding a tiny random 2-class BERT classifier and its tokenizer."""
    return make_tiny_model_dir(tmp_path / "tiny-bert")


@pytest.fixture
def shared_data() -> Path:
    """The read-only ../shared/data folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set TINYPLM_SHARED_DATA)")
    return SHARED_DATA
