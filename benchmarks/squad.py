"""SQuAD v1.1 benchmark: the packaged MiniLM fine-tuned and a 4-layer student distilled, each on a CPU budget.

    python benchmarks/squad.py                       # recipes/squad/v1_demo.yaml: 30 + 30 minutes
    python benchmarks/squad.py --teacher-minutes 10 --student-minutes 10

Runs ``recipes/squad/v1_demo.yaml`` (by default on the article split of dev-v1.1.json: 38 articles
train, the last 10 are evaluated; see the recipe). Writes ``<out>/results.json`` in the core's
results.json schema (a ``teacher`` stage and the student's), prints one JSON row per stage with F1,
EM, its retention of the teacher's F1, size and speed. Its last line of output is the JSON's path.
"""

from __future__ import annotations

from _harness import REPO, recipe_benchmark

if __name__ == "__main__":
    recipe_benchmark(__doc__, REPO / "recipes" / "squad" / "v1_demo.yaml", "squad", ("exact_match",))
