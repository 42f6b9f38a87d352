"""Measured figures stay out of the code: src/ comments and docstrings, and recipe comments.

Results live in docs/results beside the command and the CPU kind that produced them (DESIGN.md);
in a docstring or a recipe header they go stale unseen and read as if they held on any machine.
This test reads every comment and every string statement (docstrings) of ``src/**/*.py`` (through
``tokenize`` and ``ast``, so code and string values are not read) and every comment of
``recipes/**/*.yaml``, and flags what reads as a measurement: a throughput (``1,200 sent/s``), a
ratio (``4-5x faster``, ``1.7x the examples``), a speed-up in percent (``12% faster``), an
accuracy-like decimal or percentage (``0.8853``, ``97.4%``) and a measured time (``~200 ms``,
``25-45 ms``, ``400 -> 215 ms``).

Not flagged: a figure inside a code literal (double backticks: a value the code uses or prints,
such as ``0.995``), a threshold (``fewer than 99.5%``), a whole percentage (``15% of tokens``),
a default or unit in an option's description. A flagged figure moves to its docs/results page,
with its command and CPU kind, and the comment points there.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from conftest import REPO

#: Words before a figure that make it a threshold, not a measurement (fixed-width look-behinds).
_NOT_AFTER = "".join(f"(?<!{w} )" for w in ("than", "under", "below", "above", "least", "most", ">=", "<=", "≥",
                                              "≤"))
_RANGE = r"(?:\s*(?:-|–|to)\s*\d+(?:\.\d+)?)?"

#: What reads as a measured figure -> its pattern.
FIGURES: dict[str, re.Pattern[str]] = {
    "throughput": re.compile(r"(?<![\w.-])\d[\d,.]*\s*(?:sent(?:ence)?s?/s|examples?/s|ex/s|req(?:uest)?s?/s"
                             r"|(?:sentences|examples|requests) (?:per|a) second)\b"),
    "ratio": re.compile(rf"(?<![\w.])\d+(?:\.\d+)?{_RANGE}\s*[x×]\s+(?:the|its|faster|slower|smaller|as fast)\b"),
    "speed-up in percent": re.compile(rf"(?<![\w.])\d+(?:\.\d+)?{_RANGE}%\s+(?:faster|slower)\b"),
    "accuracy-like decimal": re.compile(rf"{_NOT_AFTER}(?<![\w.])0\.[1-9]\d{{2,3}}(?!\d|\.\d)"),
    "accuracy-like percentage": re.compile(rf"{_NOT_AFTER}(?<![\w.])\d{{1,3}}\.\d+%"),
    "measured time": re.compile(r"~\s*\d+(?:\.\d+)?\s*ms\b"
                                r"|(?<![\w.])\d+(?:\.\d+)?\s*(?:-|–|to|->|→)\s*\d+(?:\.\d+)?\s*ms\b"),
}

#: A code literal (``...``, across lines too): what is inside is a value, not a measurement.
_LITERAL = re.compile(r"``.+?``", re.S)


def figures_in(text: str) -> list[tuple[int, str, str]]:
    """The measured-looking figures of one comment or docstring: (line offset in ``text``, kind,
    the figure as written)."""
    blanked = _LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # keeps offsets and lines
    found = []
    for kind, pattern in FIGURES.items():
        for match in pattern.finditer(blanked):
            found.append((text.count("\n", 0, match.start()), kind, match.group(0)))
    return sorted(found)


def python_texts(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each comment and each string statement (docstrings: module, class,
    function and attribute docstrings alike) of a Python source."""
    texts = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            texts.append((node.lineno, node.value.value))
    return sorted(texts)


def yaml_comments(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each comment of a YAML source: a run of whole-line comments (a recipe's
    header) is one text; a comment after a value is one text of its own."""
    texts: list[tuple[int, str]] = []
    run: list[str] = []
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#"):
            if not run:
                texts.append((number, ""))
            run.append(line.lstrip()[1:])
            texts[-1] = (texts[-1][0], "\n".join(run))
            continue
        run = []
        at = _comment_start(line)
        if at is not None:
            texts.append((number, line[at + 1:]))
    return texts


def _comment_start(line: str) -> int | None:
    """Where the comment after a value starts (a ``#`` after a space, outside quotes), or None."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return i
    return None


def _sources() -> list[Path]:
    return [*sorted((REPO / "src").rglob("*.py")), *sorted((REPO / "recipes").rglob("*.yaml"))]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_measured_figures_in_comments_docstrings_or_recipe_headers(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    texts = python_texts(source) if path.suffix == ".py" else yaml_comments(source)
    found = [f"{path.relative_to(REPO)}:{line + offset}: {kind} {figure!r}"
             for line, text in texts for offset, kind, figure in figures_in(text)]
    assert not found, ("measured figures in comments or docstrings; move each to its docs/results page with "
                       "its command and CPU kind (docs/results/index.md#cpu-kinds) and point there:\n"
                       + "\n".join(found))


@pytest.mark.parametrize("text", [
    "ran at 1,200 sent/s on two cores", "4,612 sentences/s from text to label", "388 examples/s",
    "the same update, 4-5x faster", "so 1.7x the examples per second", "11.7× smaller", "at 5x its normal cost",
    "ran 0-24% faster", "reached 0.8853 on dev", "kept 97.4% of the teacher", "stalled the loop for ~200 ms",
    "a new shape took 25-45 ms", "p99 400 -> 215 ms"])
def test_a_measured_figure_is_flagged(text: str) -> None:
    assert figures_in(text), text


@pytest.mark.parametrize("text", [
    "exits 1 on fewer than 99.5% of dev examples", "keeps at least 97.5% of the teacher", "15% of the tokens",
    "the dashed line at 97% of the teacher", "``0.995`` agreement", "e.g. ``keeps 98.1% at 2.0× its\nthroughput``",
    "max_wait_ms (5 ms by default)", "dropout 0.1, lr 1e-4, max_drop 0.005", "batch-32 sent/s and p50 ms columns",
    "a 64 x 4,096-n-gram batch", "64 word pieces cover most sentences"])
def test_legitimate_text_is_not_flagged(text: str) -> None:
    assert not figures_in(text), figures_in(text)


def test_comments_and_docstrings_are_what_is_read() -> None:
    source = ('"""Module: 0.8853."""\nX = "0.9123 in a value"  # a comment, 12 sent/s\n\n\ndef f():\n'
              '    """Function doc."""\n    return "0.7777"\n')
    assert [line for line, _ in python_texts(source)] == [1, 2, 6]
    assert [kind for _, text in python_texts(source) for _, kind, _ in figures_in(text)] == [
        "accuracy-like decimal", "throughput"]
    yaml_source = "# launch\n# kept 97.4%\nname: x\nlr: 1.0e-4   # 2x faster\nquoted: 'a # b'\n"
    assert yaml_comments(yaml_source) == [(1, " launch\n kept 97.4%"), (4, " 2x faster")]
