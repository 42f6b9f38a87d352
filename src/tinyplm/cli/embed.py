"""``tinyplm embed-eval``: an embedding model scored on similarity and retrieval sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import DataRoot, app, out
from tinyplm.files import write_json_atomic


@app.command("embed-eval")
def embed_eval_cmd(
    model: Annotated[str, typer.Argument(help="an embedding model dir (sentence-transformers layout, or a static "
                                              "sentence encoder tinyplm saved) or an alias (minilm-l6, mpnet-base)")],
    stsb: Annotated[bool, typer.Option(
        "--stsb/--no-stsb", help="STS-B dev: Spearman of the pairs' similarities")] = True,
    squad: Annotated[bool, typer.Option(
        "--squad/--no-squad", help="SQuAD v1.1 dev as retrieval: each question ranks every paragraph")] = True,
    pairs: Annotated[list[Path] | None, typer.Option(
        "--pairs", help="your own pairs file with gold scores (CSV/TSV with a header, or JSON lines); "
                        "repeatable")] = None,
    beir: Annotated[list[Path] | None, typer.Option(
        "--beir", help="your own retrieval set, a folder in the BEIR layout (corpus.jsonl, queries.jsonl, "
                       "qrels/SPLIT.tsv); repeatable")] = None,
    split: Annotated[str, typer.Option("--split", help="BEIR folders: the qrels split")] = "test",
    data_dir: DataRoot = None,
    max_length: Annotated[int | None, typer.Option(
        help="tokens per text (default: the model's own limit, e.g. its sentence_bert_config.json)")] = None,
    batch_size: Annotated[int, typer.Option(help="texts per forward pass (sorted by length)")] = 64,
    similarity: Annotated[str | None, typer.Option(
        "--similarity", help="compare vectors by cosine, dot, euclidean or manhattan (default: the model's own "
                             "similarity_fn_name, cosine when it names none)")] = None,
    prompts: Annotated[bool, typer.Option(
        "--prompts/--no-prompts", help="retrieval: put the model's 'query' prompt before queries and its "
                                       "'document'/'passage'/'corpus' prompt before documents, as "
                                       "sentence-transformers does")] = True,
    save: Annotated[Path | None, typer.Option("--out", help="also write the scores here (JSON)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Score an embedding model on STS-B dev (Spearman x 100 of similarities), SQuAD v1.1 dev as
    retrieval (nDCG@10, MRR@10, recall@1, recall@10), and your own pairs or BEIR sets, comparing
    vectors by the model's own similarity function and giving its retrieval prompts, as
    sentence-transformers' evaluators do. Every set is read and checked before the model is loaded.

    Example: tinyplm embed-eval minilm-l6
    Example: tinyplm embed-eval runs/minilm_embed/model --no-squad --pairs my_pairs.csv
    """
    from tinyplm.evaluate.embed_suite import model_scoring, own_sets, read_sets, score_sets, standard_sets
    from tinyplm.evaluate.similarity import similarity_of
    from tinyplm.models.embedder import load_embedder
    from tinyplm.predict.predict import writable

    if similarity is not None:
        similarity_of(similarity, "--similarity")  # refused before any set or model is read
    if save is not None:  # not after every set is embedded
        writable(str(save), "--out", streams=False)  # written atomically: a file
    sets = read_sets(standard_sets(data_dir, stsb, squad) + own_sets(pairs or [], beir or [], split))
    embedder = load_embedder(model, max_length, batch_size)
    scoring = model_scoring(embedder, prompts, similarity)
    scores = score_sets(embedder.embed, sets, scoring)
    result = {"model": str(embedder.path), "kind": str(embedder.kind), "dim": embedder.dim,
              "max_length": max_length, **scoring.as_dict(), "sets": [s.as_dict() for s in scores]}
    if save is not None:
        write_json_atomic(save, result)
    if as_json:
        out.print_json(json.dumps(result))
    else:
        _print_scores(embedder, scoring, scores)


def _print_scores(embedder, scoring, scores) -> None:
    """The scores as a table, titled with the model and how its vectors were compared."""
    said = "".join(f", {k.replace('_', ' ')} {v!r}" for k, v in scoring.as_dict().items() if k != "similarity" and v)
    table = Table(title=f"{embedder.path} ({embedder.kind}, {embedder.dim} dims, {scoring.similarity}{said})")
    for column in ("set", "kind", "metrics", "size", "seconds"):
        table.add_column(column)
    for s in scores:
        table.add_row(s.name, str(s.kind), ", ".join(f"{k} {v:.2f}" for k, v in s.metrics.items()),
                      ", ".join(f"{k} {v}" for k, v in s.size.items()), f"{s.seconds:.1f}")
    out.print(table)
