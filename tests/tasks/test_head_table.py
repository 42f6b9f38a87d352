"""The head table (tinyplm.tasks.heads): one row per head, rows that agree with themselves, every
later layer's per-head table covering each head or naming what it lacks, and a ratchet on the
comparisons against ``Head`` members that code outside the table still makes."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from collections import Counter
from pathlib import Path
from typing import get_args

import pytest
from pydantic import TypeAdapter, ValidationError
from transformers import BertTokenizerFast

import tinyplm.inference.records as records
from conftest import tiny_vocab
from tinyplm.errors import TinyplmError
from tinyplm.models import load_classifier
from tinyplm.models.student import HEAD_CLASSES, head_class
from tinyplm.serve.api import Limits, request_type, to_inputs
from tinyplm.tasks import heads
from tinyplm.tasks.base import CLASSIFICATION_METRICS, REGRESSION_METRICS, Example, Split
from tinyplm.tasks.encoding import collate, encode_split
from tinyplm.tasks.heads import HEADS, AgreementRule, Head, LabelKind, Loss, PerHead
from tinyplm.tasks.squad import QAExample
from tinyplm.train.prediction import PredictionObjective

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "tinyplm"
#: The table module itself: the one place that may say which head is which.
TABLE = PACKAGE / "tasks" / "heads.py"
#: Comparisons against Head members outside the table: 55 before the table (same walker, on the
#: tree of commit fbf1875), 0 after. A new one fails here: ask the row, or add a PerHead entry.
MAX_HEAD_BRANCHES = 0
#: The loss family each kind of label is learnt with.
LOSS_OF = {LabelKind.CLASS_OR_SCORE: Loss.CLASSES, LabelKind.ANSWER_SPAN: Loss.SPAN, LabelKind.TAGS: Loss.TAGS,
           LabelKind.NONE: Loss.VECTORS}


# -- the ratchet's walker -----------------------------------------------------------------------------


def _is_member(node: ast.AST) -> bool:
    """``Head.X`` (or ``heads.Head.X``): an upper-case attribute of a name ``Head``."""
    if not (isinstance(node, ast.Attribute) and node.attr.isupper()):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "Head") or (
        isinstance(owner, ast.Attribute) and owner.attr == "Head")


def _holds_member(node: ast.AST) -> bool:
    """A tuple, list, set or dict literal holding (as an item or key) a ``Head`` member."""
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
    return isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and any(
        item is not None and _is_member(item) for item in items)


def head_branches(source: str) -> list[int]:
    """The lines of every branch on a head in ``source``: each ``==``/``!=``/``is``/``is not``
    against a ``Head`` member (either side, every link of a chained comparison), each ``in``/``not
    in`` a literal holding one, and each ``case`` naming one. Parsed, so layout cannot hide one."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                if isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot) and (_is_member(left) or _is_member(right)):
                    lines.append(node.lineno)
                elif isinstance(op, ast.In | ast.NotIn) and _holds_member(right):
                    lines.append(node.lineno)
        elif isinstance(node, ast.match_case):
            lines.extend(p.lineno for p in ast.walk(node.pattern)
                         if isinstance(p, ast.MatchValue) and _is_member(p.value))
    return lines


def branches_outside_table() -> dict[str, list[int]]:
    """src-relative path -> the lines of its head branches, for every module but the table."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != TABLE and (lines := head_branches(path.read_text(encoding="utf-8"))):
            found[str(path.relative_to(SRC))] = lines
    return found


def test_the_walker_sees_every_spelling_of_a_head_branch() -> None:
    source = """
if head == Head.SPAN: pass
if Head.TOKEN != head: pass
if (head
        is not Head.SEQUENCE): pass
x = a if h is heads.Head.SPAN else b
if head in (Head.SPAN, Head.TOKEN): pass
if head not in {Head.SPAN}: pass
if head in [other, Head.TOKEN]: pass
if head in {Head.SPAN: 1}: pass
if a < b == Head.SPAN: pass
match head:
    case Head.SPAN | Head.TOKEN: pass
    case _: pass
"""
    assert len(head_branches(source)) == 11
    asks = """
