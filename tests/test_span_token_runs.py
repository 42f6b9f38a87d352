"""Span (SQuAD) and token (CoNLL-2003) heads through the whole pipeline, on tiny models and data:
encoding, oracle scoring, fine-tune -> distil -> compress -> measure, loading and ONNX parity."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import FILLER, TINY_TRAIN, make_tiny_model_dir, tiny_recipe

from helpers_cli import cli
from tinyplm.config import TaskSpec, validate_recipe
from tinyplm.errors import RecipeError
from tinyplm.evaluate.model_eval import span_scores, token_scores
from tinyplm.models.infer import predict_logits
from tinyplm.tasks import load_task
from tinyplm.tasks.conll import TAGS
from tinyplm.tasks.encoding import collate, encode_split
from tinyplm.tasks.tagging import IGNORE

ENTITY = {"actor": "PER", "film": "MISC", "story": "ORG", "plot": "LOC"}  # toy rule: these words are entities


def write_tiny_squad(root: Path, articles: int = 4, questions: int = 6, seed: int = 0, name: str = "dev-v1.1.json",
                     impossible: float = 0.0) -> Path:
    """``root/squad/<name>`` in the official layout: each context is filler words around one
    answer phrase ``<adjective> movie``; questions ask 'what was <adjective>'."""
    rng = random.Random(seed)
    data = []
    for a in range(articles):
        contexts = []
        for q in range(questions):
            adjective = rng.choice(["good", "bad", "great", "awful", "dull"])
            before = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 10)))
            after = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 10)))
            answer = f"{adjective} movie"
            context = f"{before} {answer} {after}."
            qa = {"id": f"a{a}q{q}", "question": f"what was {adjective}"}
            if rng.random() < impossible:
                qa.update(question="what was fun", answers=[], is_impossible=True)
            else:
                qa.update(answers=[{"text": answer, "answer_start": len(before) + 1}], is_impossible=False)
            contexts.append({"context": context, "qas": [qa]})
        data.append({"title": f"article {a}", "paragraphs": contexts})
    folder = root / "squad"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"version": "v2.0" if impossible else "1.1", "data": data}), encoding="utf-8")
    return folder / name


def write_tiny_conll(root: Path, sentences: int = 96, seed: int = 0) -> Path:
    """``root/conll2003/{train,valid,test}.txt``: the words of :data:`ENTITY` are entities (a
    following 'actor' continues a PER), everything else is O."""
    folder = root / "conll2003"
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(("train.txt", "valid.txt", "test.txt")):
        rng = random.Random(seed + i)
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(sentences if name == "train.txt" else sentences // 3):
            words = [rng.choice(FILLER + list(ENTITY)) for _ in range(rng.randint(3, 9))]
            previous = None
            for w in words:
                kind = ENTITY.get(w)
                tag = "O" if kind is None else ("I-" if previous == kind else "B-") + kind
                lines.append(f"{w} NN I-NP {tag}")
                previous = kind
            lines.append("")
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(make_tiny_model_dir(tmp_path_factory.mktemp("tok"))))


def _squad(root: Path, **kw):
    return load_task(TaskSpec(name="squad", data_dir=str(root), max_length=48, doc_stride=16, max_query_length=8,
                              **{"train_articles": 3, **kw}))


def test_squad_default_split_is_by_article(tmp_path: Path) -> None:
    write_tiny_squad(tmp_path, articles=4, questions=6)
    data = _squad(tmp_path)
    assert data.head == "span" and data.primary_metric == "f1"
    train_ids = {ex.id for ex in data.train.examples}
    dev_ids = {ex.id for ex in data.evals["dev"].examples}
    assert len(train_ids) == 18 and len(dev_ids) == 6 and not train_ids & dev_ids
    assert all(i.startswith("a3") for i in dev_ids)  # the last article is held out


def test_squad_holds_out_whole_articles(tmp_path: Path) -> None:
    """task.holdout on SQuAD: every question of a drawn article leaves training, so no held-out
    question's context is trained on; the draw is seeded and dev is untouched."""
    write_tiny_squad(tmp_path, articles=6, questions=5)
    whole = _squad(tmp_path, train_articles=5)
    data = _squad(tmp_path, train_articles=5, holdout=7, holdout_seed=3)
    held, kept = data.evals["holdout"].examples, data.train.examples
    titles = {ex.title for ex in held}
    assert len(titles) == 2 and len(held) == 10  # 7 questions take two articles of 5, whole
    assert not titles & {ex.title for ex in kept} and not {ex.context for ex in held} & {ex.context for ex in kept}
    assert sorted(held + kept, key=lambda e: e.id) == sorted(whole.train.examples, key=lambda e: e.id)
    assert data.evals["dev"].examples == whole.evals["dev"].examples
    assert data.metric_suffix["holdout"] == "_holdout" and "those of 2 whole titles drawn with seed 3" in \
        data.info["holdout"]
    assert _squad(tmp_path, train_articles=5, holdout=7, holdout_seed=3).evals["holdout"].examples == held
    with pytest.raises(RecipeError, match=r"task.holdout: 12 examples take 3 whole titles .*15 of its 25 .*give fewer"):
        _squad(tmp_path, train_articles=5, holdout=12, holdout_seed=3)
    with pytest.raises(RecipeError, match="task.holdout_min_words is for sentence tasks; .*same title"):
        _squad(tmp_path, train_articles=5, holdout=5, holdout_min_words=3)


