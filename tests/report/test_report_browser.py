"""report.html opened in real headless Chromium: no console message, every image decodes, a screenshot.

Chromium (Debian's ``chromium`` package) is driven by its own command line, no Python browser
package: ``--dump-dom`` with ``--enable-logging=stderr`` prints every console message of the page
as an ``INFO:CONSOLE`` line. The report has no script of its own, so any console message is a
fault; the test loads a copy of the page with one added script that logs, after ``load``, how
many images there are and which did not decode. ``--screenshot`` writes ``report.png`` beside the
report. Skipped, saying so, where no Chromium is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tinyplm.evaluate.head_run import AttentionExample, HeadsReport, StageHeads
from tinyplm.evaluate.probe import ProbeCurve, ProbeReport
from tinyplm.files import write_json_atomic
from tinyplm.report import write_all
from tinyplm.report.analysis import analysis_path
from tinyplm.report.records import RunRecord, StageKind, StageRecord

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
MARK = "TINYPLM-IMAGES "
CHECK = ('<script>window.addEventListener("load", () => { const im = [...document.images]; console.log("' + MARK
         + '" + JSON.stringify({total: im.length, broken: im.filter(i => !(i.complete && i.naturalWidth > 0))'
         '.map(i => i.alt)})); });</script>')


def open_in_chromium(page: Path) -> tuple[list[str], dict]:
    """(console messages other than the image check, the image check's {total, broken}) of ``page``."""
    probe = page.with_name(page.stem + ".check.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK + "</body>"), encoding="utf-8")
    run = subprocess.run([CHROMIUM, *FLAGS, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    probe.unlink()
    messages = re.findall(r":CONSOLE[^\]]*\] \"(.*)\", source:", run.stderr)
    images = [json.loads(m[len(MARK):]) for m in messages if m.startswith(MARK)]
    assert images, f"the image check never ran: {run.stderr[-2000:]}"
    return [m for m in messages if not m.startswith(MARK)], images[0]


def screenshot(page: Path) -> Path:
    """``report.png`` beside ``page``: the top 1200 x 2400 pixels as Chromium draws them."""
    shot = page.with_suffix(".png")
    subprocess.run([CHROMIUM, *FLAGS, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    return shot


def report_with_analysis(run: Path) -> Path:
    """A run's report.html with stored probe curves and head statistics (made by hand, no model run)."""
    curve = ProbeCurve("teacher", [0.6, 0.8, 0.9], [0.6, 0.65, 0.62], 0.3, 100, 40)
    write_json_atomic(analysis_path(run, "probe", "conll2003-pos"),
                      ProbeReport("conll2003-pos", "word", "POS", ["NN", "VB"], {}, [curve]).to_dict())
    stats = {s: [[0.2, 0.95], [0.5, 0.1]] for s in ("entropy", "confidence", "prev", "argmax_prev", "sep")}
    example = AttentionExample(0, ["[CLS]", "a", "b", "[SEP]"],
                               [{"layer": 0, "head": 1, "why": "most prev", "weights": [[0.25] * 4] * 4}])
    heads = StageHeads("teacher", [2, 2], stats, 10, 60, example=example)
    write_json_atomic(analysis_path(run, "heads", "sst2"), HeadsReport("sst2", {}, 0.9, [heads]).to_dict())
    record = RunRecord("sst2", "accuracy", [
        StageRecord("teacher", {"accuracy": 0.9}, 1000, 800, 4000, 2.0, 3.0, 100.0, kind=StageKind.TEACHER),
        StageRecord("student", {"accuracy": 0.88}, 500, 400, 2000, 1.0, 1.5, 200.0, parent="teacher"),
    ])
    return write_all(record, run)["report"]


def test_the_report_renders_in_chromium_without_errors_and_every_image_loads(tmp_path: Path) -> None:
    page = report_with_analysis(tmp_path / "run")
    assert "Looking inside" in page.read_text(encoding="utf-8")
    errors, images = open_in_chromium(page)
    assert errors == []
    assert images["broken"] == [] and images["total"] >= 5  # 2 run plots, probe, heatmaps, attention maps
    shot = screenshot(page)
    assert shot == page.parent / "report.png" and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a drawn page, not an empty canvas


def test_the_check_sees_a_broken_image_and_a_script_error(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img alt="broken" src="data:image/png;base64,AAAA">'
                    "<script>undefinedFunction();</script></body></html>", encoding="utf-8")
    errors, images = open_in_chromium(page)
    assert any("undefinedFunction" in e for e in errors)
    assert images == {"total": 1, "broken": ["broken"]}
