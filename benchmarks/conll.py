"""CoNLL-2003 NER benchmark: the packaged MiniLM fine-tuned and a 4-layer student distilled, each on a CPU budget.

    python benchmarks/conll.py                       # recipes/conll/ner_demo.yaml: 15 + 10 minutes
    python benchmarks/conll.py --teacher-minutes 5 --student-minutes 5

Runs ``recipes/conll/ner_demo.yaml``: entity-level F1 (seqeval semantics) on the validation split
(``f1``) and on the test split (``f1_test``). Writes ``<out>/results.json`` in the core's
results.json schema (a ``teacher`` stage and the student's), prints one JSON row per stage with
its F1s, retention of the teacher's validation F1, size and speed. Its last line of output is the
JSON's path.
"""

from __future__ import annotations

from _harness import REPO, recipe_benchmark

if __name__ == "__main__":
    recipe_benchmark(__doc__, REPO / "recipes" / "conll" / "ner_demo.yaml", "conll",
                     ("f1_test", "precision_test", "recall_test"))