@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=12), n=st.integers(1, 40), seed=st.integers(0, 9))
def test_whole_groups_are_whole_and_just_enough(sizes: list[int], n: int, seed: int) -> None:
    from tinyplm.tasks.holdout import whole_groups

    keys = [g for g, size in enumerate(sizes) for _ in range(size)]
    random.Random(seed).shuffle(keys)
    held = whole_groups(keys, n, seed)
    taken = {keys[i] for i in held}
    assert held == {i for i, k in enumerate(keys) if k in taken}  # every member of a taken group
    assert len(held) >= min(n, len(keys))
    assert any(len(held) - sizes[g] < n for g in taken)  # no group taken after the one that reached n
    assert whole_groups(keys, n, seed) == held


def test_oracle_span_logits_score_100_on_v1_and_v2(tmp_path: Path, tok) -> None:
    write_tiny_squad(tmp_path, articles=4, questions=6)
    for spec in (dict(name="squad", train_articles=3),
                 dict(name="squad_v2", train_file=str(write_tiny_squad(tmp_path, 2, 6, 1, "t2.json", 0.4)),
                      dev_file=str(write_tiny_squad(tmp_path, 2, 8, 2, "d2.json", 0.4)))):
        data = load_task(TaskSpec(data_dir=str(tmp_path), max_length=24, doc_stride=8, max_query_length=8, **spec))
        enc = encode_split(data.evals["dev"], tok, 24)
        assert len(enc) > len(data.evals["dev"].examples)  # contexts need several windows at width 24
        logits = torch.zeros(len(enc), int(enc.lengths().max()), 2)
        for i, (s, e) in enumerate(enc.labels.tolist()):
            logits[i, s, 0] = logits[i, e, 1] = 10.0  # windows without the answer point at [CLS]
        scores = span_scores(data.evals["dev"], enc, logits)
        assert scores["f1"] == pytest.approx(100.0)
        if spec["name"] == "squad_v2":
            assert scores["HasAns_f1"] == pytest.approx(100.0) and scores["NoAns_f1"] == pytest.approx(100.0)
            assert "best_f1_thresh" in scores
        else:
            assert scores["exact_match"] == pytest.approx(100.0)
            logits[:, :, :] = 0.0  # no preference: the first valid span, almost never the answer
            assert span_scores(data.evals["dev"], enc, logits)["exact_match"] < 50.0


