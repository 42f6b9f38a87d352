"""SQuAD windows with a tokenizer that adds four special tokens to a pair (RoBERTa's and MPNet's
``<s> q </s></s> c </s>``): a stride the recipe check (BERT's three) lets through is refused before
any work, naming the checkpoint, not left to the tokenizers library's panic at the first encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_recipe
from helpers_cli import assert_bad_input, cli
from helpers_families import make_family_dir, tiny_tokenizer
from tinyplm.errors import TinyplmError
from tinyplm.tasks.squad import Answer, QAExample
from tinyplm.tasks.squad_features import build_features, window_problem

CONTEXT = " ".join(["the movie was good and the plot was dull"] * 8)


def _four_specials():
    """A tiny fast tokenizer whose pairs read ``<s> A </s> </s> B </s>``."""
    from tokenizers import processors

    tok = tiny_tokenizer("unigram")
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


def test_the_stride_leaves_room_for_the_tokenizers_own_special_tokens() -> None:
    tok = _four_specials()
    assert tok.num_special_tokens_to_add(pair=True) == 4
    assert window_problem(tok, 32, 19, 8) is None
    problem = window_problem(tok, 32, 20, 8)
    assert problem is not None and "4 special tokens of this tokenizer = 20" in problem
    question = "the movie was good and the plot was dull the movie was good"  # longer than 8 pieces
    ex = QAExample("q", question, CONTEXT, (Answer("plot", CONTEXT.index("plot")),))
    with pytest.raises(TinyplmError, match="doc_stride 20 must be smaller"):
        build_features([ex], tok, max_length=32, doc_stride=20, max_query_length=8)
    assert len(build_features([ex], tok, max_length=32, doc_stride=19, max_query_length=8)) > 1


def _squad(path: Path) -> Path:
    words = CONTEXT.split()
    qas = [{"id": f"q{i}", "question": f"what was {words[i]}", "answers": [
        {"text": words[i], "answer_start": len(" ".join(words[:i])) + (1 if i else 0)}]} for i in range(6)]
    doc = {"version": "1.1", "data": [{"title": "a", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_stride_past_a_four_special_tokenizers_room_is_refused_by_validate(tmp_path: Path) -> None:
    teacher = make_family_dir(tmp_path / "teacher", "xlm-roberta")
    _four_specials().save_pretrained(teacher)
    recipe = {"name": "sq", "output_dir": str(tmp_path / "runs" / "{name}"), "cache_dir": str(tmp_path / "cache"),
              "task": {"name": "squad", "train_file": str(_squad(tmp_path / "train.json")),
                       "dev_file": str(_squad(tmp_path / "dev.json")), "max_length": 32, "max_query_length": 8,
                       "doc_stride": 20},
              "teacher": {"model": str(teacher), "finetune": {"epochs": 1, "batch_size": 4, "precision": "fp32"}},
              "students": []}
    path = write_recipe(tmp_path / "r.yaml", recipe)
    assert_bad_input(cli(["validate", path], cwd=tmp_path), "task: doc_stride 20 must be smaller",
                     "4 special tokens", f"the teacher {teacher}", "lower task.doc_stride")
    assert cli(["validate", path, "task.doc_stride=19"], cwd=tmp_path).returncode == 0


def test_evaluate_refuses_such_a_stride_before_the_model_loads(tmp_path: Path) -> None:
    """tinyplm evaluate let --doc-stride through as the recipe check does (BERT's three special
    tokens) and refused it only once the model was loaded and the first windows cut."""
    from test_span_token_runs import write_tiny_squad
    from tinyplm.evaluate.model_eval import window_refusal

    reader = make_family_dir(tmp_path / "reader", "xlm-roberta")  # no reader's head: it is never loaded
    _four_specials().save_pretrained(reader)
    write_tiny_squad(tmp_path, articles=40)
    args = ["evaluate", str(reader), "--task", "squad", "--data-dir", str(tmp_path), "--max-length", "32",
            "--max-query-length", "8", "--doc-stride", "20"]
    assert_bad_input(cli(args, cwd=tmp_path), f"{reader}: doc_stride 20 must be smaller", "4 special tokens",
                     "lower --doc-stride")
    fits = type("Task", (), {"max_length": 32, "max_query_length": 8, "window_stride": lambda self: 19})()
    assert window_refusal(reader, fits) is None
