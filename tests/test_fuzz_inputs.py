"""Mutated input files never escape as raw exceptions.

Small seed files in the official layouts (GLUE SST-2, MRPC with its BOM, STS-B, header-less CoLA;
custom CSV and JSONL tasks; CoNLL-2003; SQuAD v1.1 and v2.0; the spoiler files: Goodreads sentences
CSV, Goodreads reviews JSON lines, TV Tropes CSV; a recipe) are made in the test,
mutated at random (byte flips, truncation, deleted or repeated lines, swapped columns, replaced
fields, type changes and dropped keys in JSON/YAML, non-UTF-8 bytes, BOMs, CRLF line ends), and
read in-process through the functions the CLI uses (``tasks.load_task``, ``config.load_recipe``).

Every read either succeeds with examples that are valid (texts non-empty, labels in the task's
set, answers inside their context) or raises a ``TinyplmError`` whose one-line message starts
with the file's path, then a line number inside the file or a JSON path that exists in it (or
one of a few whole-file complaints, such as "holds no examples"). Each (format, first mutation)
pair runs 6 derandomized examples (0-2 further mutations drawn after the first), so every
mutation leads in every format and CI sees the same 792 examples each run (~8 s).
``pytest --hypothesis-show-statistics`` prints the later mutations and how each read ended.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers_mutate import mutated, mutator_names, parse
from tinyplm import tasks
from tinyplm.config import load_recipe, validate_recipe
from tinyplm.errors import TinyplmError
from tinyplm.tasks.conll import TAGS

#: Per format and first mutation: 6 examples, so 66-72 per format, each mutation first in 6 of them.
FUZZ = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ----------------------------------------------------------------------------- seed files

SST2 = b"sentence\tlabel\nit 's a charming journey .\t1\nunflinchingly bleak\t0\na \"quoted\" gem\t1\n"
MRPC = ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t702876\t702977\tAmrozi accused his brother .\tReferring to him , Amrozi accused his brother .\n"
        "0\t2108705\t2108831\tYucaipa owned Dominick 's .\tYucaipa bought Dominick 's in 1995 .\n").encode()
STSB = (b"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        b"0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man in a hard hat .\tA man in a hardhat .\t5.000\n"
        b"1\tmain-captions\tMSRvid\t2012test\t0002\tnone\tnone\tA kid is playing .\tA child is playing .\t3.200\n")
COLA = (b"gj04\t1\t\tOur friends won't buy this analysis.\n"
        b"gj04\t0\t*\tThey drank the pub.\n"
        b"gj04\t1\t\tThe more we study verbs, the crazier they get.\n")
CSV = b'text,label\n"great, really ""great""",pos\nflat and dull,neg\nfine,pos\n'
JSONL = (b'{"review": "loved it", "title": "A", "stars": 5}\n'
         b'{"review": "meh", "title": "B", "stars": 1}\n{"review": "ok", "title": "C", "stars": 5}\n')
CONLL = (b"-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n"
         b"Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
# Spoilers: Goodreads sentences (Book C falls on the dev side of the by-book split, A and B on the
# train side), the original Goodreads reviews as JSON lines (book 12 on the dev side), TV Tropes.
GOODREADS = (b',book_title,sent_spoil,sentence\n0,Book A,0,"Slow, then gripping."\n1,Book B,1,The butler did it .\n'
             b'2,Book C,0,A fine read .\n3,Book C,1,She dies at the end .\n4,Book A,1,He was dead all along .\n')
GOODREADS_JSONL = (b'{"book_id": "1", "review_sentences": [[0, "Great start ."], [1, "He dies ."]]}\n'
                   b'{"book_id": "12", "review_sentences": [[0, "Loved it ."], [1, "The twin did it ."]]}\n'
                   b'{"book_id": "2", "review_sentences": [[1, "They marry ."], [0, "Nice cover ."]]}\n')
TVTROPES = b'1,"A twist, at last",1\n2,The hero wins .,0\n3,Nobody survives .,1\n'
RECIPE = b"""# tinyplm run recipe.yaml
name: fuzz
output_dir: runs/{name}
task:
  name: sst2
  max_length: 64
teacher:
  model: minilm-l6
  finetune: {epochs: 2, budget_minutes: 1, lr: 1.0e-4, eval_every: 200}
students:
  - name: student-L3
    teacher_layers: [1, 3, 5]
    objective: {temperature: 2.0, kd_weight: 1.0, hard_weight: 0.5}
    train: {epochs: 3, budget_minutes: 1, lr: 1.0e-4}
    compress:
      - kind: prune_heads
        keep: 0.75
measure:
  latency_sentences: 8
  rounds: 1
"""


def squad_seed(v2: bool) -> bytes:
    """Three articles in the official layout (v2.0: an unanswerable question each), as the
    official files store them: v1.1 on one line, v2.0 indented (so line mutations bite)."""
    data = []
    for a in range(3):
        qas = [{"id": f"q{a}", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4},
                                                                   {"text": "The cat", "answer_start": 0}]}]
        if v2:
            qas[0]["is_impossible"] = False
            qas.append({"id": f"n{a}", "question": "Who flew?", "answers": [], "is_impossible": True,
                        "plausible_answers": [{"text": "mat", "answer_start": 19}]})
        data.append({"title": f"Article_{a}", "paragraphs": [{"context": "The cat sat on the mat.", "qas": qas}]})
    doc = {"version": "v2.0" if v2 else "1.1", "data": data}
    return json.dumps(doc, indent=1 if v2 else None).encode()


