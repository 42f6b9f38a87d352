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


def _dot_model(path: Path) -> Path:
    """A tiny random BERT under mean pooling, not normalised, meant for dot products, with e5-style
    prompts: the scores depend on all three."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from conftest import tiny_vocab
    from tinyplm.models.pooling import Pooling, PoolMode, SentenceLayout
    from tinyplm.models.sentence import SentenceEncoder, save_sentence_encoder

    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    encoder = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64))
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)
    layout = SentenceLayout(Pooling(PoolMode.MEAN, dimension=32), max_seq_length=48, similarity="dot",
                            prompts=(("query", "the "), ("passage", "a ")))
    return save_sentence_encoder(SentenceEncoder(encoder, layout), tok, path)


def test_scores_are_sentence_transformers_own_for_its_similarity_and_prompts(tmp_path: Path) -> None:
    """A model meant for dot products, with query and passage prompts: embed-eval's Spearman and
    retrieval scores are those of ST's own evaluators on the same files (dot products, prompts
    given), and differ from what cosines without prompts read."""
    evaluation = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation")
    from sentence_transformers import SentenceTransformer

    model = _dot_model(tmp_path / "model")
    pairs, beir = _pairs(tmp_path / "mine.csv", n=30), _beir(tmp_path / "myset", queries=8, docs=12)
    result = cli(["embed-eval", model, "--no-stsb", "--no-squad", "--pairs", pairs, "--beir", beir, "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output
    got = json.loads(result.stdout)
    assert (got["similarity"], got["query_prompt"], got["document_prompt"]) == ("dot", "the ", "a ")
    sets = {s["name"]: s["metrics"] for s in got["sets"]}

    st_model = SentenceTransformer(str(model), device="cpu")
    assert st_model.similarity_fn_name == "dot"
    rows = [line.split(",") for line in pairs.read_text(encoding="utf-8").splitlines()[1:]]
    sts = evaluation.EmbeddingSimilarityEvaluator([r[0] for r in rows], [r[1] for r in rows],
                                                  [float(r[2]) for r in rows])(st_model)
    assert sets["mine"]["spearman"] == pytest.approx(100 * sts["spearman_dot"], abs=0.01)
    assert sets["mine"]["pearson"] == pytest.approx(100 * sts["pearson_dot"], abs=0.01)
    lines = {name: [json.loads(x) for x in (beir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
             for name in ("corpus", "queries")}
    qrels: dict[str, set[str]] = {}
    for line in (beir / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, _ = line.split("\t")
        qrels.setdefault(query, set()).add(doc)
    # ST fills an empty "document" prompt in when a model saves none, which its encode_document then
    # prefers to a saved "passage" one; the model means its documents to have it, so it is named here
    ir = evaluation.InformationRetrievalEvaluator({q["_id"]: q["text"] for q in lines["queries"]},
                                                  {d["_id"]: d["text"] for d in lines["corpus"]}, qrels,
                                                  mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1],
                                                  precision_recall_at_k=[1, 10], map_at_k=[10],
                                                  corpus_prompt_name="passage")(st_model)
    assert sets["myset"]["ndcg_at_10"] == pytest.approx(100 * ir["dot_ndcg@10"], abs=0.01)
    assert sets["myset"]["mrr_at_10"] == pytest.approx(100 * ir["dot_mrr@10"], abs=0.01)
    assert sets["myset"]["recall_at_1"] == pytest.approx(100 * ir["dot_recall@1"], abs=0.01)

    plain = cli(["embed-eval", model, "--no-stsb", "--no-squad", "--pairs", pairs, "--beir", beir, "--json",
                 "--similarity", "cosine", "--no-prompts"], cwd=tmp_path)
    assert plain.returncode == 0, plain.output
    cosines = {s["name"]: s["metrics"] for s in json.loads(plain.stdout)["sets"]}
    assert cosines["mine"]["spearman"] != sets["mine"]["spearman"]
    assert cosines["myset"] != sets["myset"]


def test_an_unknown_similarity_is_refused_before_any_set_is_read(tmp_path: Path) -> None:
    result = cli(["embed-eval", tmp_path / "no-such-model", "--no-stsb", "--no-squad", "--pairs",
                  tmp_path / "absent.csv", "--similarity", "jaccard"], cwd=tmp_path)
    assert_bad_input(result, "--similarity", "jaccard")
    assert "absent.csv" not in result.stderr


def test_prompts_the_pooling_leaves_out_are_refused_unless_asked_without(tmp_path: Path) -> None:
    model = _dot_model(tmp_path / "model")
    pooling = model / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text(encoding="utf-8")), "include_prompt": False}),
                       encoding="utf-8")
    beir = _beir(tmp_path / "myset")
    assert_bad_input(cli(["embed-eval", model, "--no-stsb", "--no-squad", "--beir", beir], cwd=tmp_path),
                     "include_prompt: false", "--no-prompts")
    result = cli(["embed-eval", model, "--no-stsb", "--no-squad", "--beir", beir, "--no-prompts", "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert json.loads(result.stdout)["query_prompt"] == ""


def test_an_out_path_that_cannot_be_a_file_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """--out a folder, or under a file: refused first (it was a traceback once every set was embedded)."""
    pairs = _pairs(tmp_path / "mine.csv")
    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    for where, said in ((tmp_path, "is a folder; name a file in it"), (tmp_path / "taken" / "s.json", "is a file")):
        result = cli(["embed-eval", tmp_path / "no-model", "--no-stsb", "--no-squad", "--pairs", pairs,
                      "--out", where], cwd=tmp_path)
        assert_bad_input(result, f"--out {where}", said)
