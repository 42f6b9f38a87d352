"""The tiny "world" in which tests/test_readme_commands.py runs the command lines of README.md and docs/.

A tmp ``main/`` is the working directory (its ``recipes`` and ``docs`` links to the shipped ones) beside a
tmp ``shared/data`` holding tiny GLUE (SST-2, RTE, MRPC), SQuAD, CoNLL-2003 and corpus files in the
official layouts, with ``TINYPLM_DATA`` pointing there; so relative paths such as ``runs/rte-l3`` or
``../shared/data/squad/dev-v1.1.json`` mean what they mean in the docs. ``names`` fills the
``{...}`` of a substitution (``{teacher}``: a tiny random 6-layer classifier).

``run_program(words, world)`` runs ``tinyplm ARGS`` (through ``helpers_cli.cli``) or
``python benchmarks/SCRIPT ARGS`` (the script run as ``__main__`` in this process, with its
``sys.argv``, working directory and environment set as a subprocess would see them).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from conftest import FILLER, NEGATIVE, POSITIVE, REPO, WORDS, make_tiny_glue, make_tiny_model_dir, tiny_vocab
from helpers_cli import Result, cli
from helpers_embedding import make_sentence_dir


@dataclass(frozen=True)
class World:
    """The working directory, the data root beside it, and the names substitutions use."""

    cwd: Path
    data: Path
    names: dict[str, str]

    @property
    def env(self) -> dict[str, str]:
        return {"TINYPLM_DATA": str(self.data)}

    @classmethod
    def placeholder(cls) -> World:
        return cls(Path("main"), Path("shared/data"), {"teacher": "<teacher>", "data": "<data>",
                                                        "embedder": "<embedder>"})


def make_world(root: Path) -> World:
    cwd, data = root / "main", root / "shared" / "data"
    cwd.mkdir(parents=True)
    (cwd / "recipes").symlink_to(REPO / "recipes", target_is_directory=True)
    (cwd / "docs").symlink_to(REPO / "docs", target_is_directory=True)  # read only: runs the docs record
    write_tiny_data(data)
    teacher = make_tiny_teacher(root / "models" / "tiny-teacher")
    embedder = make_sentence_dir(root / "models" / "tiny-embedder")
    return World(cwd, data, {"teacher": str(teacher), "data": str(data), "embedder": str(embedder)})


def run_program(words: list[str], world: World) -> Result:
    """``words``: ``["tinyplm", *args]`` or ``["python", "benchmarks/X.py", *args]``."""
    if words[0] == "tinyplm":
        return cli(words[1:], cwd=world.cwd, env=world.env)
    assert words[0] == "python" and words[1].startswith("benchmarks/"), words
    return _script(REPO / words[1], words[2:], world)


def _script(script: Path, args: list[str], world: World) -> Result:
    return run_script(script, args, world.cwd, {"TINYPLM_CACHE": str(world.cwd / ".tinyplm-cache"), **world.env})


def run_script(script: Path, args: list[str], cwd: Path, extra: dict[str, str]) -> Result:
    """``python script *args`` in this process (its imports mostly loaded already, where a new
    interpreter spends seconds on them), in ``cwd`` with ``extra`` added to the environment; all
    three set back after."""
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd, saved_env = sys.argv, os.getcwd(), {k: os.environ.get(k) for k in extra}
    sys.argv = [str(script), *args]
    os.environ.update(extra)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(script), run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # what the interpreter would print
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.argv = saved_argv
    return Result(code, out.getvalue(), err.getvalue())


def ok(result: Result) -> str:
    """Assert exit 0 and no traceback; return stdout."""
    shown = f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    assert result.returncode == 0 and "Traceback" not in result.output, shown
    return result.stdout


def make_tiny_teacher(path: Path) -> Path:
    """A tiny random classifier with 6 layers (so MiniLM's teacher layers 1,3,5 and 0,2,4,5 exist) and
    512 positions (so SQuAD's 256-token windows fit); otherwise the conftest tiny BERT."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    make_tiny_model_dir(path)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tiny_vocab()), hidden_size=32, num_hidden_layers=6, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=512, num_labels=2)
    BertForSequenceClassification(cfg).save_pretrained(path)
    return path


def sentence(rng: random.Random, label: int) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(2, 7))]
    words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if label else NEGATIVE))
    return " ".join(words)


def write_tiny_data(data: Path, seed: int = 0) -> None:
    """SST-2, RTE, MRPC and STS-B (GLUE TSVs with the official headers), SQuAD v1.1 train and dev,
    CoNLL-2003 train/valid/test and a corpus with books/ and wikitext/, all under ``data``."""
    rng = random.Random(seed)
    make_tiny_glue(data / "glue", n_train=64, n_dev=16, seed=seed)
    for split, n in (("train", 32), ("dev", 16)):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            y = rng.randint(0, 1)
            rows.append(f"{i}\t{sentence(rng, y)}\t{sentence(rng, y)}\t{'entailment' if y else 'not_entailment'}")
        _write(data / "glue" / "RTE" / f"{split}.tsv", rows)
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]  # the official file opens with a BOM
        for i in range(n):
            y = rng.randint(0, 1)
            rows.append(f"{y}\t{1000 + i}\t{2000 + i}\t{sentence(rng, y)}\t{sentence(rng, y)}")
        _write(data / "glue" / "MRPC" / f"{split}.tsv", rows)
        rows = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"]
        for i in range(n):
            y = rng.randint(0, 1)
            rows.append(f"{i}\tmain-captions\tMSRvid\t2012test\t{i}\tnone\tnone\t{sentence(rng, y)}\t"
                        f"{sentence(rng, rng.randint(0, 1))}\t{rng.uniform(0, 5):.3f}")
        _write(data / "glue" / "STS-B" / f"{split}.tsv", rows)
    for split, articles in (("train", 3), ("dev", 2)):
        _write(data / "squad" / f"{split}-v1.1.json", [json.dumps(_squad(rng, split, articles))])
    for split, n in (("train", 24), ("valid", 8), ("test", 8)):
        rows = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            for w in (rng.choice(WORDS) for _ in range(rng.randint(3, 8))):
                rows.append(f"{w} NN I-NP {'B-PER' if w == 'actor' else 'B-LOC' if w == 'film' else 'O'}")
            rows.append("")
        _write(data / "conll2003" / f"{split}.txt", rows)
    for folder in ("books", "wikitext"):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(30)]
        _write(data / "corpus" / folder / "a.txt", ["\n\n".join(paragraphs)])


def _squad(rng: random.Random, split: str, articles: int) -> dict:
    data = []
    for a in range(articles):
        paragraphs = []
        for q in range(4):
            adjective = rng.choice(POSITIVE + NEGATIVE)
            before = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 8)))
            context = f"{before} {adjective} movie {' '.join(rng.choice(FILLER) for _ in range(3))}."
            answer = {"text": f"{adjective} movie", "answer_start": len(before) + 1}
            paragraphs.append({"context": context, "qas": [
                {"id": f"{split}{a}q{q}", "question": f"what was {adjective}", "answers": [answer]}]})
        data.append({"title": f"{split} article {a}", "paragraphs": paragraphs})
    return {"version": "1.1", "data": data}


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