# ----------------------------------------------------------------------------- readers


def _spec(**task: Any):
    """A task spec as ``tinyplm evaluate`` builds it from its options."""
    return validate_recipe({"task": task}, source="command line").task


def _glue(name: str, folder: str) -> Callable[[Path], Any]:
    def read(root: Path) -> Any:
        (root / folder / "train.tsv").write_bytes(FORMATS[name].seed)
        return tasks.load_task(_spec(name=name, data_dir=str(root)))
    return read


def _custom(suffix: str, **columns: Any) -> Callable[[Path], Any]:
    def read(root: Path) -> Any:
        (root / f"dev.{suffix}").write_bytes(FORMATS["custom_" + suffix].seed)
        files = {"train_file": str(root / f"train.{suffix}"), "dev_file": str(root / f"dev.{suffix}")}
        return tasks.load_task(_spec(name="custom", **files, **columns))
    return read


def _conll(root: Path) -> Any:
    for name in ("train.txt", "test.txt"):
        (root / "conll2003" / name).write_bytes(CONLL)
    return tasks.load_task(_spec(name="conll2003", data_dir=str(root)))


def _squad_v1(root: Path) -> Any:
    """The default v1.1 task: the official dev file, split by article."""
    return tasks.load_task(_spec(name="squad", data_dir=str(root), train_articles=2))


def _squad_v2(root: Path) -> Any:
    (root / "train.json").write_bytes(squad_seed(True))
    return tasks.load_task(_spec(name="squad_v2", train_file=str(root / "train.json"), dev_file=str(root / "dev.json")))


def _spoilers(name: str) -> Callable[[Path], Any]:
    def read(root: Path) -> Any:
        if name == "tvtropes_spoilers":  # dev.csv is mutated; train.csv is the seed
            (root / "spoilers" / "tvtropes").mkdir(parents=True, exist_ok=True)
            (root / "spoilers" / "tvtropes" / "train.csv").write_bytes(TVTROPES)
        return tasks.load_task(_spec(name=name, data_dir=str(root)))
    return read


@dataclass(frozen=True)
class Format:
    """One input format: its seed, where the mutated copy goes (under the data root), how it is
    read, how an error locates a problem ("line", or a "json"/"yaml" path), the column delimiter,
    and how type changes parse it ("json", "jsonl", "yaml"; "" for none)."""

    seed: bytes
    file: str
    read: Callable[[Path], Any]
    where: str = "line"
    delimiter: bytes = b"\t"
    structured: str = ""


FORMATS: dict[str, Format] = {
    "sst2": Format(SST2, "SST-2/dev.tsv", _glue("sst2", "SST-2")),
    "mrpc": Format(MRPC, "MRPC/dev.tsv", _glue("mrpc", "MRPC")),
    "stsb": Format(STSB, "STS-B/dev.tsv", _glue("stsb", "STS-B")),
    "cola": Format(COLA, "CoLA/dev.tsv", _glue("cola", "CoLA")),
    # the train files are mutated: custom labels are inferred from them (CSV) or checked (JSONL)
    "custom_csv": Format(CSV, "train.csv", _custom("csv"), delimiter=b","),
    "custom_jsonl": Format(JSONL, "train.jsonl", _custom("jsonl", text_column="review", text_pair_column="title",
                                                         label_column="stars", labels=["1", "5"]),
                           delimiter=b", ", structured="jsonl"),
    "conll": Format(CONLL, "conll2003/valid.txt", _conll, delimiter=b" "),
    "squad_v1": Format(squad_seed(False), "squad/dev-v1.1.json", _squad_v1, "json", b", ", "json"),
    "squad_v2": Format(squad_seed(True), "dev.json", _squad_v2, "json", b", ", "json"),
    "goodreads": Format(GOODREADS, "spoilers/goodreads_sentences/train.csv", _spoilers("goodreads_spoilers"),
                        delimiter=b","),
    "goodreads_jsonl": Format(GOODREADS_JSONL, "goodreads_spoilers/goodreads.jsonl",
                              _spoilers("goodreads_spoilers_reviews"), delimiter=b", ", structured="jsonl"),
    "tvtropes": Format(TVTROPES, "spoilers/tvtropes/dev.csv", _spoilers("tvtropes_spoilers"), delimiter=b","),
    "recipe": Format(RECIPE, "recipe.yaml", lambda root: load_recipe(root / "recipe.yaml"), "yaml", b": ", "yaml"),
}

