"""The embedding task of a recipe (tinyplm.tasks.embedding_task): its training texts leave out every
evaluated and held-out text, its eval sets are read and named as the recipe says, and bad entries are
refused naming the entry."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers_doc_world import write_tiny_data
from tinyplm.config.schema import TaskSpec
from tinyplm.errors import DataError, RecipeError
from tinyplm.tasks import load_task
from tinyplm.tasks.embedding_sample import paired
from tinyplm.tasks.embedding_task import parse_eval_set, sentences_of
from tinyplm.tasks.heads import Head
from tinyplm.tasks.holdout import HOLDOUT
from tinyplm.tasks.retrieval import GROUPS_OPTION, MAX_LENGTH_OPTION


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_tiny_data(root)
    return root


def _spec(data_dir: Path, **kw) -> TaskSpec:
    return TaskSpec(name="embedding", data_dir=str(data_dir), **kw)


def test_training_texts_never_hold_an_evaluated_or_held_out_text(data_dir: Path, tmp_path: Path) -> None:
    dev = (data_dir / "glue" / "STS-B" / "dev.tsv").read_text().splitlines()[1].split("\t")[7]
    own = tmp_path / "mine.txt"
    own.write_text(f"a text of mine to learn\n\n{dev}\nanother text of mine\n", encoding="utf-8")
    data = load_task(_spec(data_dir, train_texts=["stsb", str(own)], holdout=4, eval_max_length=40))
    trained = {ex.text for ex in data.train.examples}
    evaluated = {ex.text for split in data.evals.values() for ex in split.examples}
    assert trained and not trained & evaluated
    assert {"a text of mine to learn", "another text of mine"} <= trained and dev not in trained
    assert list(data.evals) == ["stsb", "squad", HOLDOUT] and data.head is Head.EMBEDDING
    assert data.primary_metric == "spearman" and data.metric_suffix[HOLDOUT] == "_holdout"
    assert all(split.options[MAX_LENGTH_OPTION] == 40 for split in data.evals.values())
    assert len(data.evals[HOLDOUT].options["set"].scores) == 4


def test_the_corpus_is_read_only_when_named_and_cut_into_sentences(data_dir: Path) -> None:
    asked = []

    def corpus() -> list[str]:
        asked.append(1)
        return ["First sentence of the book here. Second one said Mr. Smith to all. Tiny."]

    data = load_task(_spec(data_dir, train_texts=["corpus"], eval_sets=["stsb"]), corpus)
    assert asked and sorted(ex.text for ex in data.train.examples) == [
        "First sentence of the book here.", "Second one said Mr. Smith to all."]
    load_task(_spec(data_dir, eval_sets=["stsb"]), corpus)
    assert len(asked) == 1
    with pytest.raises(RecipeError, match="no 'corpus' section"):
        load_task(_spec(data_dir, train_texts=["corpus"], eval_sets=["stsb"]))


def test_paragraphs_are_the_corpus_passages_whole_read_once_with_its_sentences(data_dir: Path) -> None:
    asked = []
    long = " ".join(f"Word{i} of a passage." for i in range(8))  # 32 words, 8 sentences
    short = "A line of only seven words here."

    def corpus() -> list[str]:
        asked.append(1)
        return [long, short]

    data = load_task(_spec(data_dir, train_texts=["paragraphs", "corpus"], eval_sets=["stsb"]), corpus)
    trained = {ex.text for ex in data.train.examples}
    assert len(asked) == 1
    assert long in trained and short in trained  # the passage whole; the short line only as a sentence
    assert len(trained) == 1 + 8 + 1
    data = load_task(_spec(data_dir, train_texts=["paragraphs"], eval_sets=["stsb"]), corpus)
    assert [ex.text for ex in data.train.examples] == [long]
    with pytest.raises(RecipeError, match="'paragraphs' reads the corpus, but the recipe has no 'corpus' section"):
        load_task(_spec(data_dir, train_texts=["paragraphs"], eval_sets=["stsb"]))


def test_a_second_set_of_a_kind_gets_its_own_metric_suffix(data_dir: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "my pairs.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\na cat\ta dog\t1\nthe sun\tthe moon\t2\nup\tdown\t0\n")
    data = load_task(_spec(data_dir, eval_sets=["squad", f"pairs:{pairs}"]))
    assert list(data.evals) == ["squad", "pairs-my-pairs"]
    assert data.primary_metric == "ndcg_at_10" and data.metric_suffix == {"squad": "", "pairs-my-pairs": ""}
    data = load_task(_spec(data_dir, eval_sets=["stsb", f"pairs:{pairs}"]))
    assert data.metric_suffix["pairs-my-pairs"] == "_pairs-my-pairs"


@pytest.mark.parametrize(("entry", "error", "match"), [
    ("sts", RecipeError, "'sts'"), ("pairs:", RecipeError, "pairs:FILE"), ("pairs:/no/such.csv", DataError, "such.csv"),
    ("beir:/no/such", DataError, "such"),
])
def test_a_bad_eval_set_is_named(data_dir: Path, entry: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        load_task(_spec(data_dir, eval_sets=[entry]))


def test_recipe_keys_of_the_embedding_task_are_refused_elsewhere() -> None:
    with pytest.raises(ValueError, match="task.train_texts is for the embedding task"):
        TaskSpec(name="sst2", train_texts=["stsb"])
    with pytest.raises(ValueError, match="holds out whole STS-B training pairs"):
        TaskSpec(name="embedding", holdout=4, holdout_min_words=3)


def test_beir_split_is_read_from_the_entry(tmp_path: Path) -> None:
    ref = parse_eval_set(f"beir:{tmp_path / 'fiqa'}:dev", None)
    assert (ref.name, ref.kind, ref.path, ref.split) == ("beir-fiqa", "beir", tmp_path / "fiqa", "dev")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("abc .!?ABC\"'\n"), max_size=60), max_size=5))
def test_sentences_keep_every_word_of_long_enough_pieces(paragraphs: list[str]) -> None:
    out = sentences_of(paragraphs, min_words=1)
    assert " ".join(out).split() == " ".join(paragraphs).split()


def _paragraph(k: int, sentences: int = 4) -> str:
    return " ".join(f"Topic{k} sentence {j} has six words." for j in range(sentences))


def test_held_out_passages_are_a_cloze_retrieval_set_never_trained_on(data_dir: Path) -> None:
    paragraphs = [_paragraph(k) for k in range(6)] + [_paragraph(9, sentences=2) + " And four more words here."]

    data = load_task(_spec(data_dir, train_texts=["paragraphs", "corpus"], eval_sets=["stsb"], holdout_passages=3),
                     lambda: paragraphs)
    cloze = data.evals["holdout_passages"].options["set"]
    assert len(cloze.queries) == len(cloze.corpus) == 3 and data.guard_metrics == ("ndcg_at_10_holdout_passages",)
    assert data.metric_suffix["holdout_passages"] == "_holdout_passages"
    trained = {ex.text for ex in data.train.examples}
    for query, judged in cloze.qrels.items():
        (doc,) = judged
        topic = cloze.queries[query].split()[0]
        assert cloze.queries[query] == f"{topic} sentence 2 has six words."  # the middle one, cut out
        assert cloze.corpus[doc].count(topic) == 3 and cloze.queries[query] not in cloze.corpus[doc]
        assert not any(text.startswith(topic) for text in trained)  # neither it, its sentences nor its paragraph
    assert len({t.split()[0] for t in trained}) == 6 - 3 + 2  # the other paragraphs' topics (Topic9: "And ...")
    again = load_task(_spec(data_dir, train_texts=["corpus"], eval_sets=["stsb"], holdout_passages=3),
                      lambda: paragraphs)
    assert again.evals["holdout_passages"].options["set"].queries == cloze.queries  # the seeded draw


@pytest.mark.parametrize("n", [1, 7])
def test_held_out_passages_refuse_a_draw_the_corpus_cannot_give(data_dir: Path, n: int) -> None:
    paragraphs = [_paragraph(k) for k in range(6)] + [_paragraph(9, sentences=2)]  # the last one: too short
    with pytest.raises(RecipeError, match="task.holdout_passages: .* give 2 to 6"):
        load_task(_spec(data_dir, eval_sets=["stsb"], holdout_passages=n), lambda: paragraphs)
    with pytest.raises(RecipeError, match="task.holdout_passages reads the corpus, but the recipe has no 'corpus'"):
        load_task(_spec(data_dir, eval_sets=["stsb"], holdout_passages=2))
    with pytest.raises(ValueError, match="holdout_passages is for the embedding task"):
        TaskSpec(name="sst2", holdout_passages=10)


def test_questions_are_made_from_the_corpus_sentences_and_need_a_corpus(data_dir: Path) -> None:
    paragraphs = ["Harold Godwinson was killed at Hastings that day. They said Harold fought and Harold fell.",
                  "“What happened to you?” said the old woman at the gate."]
    data = load_task(_spec(data_dir, train_texts=["questions"], eval_sets=["stsb"]), lambda: paragraphs)
    assert sorted(ex.text for ex in data.train.examples) == ["What happened to you?",
                                                             "Who was killed at Hastings that day?"]
    with pytest.raises(RecipeError, match="'questions' reads the corpus, but the recipe has no 'corpus' section"):
        load_task(_spec(data_dir, train_texts=["questions"], eval_sets=["stsb"]))


def _own_sources(tmp_path: Path, sizes: tuple[int, int, int]) -> list[str]:
    paths = []
    for k, n in enumerate(sizes):
        path = tmp_path / f"source{k}.txt"
        path.write_text("".join(f"text {i} of source {k}\n" for i in range(n)), encoding="utf-8")
        paths.append(str(path))
    return paths


@given(sizes=st.tuples(*[st.integers(1, 60)] * 3), shares=st.lists(st.floats(0.05, 0.45), min_size=1, max_size=2),
       size=st.integers(1, 80))
@settings(max_examples=40, deadline=None)
def test_train_shares_give_a_source_its_share_of_the_sample(data_dir: Path, tmp_path_factory, sizes, shares,
                                                            size) -> None:
    paths = _own_sources(tmp_path_factory.mktemp("own"), sizes)
    asked = dict(zip(paths[1:], shares, strict=False))  # one or two sources get shares; source 0 always fills the rest
    spec = _spec(data_dir, train_texts=paths, eval_sets=["stsb"], max_train_examples=size, train_shares=asked)
    texts = [ex.text for ex in load_task(spec).train.examples]
    got = {path: sum(t.endswith(f"source {k}") for t in texts) for k, path in enumerate(paths)}
    assert len(texts) == len(set(texts)) <= size
    want = {path: min(int(share * size), sizes[paths.index(path)]) for path, share in asked.items()}
    assert {path: got[path] for path in asked} == want  # each its share, rounded down, or all it has
    others = sum(n for path, n in got.items() if path not in asked)
    free = sum(n for path, n in zip(paths, sizes, strict=True) if path not in asked)
    assert others == min(size - sum(want.values()), free)  # the others fill the rest
    assert texts == [ex.text for ex in load_task(spec).train.examples]  # seeded: the same sample again


@pytest.mark.parametrize(("shares", "extra", "match"), [
    ({"questions": 0.2}, {}, r"names \['questions'\], which task.train_texts \['stsb'\] does not hold"),
    ({"stsb": 1.0}, {}, "above 0 and below 1"),
    ({"stsb": 0.6, "corpus": 0.5}, {"train_texts": ["stsb", "corpus", "paragraphs"]}, "add up to 1.1"),
    ({"stsb": 0.5}, {"max_train_examples": None, "train_texts": ["stsb", "corpus"]}, "give it"),
    ({"stsb": 0.5}, {}, r"names every source of task.train_texts \['stsb'\]: leave one out"),
])
def test_train_shares_that_cannot_be_are_refused_naming_the_key(shares, extra, match) -> None:
    kw = {"max_train_examples": 100, **extra}
    with pytest.raises(ValueError, match=match):
        TaskSpec(name="embedding", train_shares=shares, **kw)
    with pytest.raises(ValueError, match="task.train_shares is for the embedding task"):
        TaskSpec(name="sst2", train_shares={"stsb": 0.5})


def test_no_question_is_made_of_a_held_out_passage(data_dir: Path) -> None:
    held = [f"Harold Godwinson was killed at Hastings{i} on that autumn day. They met Harold at the river. "
            f"Then Harold went home after the battle was over." for i in range(2)]  # 2 of 20+ words, 3 sentences
    free = "Harold Godwinson was crowned at Westminster. Men said Harold ruled well. They all knew Harold there."

    def asked(holdout: int) -> set[str]:
        spec = _spec(data_dir, train_texts=["questions"], eval_sets=["stsb"], holdout_passages=holdout)
        return {ex.text for ex in load_task(spec, lambda: [*held, free]).train.examples}

    made = {"Who was crowned at Westminster?", "Who was killed at Hastings0 on that autumn day?",
            "Who was killed at Hastings1 on that autumn day?"}
    assert asked(0) == made
    assert asked(2) == {"Who was crowned at Westminster?"}  # both held paragraphs drawn: none of theirs asked


def test_paired_questions_are_trained_beside_their_own_paragraph(data_dir: Path, tmp_path: Path) -> None:
    paragraphs = ["Harold Godwinson was killed at Hastings that day. They said Harold fought and Harold fell.",
                  "“What happened to you?” said the old woman at the gate. “Did you see it?” she asked.",
                  "A paragraph with no question in it at all, only words about the weather and the sea."]
    own = tmp_path / "own.txt"
    own.write_text("".join(f"a text of mine number {i}\n" for i in range(6)), encoding="utf-8")
    spec = _spec(data_dir, train_texts=["questions", str(own)], eval_sets=["stsb"], pair_questions=True,
                 max_train_examples=8)
    data = load_task(spec, lambda: paragraphs)
    texts = [ex.text for ex in data.train.examples]
    groups = data.train.options[GROUPS_OPTION]
    assert len(texts) == len(set(texts)) == len(groups) == 8  # the passages take the place of own texts
    unit = {t: g for t, g in zip(texts, groups, strict=True)}
    assert unit["Who was killed at Hastings that day?"] == unit[paragraphs[0]]
    assert unit["What happened to you?"] == unit["Did you see it?"] == unit[" ".join(paragraphs[1].split())]
    assert unit["Who was killed at Hastings that day?"] != unit["What happened to you?"]
    assert sum(t.startswith("a text of mine") for t in texts) == 3  # 6 + 3 questions sampled, 2 passages in
    assert paragraphs[2] not in texts and "3 questions trained beside the 2 corpus paragraphs" in data.info[
        "train_texts"]
    alone = load_task(_spec(data_dir, train_texts=["questions"], eval_sets=["stsb"]), lambda: paragraphs)
    assert GROUPS_OPTION not in alone.train.options


@given(n_texts=st.integers(0, 30), n_questions=st.integers(0, 12), n_passages=st.integers(1, 5),
       seed=st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_paired_keeps_the_sample_size_and_each_question_with_its_passage(n_texts, n_questions, n_passages,
                                                                          seed) -> None:
    questions = [f"question {i}?" for i in range(n_questions)]
    passage_of = {q: f"passage {i % n_passages}" for i, q in enumerate(questions)}
    excluded = {"passage 0"}
    sample = questions + [f"text {i}" for i in range(n_texts)] + ["passage 1"] * (n_passages > 1)
    random.Random(seed).shuffle(sample)
    got = paired(sample, passage_of, excluded, random.Random(seed))
    assert len(got.texts) == len(set(got.texts)) == len(got.groups)
    assert set(questions) <= set(got.texts) and "passage 0" not in got.texts
    unit = dict(zip(got.texts, got.groups, strict=True))
    for q, p in passage_of.items():
        if p != "passage 0":
            assert unit[q] == unit[p]
        else:
            assert sum(g == unit[q] for g in got.groups) == 1  # an excluded passage's question stays alone
    passages = {p for p in passage_of.values() if p != "passage 0"}
    others = [t for t in sample if t not in passage_of and t not in passages]
    added = len(passages - set(sample))
    assert len(got.texts) == len(sample) - min(added, len(others)) + added  # in place of others while there are any
    assert got == paired(sample, passage_of, excluded, random.Random(seed))


def test_pair_questions_needs_questions_to_pair() -> None:
    with pytest.raises(ValueError, match=r"task.pair_questions .* has no 'questions'"):
        TaskSpec(name="embedding", train_texts=["stsb", "corpus"], pair_questions=True)


def test_the_units_reach_the_encoded_training_data(data_dir: Path, tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tinyplm.tasks.encoding import encode_split

    paragraphs = ["Harold Godwinson was killed at Hastings that day. They said Harold fought and Harold fell.",
                  "Edith Swanneck was crowned at Westminster. Men said Edith ruled well and Edith stayed."]
    spec = _spec(data_dir, train_texts=["questions", "stsb"], eval_sets=["stsb"], pair_questions=True,
                 max_train_examples=10, train_shares={"questions": 0.3})
    data = load_task(spec, lambda: paragraphs)
    groups = list(data.train.options[GROUPS_OPTION])
    enc = encode_split(data.train, AutoTokenizer.from_pretrained(tiny_model_dir), 32, limit=7)
    assert enc.groups.tolist() == groups[:7] and len(set(groups)) == 8  # 2 pairs and 6 STS-B sentences
    assert enc.subset([5, 0]).groups.tolist() == [groups[5], groups[0]]