if head.row.windows: pass
table = {Head.SPAN: f}
f(head=Head.SPAN)
if head in table: pass
if kind == LabelKind.TAGS: pass
if head == Head: pass
"""
    assert head_branches(asks) == []  # a table, an argument, a lookup: no branch on a member


def test_no_new_branches_on_the_head_outside_the_table() -> None:
    found = branches_outside_table()
    shown = "; ".join(f"{path}:{','.join(map(str, lines))}" for path, lines in found.items())
    assert sum(map(len, found.values())) <= MAX_HEAD_BRANCHES, (
        f"branches on a Head member outside tasks/heads.py: {shown}. Ask the head's row (head.row) or "
        "keep the code in its layer's PerHead table instead")


# -- the rows -----------------------------------------------------------------------------------------


def test_every_head_has_exactly_one_row() -> None:
    counts = Counter(row.head for row in heads._ROWS)
    assert set(counts) == set(Head) and set(counts.values()) == {1}
    assert set(HEADS) == set(Head)
    for head in Head:
        assert head.row is HEADS[head] and head.row.head is head
    assert [h.value for h in Head] == ["sequence", "span", "token", "embedding"]
    assert Head("embedding") is Head.EMBEDDING and Head.EMBEDDING == "embedding"  # plain names in recipes


@pytest.mark.parametrize("head", list(Head))
def test_each_row_agrees_with_itself(head: Head) -> None:
    row = head.row
    assert row.loss is LOSS_OF[row.labels]  # class labels: a classification loss; no labels: vectors
    assert ("seq" in row.outputs) is row.per_position  # the documented shape has the axis it claims
    if row.per_position:  # rows tied to positions and windows: not cut by example, not one text whole
        assert not row.subset and not row.piece_memo
    if row.words:
        assert row.per_position and row.piece_labels
    assert row.piece_labels is (row.loss is Loss.TAGS)
    no_labels = row.labels is LabelKind.NONE
    assert (row.auto_suffix is None) is no_labels and (row.output_names == ()) is no_labels
    assert (row.agreement is AgreementRule.MEAN_COSINE) is no_labels
    if row.class_weights or row.roc or row.classic or row.task_texts or (row.holdout and not row.holdout_group):
        assert row.labels is LabelKind.CLASS_OR_SCORE and not row.per_position
    if row.holdout_group:  # the only grouped rows read questions on contexts, whose examples carry the field
        assert row.holdout and row.windows and row.holdout_group in {f.name for f in dataclasses.fields(QAExample)}
    if row.windows:  # a question on a context, answered by a span of it
        assert row.fields.pair_required and row.fields.id and row.output_names == ("start", "end")
    assert bool(row.regression_metrics) is row.may_regress
    assert len(row.records) == 1 + row.may_regress
    if row.labels is LabelKind.CLASS_OR_SCORE:
        assert set(row.metrics) <= set(CLASSIFICATION_METRICS)
        assert set(row.regression_metrics) <= set(REGRESSION_METRICS)
    assert row.metrics and row.fields.text


@pytest.mark.parametrize("head", list(Head))
def test_each_row_names_its_prediction_records(head: Head) -> None:
    for name in head.row.records:
        cls = getattr(records, name)
        assert dataclasses.is_dataclass(cls) and callable(cls.as_dict)
        assert cls in get_args(records.Prediction)


def test_output_labels_are_what_the_classifier_is_built_with() -> None:
    assert Head.SEQUENCE.row.output_labels(["neg", "pos"], False) == ("neg", "pos")
    assert Head.SEQUENCE.row.output_labels(["neg", "pos"], True) == ("score",)
    assert Head.SPAN.row.output_labels((), False) == ("start", "end")
    assert Head.TOKEN.row.output_labels(["O", "B-PER"], False) == ("O", "B-PER")
    assert Head.EMBEDDING.row.output_labels((), False) == ()


def test_architectures_name_every_head_with_a_class_and_default_to_sequence() -> None:
    for head in Head:
        if head.auto_suffix is not None:
            assert Head.of_architectures([f"Roberta{head.auto_suffix}"]) is head
    assert Head.of_architectures(["BertModel"]) is heads.DEFAULT_HEAD is Head.SEQUENCE
    assert Head.EMBEDDING.row.auto_class == "AutoModel" and Head.SPAN.row.auto_class == "AutoModelForQuestionAnswering"


def test_each_head_builds_its_bert_class() -> None:
    for head in Head:
        assert HEAD_CLASSES[head].__name__ == "Bert" + head.row.class_suffix
        assert head_class(head) is HEAD_CLASSES[head]


# -- the later layers' per-head tables ----------------------------------------------------------------


def _per_head_modules() -> list[str]:
    """Every module of src/tinyplm (the table's aside) that builds a PerHead table at module level."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n.value for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None]
        if any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "PerHead" for c in calls):
            names.append(".".join(path.relative_to(SRC).with_suffix("").parts))
    return names