# ----------------------------------------------------------------------------- checks

#: Complaints about the whole file, which have no line or path to name.
WHOLE_FILE = ("holds no examples", "no sentences found", "a classifier needs two or more labels", "holds no questions",
              "cannot keep", "cannot split by article", "a recipe is a mapping", "the recipe is empty",
              "the dev split")
PATH_PART = re.compile(r'\.?([A-Za-z_]\w*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def resolves(doc: Any, where: str) -> bool:
    """True when ``where`` (``data[0].paragraphs[3].qas``, ``top level``) names a value in ``doc``."""
    if where == "top level":
        return True
    pos = 0
    while pos < len(where):
        m = PATH_PART.match(where, pos)
        if m is None:
            return False
        key: Any = m[1] if m[1] is not None else int(m[2]) if m[2] is not None else json.loads(m[3])
        if isinstance(doc, dict) and key in doc or isinstance(doc, list) and isinstance(key, int) and key < len(doc):
            doc, pos = doc[key], m.end()
        else:
            return False
    return True


def check_message(message: str, path: Path, content: bytes, fmt: Format) -> str:
    """Assert the error names ``path`` and then a line inside it, a JSON/YAML path that exists in
    it, or a whole-file complaint; return which of those it was."""
    assert "\n" not in message, f"not one line: {message!r}"
    if f"(the labels found in {path})" in message:
        return "file its labels came from"  # a custom dev file checked against labels this file gave
    assert message.startswith(f"{path}:"), f"{message!r} does not start with {path}"
    rest = message[len(str(path)) :]
    if m := re.match(r":(\d+)(:\d+)?: ", rest):
        breaks = content.count(b"\n") + (content.count(b"\r") if fmt.where == "yaml" else 0)  # YAML: a lone CR too
        assert 1 <= int(m[1]) <= breaks + 1, f"line {m[1]} is not in the file: {message!r}"
        return "line"
    rest = rest.removeprefix(": ")
    if rest.startswith(WHOLE_FILE):
        return "whole file"
    assert fmt.where in ("json", "yaml"), f"no line number: {message!r}"
    where = rest.split(": ", 1)[0]
    assert resolves(parse(content, fmt.where), where), f"{where!r} is not a path in the file: {message!r}"
    return "path"


def check_accepted(result: Any) -> None:
    """What a reader accepted is usable: non-empty texts, labels in the set, answers in context."""
    if not isinstance(result, tasks.TaskData):
        return  # a recipe: load_recipe returned a validated RunConfig
    for split in (result.train, *result.evals.values()):
        assert split.examples, split.source
        for ex in split.examples:
            if result.head == "span":
                assert ex.context.strip() and ex.question.strip() and ex.id
                assert all(a.text and ex.context[a.start : a.start + len(a.text)] == a.text for a in ex.answers)
            elif result.head == "token":
                assert len(ex.tokens) == len(ex.tags) > 0 and set(ex.tags) <= set(TAGS)
            else:
                assert ex.text.strip() and (ex.text_pair is None or ex.text_pair.strip()) and ex.line >= 1
                assert (ex.text + (ex.text_pair or "")).encode("utf-8")
                ok = isinstance(ex.label, float) if result.is_regression else 0 <= ex.label < len(result.labels)
                assert ok, (ex, result.labels)


@pytest.mark.parametrize(("name", "first"), [(name, first) for name, fmt in FORMATS.items()
                                             for first in mutator_names(fmt)])
@FUZZ
@given(data=st.data())
def test_mutated_file_is_read_or_refused_naming_its_location(name: str, first: str, data: st.DataObject,
                                                             tmp_path: Path) -> None:
    fmt = FORMATS[name]
    names, content = data.draw(mutated(fmt, first), label="mutations")
    for mutation in set(names[1:]):
        event(f"then: {mutation}")
    path = tmp_path / fmt.file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    try:
        result = fmt.read(tmp_path)
    except TinyplmError as exc:
        located = check_message(str(exc), path.resolve(), content, fmt)
        assert located in ("line", "path", "whole file", "file its labels came from"), located
        event(f"refused, naming the {located}")
    else:
        event("accepted")
        check_accepted(result)  # asserts what was accepted is usable


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_seed_is_read(name: str, tmp_path: Path) -> None:
    """The unmutated seeds are valid, so a refusal above is the mutation's doing."""
    fmt = FORMATS[name]
    (tmp_path / fmt.file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / fmt.file).write_bytes(fmt.seed)
    result = fmt.read(tmp_path)
    check_accepted(result)
    if isinstance(result, tasks.TaskData):
        assert sum(len(split.examples) for split in (result.train, *result.evals.values())) >= 3
