"""``tinyplm report``: a run's report rebuilt from its results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, out


@app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="a finished run dir (holds results.json)")]) -> None:
    """Rebuild summary.md, report.html, plots and model cards from results.json.

    Example: tinyplm report runs/sst2_demo
    """
    from tinyplm.report import rebuild

    written = rebuild(run_dir)
    out.print(f"report: {written.get('report.html', run_dir / 'report.html')}")