def _tables() -> list[tuple[str, PerHead]]:
    found = []
    for name in _per_head_modules():
        module = importlib.import_module(name)
        found += [(f"{name}.{attr}", value) for attr, value in vars(module).items() if isinstance(value, PerHead)]
    return found


def test_every_per_head_table_covers_each_head_or_names_what_it_lacks() -> None:
    tables = _tables()
    assert {name.rsplit(".", 1)[1] for name, _ in tables} >= {
        "ENCODERS", "HEAD_CLASSES", "LOSSES", "SPLIT_METRICS", "COMPARE", "INPUT_OF", "PATHS", "BUILDERS",
        "COLUMNS", "WIRES", "PREDICTION_TYPES"}
    for name, table in tables:
        for head in Head:
            if head in table:
                assert table[head] is not None and table[str(head)] is table[head], name
            else:
                gap = f"^the {head} head has no {re.escape(table.capability)} \\(heads that have: "
                with pytest.raises(TinyplmError, match=gap):
                    table[head]
    lacking = {name.rsplit(".", 1)[1] for name, table in tables if Head.EMBEDDING in table.missing}
    # the embedding head's loss lives with distillation on vectors (distill.embedding), not with the logit
    # losses; the tables it still lacks are those of the stages not built for it yet
    assert "LOSSES" in lacking and lacking <= {"LOSSES", "COMPARE", "PATHS", "COLUMNS"}


def test_a_per_head_table_is_keyed_by_heads() -> None:
    with pytest.raises(TypeError, match="keyed by Head members"):
        PerHead("thing", {"span": 1})
    table = PerHead("span answers", {Head.SPAN: 1})
    assert table["span"] == 1 and table.missing == (Head.SEQUENCE, Head.TOKEN, Head.EMBEDDING)
    with pytest.raises(TinyplmError, match="the embedding head has no span answers"):
        table[Head.EMBEDDING]
    with pytest.raises(TinyplmError, match="unknown head 'spam'; expected one of sequence, span, token, embedding"):
        table["spam"]


# -- what the embedding row means where it is asked ---------------------------------------------------


def test_an_embedding_split_encodes_single_texts_without_labels() -> None:
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)
    texts = [Example("the movie was good", None, None), Example("a dull plot", None, None)]
    enc = encode_split(Split("x", texts, Path("x"), Head.EMBEDDING), tok, 16)
    plain = encode_split(Split("x", [Example(e.text, None, 0) for e in texts], Path("x")), tok, 16)
    assert enc.head is Head.EMBEDDING and enc.input_ids == plain.input_ids and enc.labels.shape == (2, 0)
    assert enc.subset([1]).input_ids == [enc.input_ids[1]]
    assert collate(enc, [0, 1])["labels"].shape == (2, 0)
    with pytest.raises(TinyplmError, match="one text per example; example 1 has a second text"):
        encode_split(Split("x", [Example("a", "b", None)], Path("x"), Head.EMBEDDING), tok, 16)


def test_heads_without_logits_are_refused_with_the_capability_named(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="the embedding head has no classifier to load"):
        load_classifier(tmp_path, (), False, Head.EMBEDDING)
    with pytest.raises(TinyplmError, match="the embedding head has no prediction-layer loss on logits"):
        PredictionObjective(head=Head.EMBEDDING)


def test_an_embedding_request_is_one_text() -> None:
    adapter = TypeAdapter(request_type(Head.EMBEDDING, Limits()))
    assert to_inputs(Head.EMBEDDING, adapter.validate_python({"text": "a b"})) == ([records.TextInput("a b")], False)
    with pytest.raises(ValidationError):
        adapter.validate_python({"text": "a", "text_pair": "b"})