def test_token_labels_pad_with_ignore_and_collate_cuts_to_the_batch(tmp_path: Path, tok) -> None:
    data = load_task(TaskSpec(name="conll2003", data_dir=str(write_tiny_conll(tmp_path)), max_length=32))
    assert data.head == "token" and tuple(data.labels) == TAGS
    enc = encode_split(data.evals["dev"], tok, 32)
    assert enc.labels.dim() == 2 and enc.labels.shape[0] == len(enc)
    lengths = torch.as_tensor(enc.lengths())
    beyond = torch.arange(enc.labels.shape[1])[None, :] >= lengths[:, None]
    assert (enc.labels[beyond] == IGNORE).all()
    assert (enc.labels[:, 0] == IGNORE).all()  # [CLS] carries no tag
    short = int(lengths.argmin())
    batch = collate(enc, [short])
    assert batch["labels"].shape == batch["input_ids"].shape  # labels cut to the batch's width


def test_oracle_token_logits_score_1_and_predict_logits_is_per_token(tmp_path: Path, tok) -> None:
    data = load_task(TaskSpec(name="conll2003", data_dir=str(write_tiny_conll(tmp_path)), max_length=32))
    split = data.evals["dev"]
    enc = encode_split(split, tok, 32)
    labels = enc.labels
    logits = torch.zeros(*labels.shape, len(TAGS))
    logits.scatter_(2, labels.clamp(min=0)[..., None], 10.0)
    scores = token_scores(split, enc, logits, data.labels)
    assert scores["f1"] == pytest.approx(1.0) and scores["precision"] == pytest.approx(1.0)
    everything_o = token_scores(split, enc, torch.zeros_like(logits), data.labels)  # tag 0 = O
    assert everything_o["recall"] == 0.0

    from tinyplm.models.loading import load_classifier

    model, _ = load_classifier(make_tiny_model_dir(tmp_path / "m"), data.labels, False, "token",
                                   replace_head=True)  # a new tagger head on the tiny classifier
    assert type(model).__name__ == "BertForTokenClassification"
    out = predict_logits(model, enc, batch_size=4)
    assert out.shape[0] == len(enc) and out.shape[2] == len(TAGS) and out.shape[1] >= int(enc.lengths().max())
    past_end = torch.arange(out.shape[1])[None, :] >= torch.as_tensor(enc.lengths())[:, None]
    assert (out[past_end] == 0).all() and (out[~past_end] != 0).any()


