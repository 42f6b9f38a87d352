"""Every speed figure in README.md and docs/ names the CPU kind it was measured on.

A speed figure holds on the kind of CPU it was measured on (docs/results/index.md, "CPU kinds"). The
kinds are defined once, there, as short tags; a page names one as a link to that definition
(``[SPR-AMX](results/index.md#cpu-kinds)``). This test reads README.md and every docs/ page outside
fenced code, split into sections (at each heading) and blocks (paragraphs, lists, tables); a block
that holds a speed figure (a rate per second, ``N× the teacher`` or ``N× faster``, a speed-up in
percent, milliseconds, or a table with a ``sent/s``, ``× teacher`` or ``ms`` column) passes when that
block or an earlier block of its section links a tag. It cannot tell a wrong tag from a right one:
that is the writer's part.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
INDEX = DOCS / "results" / "index.md"
TAGS = ("SPR-AMX", "EPYC-AVX512", "EPYC-AVX2", "UNRECORDED")

#: A tag as a link to its definition.
TAG_LINK = re.compile(rf"\[({'|'.join(TAGS)})\]\((?:[\w./-]*/)?(?:results/)?index\.md#cpu-kinds\)")

#: What reads as a speed figure in prose.
SPEED = re.compile(
    r"(?<![\w.-])\d[\d,.]*\s*(?:[A-Za-z]+)?/s\b"  # 1,497 sent/s, 262/s, 32 pairs/s
    r"|\d[\d,.]*\s+(?:sentences|examples|requests) per second"
    r"|(?<![\w.])\d+(?:\.\d+)?(?:\s*[-–]\s*\d+(?:\.\d+)?)?\s*[x×]\s+(?:the|its|faster|slower|as fast)\b"
    r"|(?<![\w.])\d+(?:\.\d+)?(?:\s*[-–]\s*\d+(?:\.\d+)?)?%\s+(?:faster|slower)\b"
    r"|(?<![\w.])\d+(?:\.\d+)?\s*ms\b")

#: A table header that makes every row a speed figure.
SPEED_COLUMN = re.compile(r"\|[^|\n]*(?:sent/s|examples/s|[x×] teacher|\bms\b)[^|\n]*\|")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def sections(text: str) -> list[list[tuple[int, str]]]:
    """The page outside fenced code as sections (split at headings), each a list of (first line,
    block) with blocks split at blank lines."""
    lines = text.splitlines()
    out: list[list[tuple[int, str]]] = [[]]
    block: list[str] = []
    start, fenced = 0, False

    def close() -> None:
        if block:
            out[-1].append((start, "\n".join(block)))
            block.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced:
            continue
        if line.startswith("#"):
            close()
            out.append([])
        elif not line.strip():
            close()
        else:
            if not block:
                start = number
            block.append(line)
    close()
    return out


def untagged_speed_figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) of each block holding a speed figure with no tag in it or before it in its section."""
    found = []
    for section in sections(text):
        tagged = False
        for line, block in section:
            tagged = tagged or bool(TAG_LINK.search(block))
            table = block.startswith("|") and SPEED_COLUMN.search(block.splitlines()[0])
            figure = table or SPEED.search(block)
            if figure and not tagged:
                found.append((line, figure.group(0).strip()))
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_speed_figure_names_its_cpu_kind(page: Path) -> None:
    found = untagged_speed_figures(page.read_text(encoding="utf-8"))
    shown = "\n".join(f"{page.relative_to(REPO)}:{line}: {figure!r}" for line, figure in found)
    assert not found, ("speed figures with no CPU kind: link one of " + ", ".join(TAGS) + " (defined in "
                       "docs/results/index.md#cpu-kinds) in the figure's block or earlier in its section:\n" + shown)


def test_the_tags_are_defined_once_in_the_results_index() -> None:
    text = INDEX.read_text(encoding="utf-8")
    assert "\n## CPU kinds\n" in text
    defined = re.findall(r"^\| ([A-Z0-9-]+) \|", text, re.M)
    assert defined == list(TAGS), defined
    elsewhere = [str(p.relative_to(REPO)) for p in pages() if p != INDEX
                 and re.search(rf"^\| ({'|'.join(TAGS)}) \|", p.read_text(encoding="utf-8"), re.M)]
    assert not elsewhere, f"CPU kinds defined outside docs/results/index.md: {elsewhere}"


def test_a_link_to_the_definitions_counts_and_a_section_carries_it() -> None:
    text = ("# Page\n\nOn [SPR-AMX](results/index.md#cpu-kinds), 2 cores.\n\n| model | sent/s |\n|---|---:|\n"
            "| a | 1,200 |\n\n- 3.1x the teacher\n\n## Next\n\nran at 400 sent/s\n\n```\n9 sent/s in code\n```\n"
            "\nOn SPR-AMX (not a link) 2.0x faster\n")
    assert untagged_speed_figures(text) == [(13, "400 sent/s"), (19, "2.0x faster")]
    assert not untagged_speed_figures("Sizes only: 11.7× smaller, 90.9 MB, 0.8853 accuracy.\n")
