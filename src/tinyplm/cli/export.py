"""``tinyplm export``: a run's models to ONNX, with a parity check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import app, out
from tinyplm.errors import TinyplmError


@app.command("export")
def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a finished run directory")],
    onnx: Annotated[bool, typer.Option("--onnx", help="export to ONNX and check parity on the dev set")] = False,
    stage: Annotated[list[str] | None, typer.Option("--stage", help="only these stages (repeatable)")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="default RUN_DIR/export")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Export every model of a run to ONNX; print each export's agreement with PyTorch.

    The run's models are already in Hugging Face format (RUN_DIR/model, students/, teacher/).
    Exits 1 when an export agrees with its PyTorch model on fewer than 99.5% of dev examples.

    Example: tinyplm export runs/sst2_demo --onnx
    """
    from tinyplm.run.export import MIN_AGREEMENT, export_run

    if not onnx:
        raise TinyplmError("export: choose a format; --onnx is the one there is (models are saved in "
                           "Hugging Face format already)")
    report = export_run(run_dir, stage, out_dir)
    if as_json:
        out.print_json(json.dumps([p.__dict__ for p in report]))
    else:
        table = Table(title=f"ONNX export of {run_dir}")
        for col in ("stage", "dev examples", "agreement", "max |logit diff|", "ONNX MB", "path"):
            table.add_column(col)
        for p in report:
            agree = "—" if p.agreement is None else f"{p.agreement:.2%}"
            diff = "—" if p.max_abs_logit_diff is None else f"{p.max_abs_logit_diff:.2e}"
            path = p.path + (f" ({p.note})" if p.note else "")
            table.add_row(p.stage, str(p.examples), agree, diff, f"{p.onnx_bytes / 1e6:.1f}", path)
        out.print(table)
    failed = [p.stage for p in report if p.agreement is not None and p.agreement < MIN_AGREEMENT]
    if failed:
        out.print(f"parity below {MIN_AGREEMENT:.1%} for: {', '.join(failed)}")
        raise typer.Exit(1)
