"""Pre-training objectives at equal budget: which one gives the best small encoder for GLUE?

    python benchmarks/pretrain_objectives.py --budget-minutes 10

One small shape (4 layers, hidden 256, 4 heads, FFN 1024) and one WordPiece vocabulary trained
here on the corpus (``tinyplm tokenizer train``, 16k pieces, shared by every model). Each
objective pre-trains from scratch on ``../shared/data/corpus`` (books + wikitext) for the same
wall-clock budget:

  mlm-static   BERT: 15% tokens, 80/10/10, each text's masks fixed (10 copies)
  mlm-dynamic  RoBERTa: a new mask every time
  whole-word   whole words masked
  span         SpanBERT spans (geometric, mean 3.8 words)
  mlm-nsp      dynamic MLM + next-sentence prediction
  mlm-sop      dynamic MLM + sentence-order prediction (ALBERT)
  electra      replaced-token detection, generator 1/4 wide, lambda 50
  none         no pre-training (the floor every objective should beat)

Each model is then fine-tuned on SST-2 and on MRPC with the same budget (``--finetune-minutes``).
Held-out MLM loss is measured on the same held-out paragraphs with the same fixed masks (for
ELECTRA, which keeps no MLM head, the generator's). Writes ``<out>/results.json`` (one row per
objective: held-out pre-training loss, steps, SST-2 accuracy, MRPC F1) and ``<out>/objectives.png``.
Its last line of output is the JSON's path. Finished pieces are reused on a rerun.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import _harness as harness

#: The recipes, their variable parts written $name (benchmarks/recipes/pretrain_objectives.yaml).
RECIPES = harness.recipes("pretrain_objectives")
SHAPE, OBJECTIVES = RECIPES["shape"], RECIPES["objectives"]
TASKS = {"sst2": ("accuracy", 64), "mrpc": ("f1", 128)}


def tokenizer(args, out: Path) -> Path:
    from tinyplm.pretrain.tokenizer import train_tokenizer

    path = out / "_tokenizer"
    if not (path / "tokenizer.json").is_file():
        train_tokenizer(list(harness.CORPUS), "wordpiece", args.vocab_size, path, max_items=args.max_docs)
    return path


def pretrain_one(args, name: str, tok: Path, out: Path):
    """Pre-train one objective (reusing a finished run) -> its ``PretrainResult`` (pretrain.json)."""
    from tinyplm.config.pretrain import PretrainRecipe
    from tinyplm.pretrain.run import pretrain_or_reuse

    raw = harness.fill(RECIPES["pretrain"], name=name, output_dir=str(out / name), tokenizer=str(tok),
                       corpus=[str(p) for p in harness.CORPUS], max_docs=args.max_docs, max_length=args.max_length,
                       objective=OBJECTIVES[name], minutes=args.budget_minutes, lr=args.lr)
    return pretrain_or_reuse(PretrainRecipe.model_validate(raw))


def scratch_model(tok: Path, out: Path) -> Path:
    """The 'none' row: the same shape, randomly initialised, saved once."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from tinyplm.models.io import save_model

    path = out / "none" / "model"
    if not path.is_dir():
        t = AutoTokenizer.from_pretrained(str(tok))
        torch.manual_seed(0)
        cfg = BertConfig(vocab_size=len(t), hidden_size=SHAPE["hidden"], num_hidden_layers=SHAPE["layers"],
                         num_attention_heads=SHAPE["heads"], intermediate_size=SHAPE["ffn"],
                         max_position_embeddings=512, pad_token_id=t.pad_token_id)
        save_model(BertModel(cfg), t, path)
    return path


def finetune(args, model_dir: Path, task: str, out: Path) -> dict[str, float]:
    """Fine-tune ``model_dir`` on ``task`` with the budget (reusing a finished run) -> dev metrics."""
    raw = harness.fill(RECIPES["finetune"], task=task, output_dir=str(out / task), max_length=TASKS[task][1],
                       model=str(model_dir), minutes=args.finetune_minutes, lr=args.finetune_lr)
    return harness.run_recipe(raw, source=f"pretrain_objectives:{task}").teacher.metrics


def row(name: str, record, metrics: dict[str, dict]) -> dict:
    """One table row: ``record`` is the objective's ``PretrainResult`` (None for the random 'none' row)."""
    after = record.after if record is not None else {}
    out = {"objective": name,
           "heldout_mlm_loss": after.get("mlm_loss", after.get("generator_mlm_loss")),
           "heldout_mlm_accuracy": after.get("mlm_accuracy", after.get("generator_mlm_accuracy")),
           "unigram_loss": after.get("unigram_loss"),
           "steps": record.steps if record is not None else 0,
           "pretrain_seconds": record.train_seconds if record is not None else 0.0}
    if "rtd_accuracy" in after:
        out["rtd_accuracy"] = after["rtd_accuracy"]
    for key in ("nsp_accuracy", "sop_accuracy"):
        if key in after:
            out[key] = after[key]
    for task, (metric, _) in TASKS.items():
        out[f"{task}_{metric}"] = metrics[task].get(metric)
    return out


def plot(rows: list[dict], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["objective"] for r in rows]
    for ax, (task, (metric, _)) in zip(axes, TASKS.items(), strict=True):
        values = [r[f"{task}_{metric}"] or 0.0 for r in rows]
        ax.bar(names, values, color=["#999999" if n == "none" else "#2a7f62" for n in names])
        ax.set_ylim(max(0.0, min(values) - 0.05), min(1.0, max(values) + 0.03))
        ax.set_title(f"{task} dev {metric}")
        ax.tick_params(axis="x", rotation=40)
    fig.suptitle("Pre-training objectives at equal budget (4L/256 from scratch), then equal fine-tuning")
    fig.tight_layout()
    path = out / "objectives.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "pretrain_objectives", budget_minutes=10.0,
                       budget_help="pre-training budget per objective")
    p.add_argument("--finetune-minutes", type=float, default=3.0, help="fine-tuning budget per model and task")
    p.add_argument("--objectives", nargs="+", default=list(OBJECTIVES) + ["none"], choices=list(OBJECTIVES) + ["none"])
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--finetune-lr", type=float, default=1e-4)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-docs", type=int, default=None, help="use at most this many corpus paragraphs")
    p.add_argument("--vocab-size", type=int, default=16000)
    args = p.parse_args()
    harness.prepare_out(args.out)
    start = time.time()
    tok = tokenizer(args, args.out)
    rows = []
    for name in args.objectives:
        record = None if name == "none" else pretrain_one(args, name, tok, args.out)
        model = scratch_model(tok, args.out) if name == "none" else args.out / name / "model"
        metrics = {task: finetune(args, model, task, args.out / name) for task in TASKS}
        rows.append(row(name, record, metrics))
        print(json.dumps(rows[-1]), flush=True)
    info = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    path = harness.save(args.out / "results.json", {"benchmark": "pretrain_objectives", "shape": SHAPE, "args": info,
                                                    "seconds": round(time.time() - start, 1), "rows": rows})
    plot(rows, args.out)
    harness.finish(path)


if __name__ == "__main__":
    main()
