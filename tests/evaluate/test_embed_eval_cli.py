"""tinyplm embed-eval: every set read before the model is loaded (a bad file is named first), your
own pairs and BEIR sets scored, the JSON written; the packaged sets where the shared data is."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import WORDS
from helpers_cli import assert_bad_input, cli
from helpers_embedding import make_sentence_dir, make_static_dir
from tinyplm.tasks.paths import resolve_data_root


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))


def _pairs(path: Path, n: int = 20) -> Path:
    rng = random.Random(0)
    rows = ["sentence1,sentence2,score"] + [f"{_sentence(rng)},{_sentence(rng)},{rng.uniform(0, 5):.2f}"
                                             for _ in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _beir(folder: Path, queries: int = 6, docs: int = 10) -> Path:
    rng = random.Random(1)
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i}", "title": "", "text": _sentence(rng)} for i in range(docs)]
    asked = [{"_id": f"q{i}", "text": _sentence(rng)} for i in range(queries)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in asked) + "\n", encoding="utf-8")
    judged = [f"q{i}\td{(2 * i) % docs}\t1" for i in range(queries)]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(judged) + "\n",
                                               encoding="utf-8")
    return folder


@pytest.mark.parametrize("make", [make_sentence_dir, make_static_dir], ids=["transformer", "static"])
def test_own_pairs_and_beir_sets_are_scored_and_written(tmp_path: Path, make) -> None:
    model = make(tmp_path / "model")
    pairs, beir = _pairs(tmp_path / "mine.csv"), _beir(tmp_path / "myset")
    result = cli(["embed-eval", model, "--no-stsb", "--no-squad", "--pairs", pairs, "--beir", beir,
                  "--out", tmp_path / "scores.json", "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    written = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert json.loads(result.stdout) == written
    sets = {s["name"]: s for s in written["sets"]}
    assert set(sets) == {"mine", "myset"}
    assert sets["mine"]["size"] == {"pairs": 20} and -100 <= sets["mine"]["metrics"]["spearman"] <= 100
    assert sets["myset"]["size"] == {"queries": 6, "documents": 10}
    metrics = sets["myset"]["metrics"]
    assert set(metrics) == {"ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10"}
    assert all(0 <= v <= 100 for v in metrics.values())
    assert metrics["recall_at_10"] == 100.0  # 10 documents: every one is in each query's top 10


def test_a_bad_set_is_named_before_the_model_is_loaded(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("left,right\na,b\n", encoding="utf-8")
    result = cli(["embed-eval", tmp_path / "no-such-model", "--no-stsb", "--no-squad", "--pairs", bad], cwd=tmp_path)
    assert_bad_input(result, str(bad))
    assert "no-such-model" not in result.stderr


def test_no_set_asked_for_is_refused(tmp_path: Path) -> None:
    model = make_static_dir(tmp_path / "model")
    assert_bad_input(cli(["embed-eval", model, "--no-stsb", "--no-squad"], cwd=tmp_path),
                     "no evaluation set asked for")


def test_a_classifier_is_refused_naming_modules_json(tmp_path: Path) -> None:
    from conftest import make_tiny_model_dir

    model = make_tiny_model_dir(tmp_path / "classifier")
    pairs = _pairs(tmp_path / "p.csv")
    assert_bad_input(cli(["embed-eval", model, "--no-stsb", "--no-squad", "--pairs", pairs], cwd=tmp_path),
                     "not an embedding model", "modules.json")


@pytest.mark.integration
def test_stsb_dev_is_read_from_the_shared_data(tmp_path: Path) -> None:
    stsb = resolve_data_root(None) / "glue" / "STS-B" / "dev.tsv"
    if not stsb.is_file():
        pytest.skip(f"{stsb} absent (../shared/data)")
    model = make_static_dir(tmp_path / "model")
    result = cli(["embed-eval", model, "--no-squad", "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    (score,) = json.loads(result.stdout)["sets"]
    assert score["name"] == "stsb" and score["size"] == {"pairs": 1500}