def test_runtime_units_are_labelled_words_and_windows_inside_their_length(tmp_path: Path, tok) -> None:
    """``runtime: fastest`` compares a tagger word by word (the labelled first pieces, gold beside
    each) and a reader window by window (a start and an end among the window's own positions),
    on rows of the training encoding that carry no decoding metadata."""
    from tinyplm.compress.runtime_units import SPAN_BASE, UNITS
    from tinyplm.models.loading import load_classifier
    from tinyplm.tasks.heads import Head

    data = load_task(TaskSpec(name="conll2003", data_dir=str(write_tiny_conll(tmp_path)), max_length=32))
    enc = encode_split(data.train, tok, 32).rows([5, 0, 3])
    tagger, _ = load_classifier(make_tiny_model_dir(tmp_path / "m"), data.labels, False, "token",
                                replace_head=True)  # a new tagger head on the tiny classifier
    words, gold = UNITS[Head.TOKEN].outputs(tagger, enc, False), UNITS[Head.TOKEN].gold(enc)
    labelled = enc.labels != IGNORE
    assert len(words) == len(gold) == int(labelled.sum()) > 0
    tags = predict_logits(tagger, enc).argmax(-1)[:, : enc.labels.shape[1]]
    assert words.tolist() == tags[labelled].tolist() and gold.tolist() == enc.labels[labelled].tolist()

    squad = load_task(TaskSpec(name="squad", data_dir=str(write_tiny_squad(tmp_path).parents[1]), max_length=48,
                               doc_stride=16, max_query_length=8, train_articles=3))
    windows = encode_split(squad.train, tok, 48)
    rows = windows.rows(range(len(windows)))
    reader, _ = load_classifier(make_tiny_model_dir(tmp_path / "r"), (), False, "span", replace_head=True)
    with torch.no_grad():  # every logit negative: the zeros past a window's end must not win
        reader.qa_outputs.bias.fill_(-1e3)
    spans = UNITS[Head.SPAN].outputs(reader, rows, False)
    lengths = rows.lengths()
    assert len(spans) == len(rows) and ((spans // SPAN_BASE) < lengths).all() and ((spans % SPAN_BASE) < lengths).all()
    gold = UNITS[Head.SPAN].gold(rows)
    assert (gold // SPAN_BASE).tolist() == rows.labels[:, 0].tolist()
    with pytest.raises(ValueError, match="metadata"):
        windows.subset([0])  # a subset that could be decoded is still refused


def _run(tmp_path: Path, task: dict, students: list, epochs: int = 6):
    from tinyplm.run import run

    teacher = make_tiny_model_dir(tmp_path / "tiny")
    raw = tiny_recipe(tmp_path, teacher, tmp_path, task=task, students=students)
    raw["teacher"]["finetune"] = {**TINY_TRAIN, "epochs": epochs}
    return run(validate_recipe(raw))


def _student(**extra) -> dict:
    return {"name": "s1", "teacher_layers": [1],
            "objective": {"temperature": 2.0, "kd_weight": 1.0, "hard_weight": 0.5, "hidden": 1.0},
            "train": {**TINY_TRAIN, "epochs": 4}, **extra}


#: The runtime step of the shipped base recipes, on two quick candidates.
FASTEST = {"kind": "runtime", "runtime": "fastest", "candidates": ["onnx_dynamic_int8", "openvino"],
           "control_examples": 40}


def _chose_on_rows(stage) -> None:
    """The runtime step judged its candidates on training rows and kept one of them."""
    chosen = stage.info.compress.details["chosen_by"]
    assert chosen["control"] == "longest_training" and chosen["examples"] > 0
    assert chosen["chosen"] in FASTEST["candidates"] and set(chosen["candidates"]) == set(FASTEST["candidates"])


def test_squad_fine_tune_distil_compress_measure(tmp_path: Path) -> None:
    write_tiny_squad(tmp_path, articles=4, questions=12)
    recover = {"objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "max_steps": 2}}
    record = _run(tmp_path, {"name": "squad", "data_dir": str(tmp_path), "max_length": 48, "doc_stride": 16,
                             "max_query_length": 8, "train_articles": 3},
                  [_student(compress=[{"kind": "prune_heads", "keep": 0.5, "recover": recover},
                                      {"kind": "trim_vocab"}, FASTEST])])
    assert record.metric == "f1"
    names = [s.name for s in record.stages]
    assert names == ["teacher", "s1", "s1.prune_heads", "s1.trim_vocab", "s1.runtime"]
    _chose_on_rows(record.stage("s1.runtime"))
    for s in record.stages:
        assert set(s.metrics) >= {"f1", "exact_match"} and 0.0 <= s.metrics["f1"] <= 100.0
        assert s.throughput_sent_per_s > 0 and s.disk_bytes > 0
    by = {s.name: s for s in record.stages}
    assert by["s1.trim_vocab"].metrics == by["s1.prune_heads"].metrics  # trimming changes no logit
    assert by["s1"].params < by["teacher"].params

    from tinyplm.models.loading import load_classifier

    run_dir = Path(tmp_path / "runs" / "tiny")
    model, _ = load_classifier(run_dir / by["s1"].model_dir, (), False, "span")
    assert type(model).__name__ == "BertForQuestionAnswering" and model.config.num_hidden_layers == 1


def test_a_squad_run_with_held_out_articles_chooses_on_them(tmp_path: Path) -> None:
    """With task.holdout, SQuAD's runtime step judges its candidates on the held-out articles'
    questions and the final model is chosen on their F1; the held-back articles (dev) are only
    reported."""
    write_tiny_squad(tmp_path, articles=5, questions=8)
    record = _run(tmp_path, {"name": "squad", "data_dir": str(tmp_path), "max_length": 48, "doc_stride": 16,
                             "max_query_length": 8, "train_articles": 4, "holdout": 8},
                  [_student(compress=[FASTEST])], epochs=2)
    for stage in record.stages:
        assert {"f1", "exact_match", "f1_holdout", "exact_match_holdout"} <= set(stage.metrics)
    chosen = record.stage("s1.runtime").info.compress.details["chosen_by"]
    assert chosen["control"] == "holdout" and chosen["examples"] >= 8  # windows of the 8 held-out questions
    results = json.loads((tmp_path / "runs" / "tiny" / "results.json").read_text())
    assert results["info"]["selection_metric"] == "f1_holdout" and results["info"]["holdout"] == 8
    assert "on 8 held-out training examples" in results["info"]["final_rule"]


def test_accuracy_controlled_int8_of_a_tagger_is_refused_before_the_teacher_trains(tmp_path: Path) -> None:
    from tinyplm.errors import RecipeError

    write_tiny_conll(tmp_path, sentences=40)
    with pytest.raises(RecipeError, match=r"student s1, compress step openvino_int8: max_drop .* token head"):
        _run(tmp_path, {"name": "conll2003", "data_dir": str(tmp_path), "max_length": 32},
             [_student(compress=[{"kind": "openvino_int8", "max_drop": 0.01}])])
    assert not list((tmp_path / "runs").rglob("*.safetensors"))  # nothing trained, nothing saved


def test_conll_run_learns_tags_and_exports_with_parity(tmp_path: Path) -> None:
    write_tiny_conll(tmp_path, sentences=160)
    record = _run(tmp_path, {"name": "conll2003", "data_dir": str(tmp_path), "max_length": 32},
                  [_student(compress=[{"kind": "prune_ffn", "keep": 0.5, "recover": {
                      "objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "max_steps": 2}}}]),
                   {"name": "s1-fast", "init_from": "s1", "stages": [], "compress": [FASTEST]}], epochs=12)
    _chose_on_rows(record.stage("s1-fast.runtime"))
    teacher = record.teacher
    assert set(teacher.metrics) >= {"f1", "precision", "recall", "f1_test", "precision_test", "recall_test"}
    assert teacher.metrics["f1"] > 0.5 and teacher.metrics["f1_test"] > 0.5  # the toy rule is learnable

    from tinyplm.run.export import export_run

    parity = export_run(tmp_path / "runs" / "tiny", ["s1"])
    assert parity[0].examples > 0 and parity[0].agreement >= 0.99


def test_evaluate_writes_squad_predictions_that_score_the_same(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tinyplm.cli import app
    from tinyplm.evaluate.squad import questions, squad_scores

    write_tiny_squad(tmp_path, articles=40, questions=3)  # the default split: 38 articles train, 2 evaluate
    from helpers_serve import make_tiny_head_dir

    model = make_tiny_head_dir(tmp_path / "m", "span")  # a reader's head (untrained: scores only need to agree)
    preds = tmp_path / "preds.json"
    # no --doc-stride: the default fits the 48-token window
    result = CliRunner().invoke(app, ["evaluate", str(model), "--task", "squad", "--data-dir", str(tmp_path),
                                      "--max-length", "48", "--max-query-length", "12", "--predictions", str(preds),
                                      "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output[result.output.index("{"):])["metrics"]
    answers = json.loads(preds.read_text(encoding="utf-8"))
    dev = load_task(TaskSpec(name="squad", data_dir=str(tmp_path))).evals["dev"].examples
    assert set(answers) == {ex.id for ex in dev} and len(dev) == 6
    assert squad_scores(questions(dev), answers)["f1"] == pytest.approx(metrics["f1"])

    tagger = cli(["evaluate", model, "--task", "conll2003", "--data-dir", write_tiny_conll(tmp_path),
                  "--predictions", tmp_path / "x.json"], tmp_path)
    assert tagger.returncode != 0 and "SQuAD" in tagger.output and "Traceback" not in tagger.output
    assert not (tmp_path / "x.json").exists()
    # a --predictions path that cannot be a file is refused before the model reads a window (it was a
    # traceback once every window was read)
    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    for where, said in ((tmp_path, "is a folder; name a file in it"), (tmp_path / "taken" / "p.json", "is a file")):
        bad = cli(["evaluate", model, "--task", "squad", "--data-dir", tmp_path, "--max-length", "48",
                   "--max-query-length", "12", "--predictions", where], tmp_path)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.output, bad.output


def test_squad_window_settings_are_checked_in_the_recipe(tmp_path: Path) -> None:
    from tinyplm.errors import RecipeError

    assert TaskSpec(name="squad", max_length=128).window_stride() == (128 - 64 - 3) // 2
    assert TaskSpec(name="squad", max_length=384).window_stride() == 128
    with pytest.raises(RecipeError, match="doc_stride"):
        validate_recipe({"task": {"name": "squad", "max_length": 128, "doc_stride": 100}})
    with pytest.raises(RecipeError, match="max_query_length"):
        validate_recipe({"task": {"name": "squad", "max_length": 64, "max_query_length": 60}})
    bad = cli(["evaluate", "nowhere", "--task", "squad", "--max-length", "48"], tmp_path)
    assert bad.returncode != 0 and "max_query_length" in bad.output and "Traceback" not in bad.output


def _entity_words_dir(path: Path) -> Path:
    """A tiny model dir whose tokenizer keeps only the entity words whole: every other word is
    spelled in letter pieces, so word starts sit at other positions than the teacher's."""
    import string

    from transformers import BertTokenizerFast

    make_tiny_model_dir(path)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *ENTITY, *string.ascii_lowercase,
             *("##" + c for c in string.ascii_lowercase), *".,!?'-"]
    vocab += [f"tok{i}" for i in range(99 - len(vocab))]  # the model's 99 rows
    for name in ("tokenizer.json", "vocab.txt"):
        (path / name).unlink(missing_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True).save_pretrained(path)
    return path


def test_a_tagger_of_another_tokenizer_learns_the_teachers_tags_word_by_word(tmp_path: Path) -> None:
    """A CoNLL student that reads other pieces learns from the teacher's predictions alone (no gold
    tags), moved from the teacher's first piece of each word to its own: targets left at the
    teacher's positions would tag the wrong words."""
    write_tiny_conll(tmp_path, sentences=160)
    student = {"name": "s1", "init_from": str(_entity_words_dir(tmp_path / "other")),
               "objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "epochs": 12}}
    record = _run(tmp_path, {"name": "conll2003", "data_dir": str(tmp_path), "max_length": 32}, [student],
                  epochs=12)
    assert record.stage("s1").info.init.endswith("its own tokenizer")
    assert record.teacher.metrics["f1"] > 0.5
    assert record.stage("s1").metrics["f1"] > 0.5 and record.stage("s1").metrics["f1_test"] > 0.5


def test_a_reader_of_another_tokenizer_learns_from_the_teachers_spans_by_character(tmp_path: Path) -> None:
    """A SQuAD student that reads other pieces (so other windows) validates, trains on the teacher's
    start and end logits moved to its windows by character, is compressed and scored in its own
    pieces."""
    write_tiny_squad(tmp_path, articles=4, questions=12)
    other = _entity_words_dir(tmp_path / "other")
    recover = {"objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "max_steps": 2}}
    student = {"name": "s1", "init_from": str(other), "objective": {"kd_weight": 1.0, "hard_weight": 0.5},
               "train": {**TINY_TRAIN, "epochs": 2}, "compress": [{"kind": "prune_ffn", "keep": 0.5,
                                                                    "recover": recover}]}
    record = _run(tmp_path, {"name": "squad", "data_dir": str(tmp_path), "max_length": 48, "doc_stride": 16,
                             "max_query_length": 8, "train_articles": 3}, [student], epochs=1)
    assert record.stage("s1").info.init.endswith("its own tokenizer")
    assert [s.name for s in record.stages] == ["teacher", "s1", "s1.prune_ffn"]
    for name in ("s1", "s1.prune_ffn"):
        assert 0.0 <= record.stage(name).metrics["f1"] <= 100.0


def test_squad_students_learn_the_span_logits_of_the_teachers_runtime_form(tmp_path: Path) -> None:
    """teacher.logits_from on SQuAD: the teacher's OpenVINO form computes the start/end logits
    over the training windows once (cached under its fingerprint); a student of the teacher's
    layers learns them as they are, one of another tokenizer moved to its windows by character."""
    from safetensors import safe_open

    from tinyplm.models import fingerprint
    from tinyplm.models.loading import load_classifier

    write_tiny_squad(tmp_path, articles=4, questions=12)
    other = _entity_words_dir(tmp_path / "other")
    students = [{"name": "teacher-best", "init_from": "teacher", "stages": [], "compress": [{"kind": "openvino"}]},
                _student(train={**TINY_TRAIN, "epochs": 2}),
                {"name": "s2", "init_from": str(other), "objective": {"kd_weight": 1.0, "hard_weight": 0.5},
                 "train": {**TINY_TRAIN, "epochs": 2}}]
    teacher = make_tiny_model_dir(tmp_path / "tiny")
    raw = tiny_recipe(tmp_path, teacher, tmp_path, students=students,
                      task={"name": "squad", "data_dir": str(tmp_path), "max_length": 48, "doc_stride": 16,
                            "max_query_length": 8, "train_articles": 3})
    raw["teacher"].update(finetune={**TINY_TRAIN, "epochs": 1}, logits_from="teacher-best.openvino")
    from tinyplm.run import run

    cfg = validate_recipe(raw)
    record = run(cfg)
    assert [s.name for s in record.stages] == ["teacher", "teacher-best.openvino", "s1", "s2"]
    root = Path(cfg.output_dir)
    results = json.loads((root / "results.json").read_text())
    assert results["info"]["precision"]["teacher_logits"] == "teacher-best.openvino"
    source = root / "students" / "teacher-best.openvino"
    entries = sorted((tmp_path / "cache" / "logits").glob("*.safetensors"))
    assert len(entries) == 1  # the teacher's windows once, for both students
    with safe_open(str(entries[0]), "pt") as f:
        assert f.metadata()["teacher"] == fingerprint(source)
        cached = f.get_tensor("logits")
    ov, ov_tok = load_classifier(source, (), False, "span")
    windows = encode_split(load_task(cfg.task).train, ov_tok, cfg.task.max_length)
    torch.testing.assert_close(cached, predict_logits(ov, windows, batch_size=128))
    for name in ("s1", "s2"):
        assert 0.0 <= record.stage(name).metrics["f1"] <= 100.0


def _slow(folder: Path) -> Path:
    """``folder``'s tokenizer made a slow one of the same vocabulary (a class transformers has no fast
    form of), as a user's checkpoint without tokenizer.json may be."""
    (folder / "tokenizer.json").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("backend", None)
    config.update(tokenizer_class="BertJapaneseTokenizer", word_tokenizer_type="basic",
                  subword_tokenizer_type="wordpiece")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("task", ["squad", "conll2003"])
def test_a_slow_tokenizer_on_a_task_read_by_offsets_is_refused_before_any_work(tmp_path: Path, task: str) -> None:
    """validate said ok and the run failed at the first encoding (a KeyError on offset_mapping for
    SQuAD, after the teacher's fine-tune where a student's start was slow); evaluate and predict
    of a reader ended in a traceback. Each is refused naming the folder and what to save."""
    from helpers_serve import make_tiny_head_dir
    from tinyplm.errors import ModelError
    from tinyplm.models import load_classifier

    write_tiny_squad(tmp_path) if task == "squad" else write_tiny_conll(tmp_path, sentences=40)
    section = {"name": task, "data_dir": str(tmp_path), "max_length": 48}
    section.update({"doc_stride": 16, "max_query_length": 8, "train_articles": 2} if task == "squad" else {})
    teacher = _slow(make_tiny_model_dir(tmp_path / "tiny"))
    raw = tiny_recipe(tmp_path, teacher, tmp_path, task=section, students=[_student()])
    from tinyplm.run import preflight

    with pytest.raises(ModelError, match=rf"{teacher}: its tokenizer \(BertJapaneseTokenizer\) is a slow one.*teacher"):
        preflight(validate_recipe(raw))
    head = "span" if task == "squad" else "token"
    model = _slow(make_tiny_head_dir(tmp_path / "m", head))
    with pytest.raises(ModelError, match="is a slow one, without character offsets"):
        load_classifier(model, () if head == "span" else TAGS, False, head)
    assert not (tmp_path / "runs").exists()
