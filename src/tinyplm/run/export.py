"""Export a run's models to ONNX and check each export against its PyTorch model on the dev set.

``export_run(run_dir)`` writes ``<run_dir>/export/<stage>/`` (``model.onnx``, ``config.json``,
tokenizer) for every stage of the run's ``results.json``, runs the export with onnxruntime on the
task's dev split(s) and compares predictions with the PyTorch model: the agreement (share of
identical predicted classes; for regression, outputs within 1e-3) and the largest logit
difference. The figures are printed by the CLI and stored in ``<run_dir>/export/parity.json``.
A stage that is already an ONNX Runtime model (ONNX-quantized) is copied and marked as such.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from tinyplm.config import load_recipe
from tinyplm.errors import RunDirError, TinyplmError
from tinyplm.evaluate.agreement import prediction_agreement
from tinyplm.evaluate.model_eval import encode_evals
from tinyplm.files import check_creatable, write_json_atomic
from tinyplm.models import save_model
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.onnx import ONNX_FILE, OrtClassifier, export_onnx
from tinyplm.models.openvino import OvClassifier
from tinyplm.models.quantized import QUANT_KEY
from tinyplm.report import load_record
from tinyplm.run.preflight import load_task
from tinyplm.tasks.heads import Head

PARITY_FILE = "parity.json"
#: The lowest agreement an export may have before the CLI reports it as failed.
MIN_AGREEMENT = 0.995


@dataclass
class Parity:
    """One stage's export: where it went and how closely it matches PyTorch on the dev set."""

    stage: str
    path: str
    examples: int
    agreement: float | None  # None when the stage was already ONNX (nothing to compare with)
    max_abs_logit_diff: float | None
    onnx_bytes: int
    note: str = ""


def export_run(run_dir: Path, stages: list[str] | None = None, out_dir: Path | None = None) -> list[Parity]:
    """Export the run's stages (all, or the named ones) to ONNX and check parity -> one Parity each.

    Raises ``TinyplmError`` when ``run_dir`` is not a finished run, a named stage is unknown, or its
    models output vectors (an embedding run: its runtime step makes their graphs), before writing.
    """
    run_dir = Path(run_dir)
    results, resolved = run_dir / "results.json", run_dir / "config.resolved.yaml"
    if not results.is_file() or not resolved.is_file():
        raise TinyplmError(f"{run_dir}: not a finished tinyplm run (needs results.json and config.resolved.yaml)")
    record = load_record(results)
    known = {s.name: s for s in record.stages if s.model_dir}
    unknown = sorted(set(stages or []) - set(known))
    if unknown:
        raise TinyplmError(f"{run_dir}: no stage(s) {unknown}; stages with a model: {sorted(known)}")
    cfg = load_recipe(resolved)
    data = load_task(cfg.task, cfg.corpus, check_keys=False)  # a finished run's recipe, as it ran
    if Head(data.head).row.auto_suffix is None:  # before anything is written: its graph has no logits output
        raise TinyplmError(f"{run_dir}: its models output vectors ({data.head} head), and export writes a "
                           "classifier's logits graph; an embedding model's ONNX or OpenVINO form, with its pooling, "
                           "is made by the run's runtime step (compress: [{kind: runtime}]), which "
                           "sentence-transformers and tinyplm predict load")
    out_dir = Path(out_dir or run_dir / "export")
    names = _check_targets(run_dir, out_dir, [(name, run_dir / known[name].model_dir) for name in stages or known])
    out_dir.mkdir(parents=True, exist_ok=True)
    report = []
    for name in names:
        if report:  # each stage's parity kept as soon as it is measured: a later failure loses none of them
            _write(out_dir / PARITY_FILE, report)
        model_dir = run_dir / known[name].model_dir
        model, tok = load_for_head(model_dir, data.labels, data.is_regression, data.head)
        target = out_dir / name
        evals = encode_evals(data, tok, cfg.task.max_length, cfg.task.max_eval_examples)
        if isinstance(model, OrtClassifier):
            save_model(model, tok, target)
            n = sum(len(e) for e in evals.values())
            report.append(Parity(name, str(target), n, None, None, (target / ONNX_FILE).stat().st_size,
                                 "already an ONNX Runtime model (quantized); copied"))
            continue
        if isinstance(model, OvClassifier):  # an OpenVINO graph has no way back to ONNX
            report.append(Parity(name, "", 0, None, None, 0, "not exported: already an OpenVINO model (its "
                                 "agreement with its PyTorch parent is in results.json)"))
            continue
        scheme = (getattr(model.config, QUANT_KEY, None) or {}).get("scheme")
        if scheme == "int8_dynamic":  # torch's quantized::linear_dynamic has no ONNX export
            report.append(Parity(name, "", 0, None, None, 0, "not exported: torch.ao dynamic int8 has no ONNX "
                                 "form; ONNX Runtime's int8 (onnx_dynamic_int8) is the exportable equivalent"))
            continue
        tmp = out_dir / f".{name}.onnx"
        onnx = OrtClassifier(export_onnx(model, tmp), model.config)
        save_model(onnx, tok, target)
        tmp.unlink(missing_ok=True)
        with torch.inference_mode():
            agree = prediction_agreement(model, onnx, evals, data.is_regression, data.head)
        report.append(Parity(name, str(target), agree.examples, agree.agreement, agree.max_abs_logit_diff,
                             (target / ONNX_FILE).stat().st_size))
    _write(out_dir / PARITY_FILE, report)
    return report


def _check_targets(run_dir: Path, out_dir: Path, stages: list[tuple[str, Path]]) -> list[str]:
    """The stage names to export, in order, once every stage's model folder is there and the
    export folder can be made (not a file, nor under one); raises ``TinyplmError`` before anything
    is exported, naming what is missing or in the way."""
    try:
        check_creatable(out_dir, "export destination")
    except RunDirError as exc:
        raise TinyplmError(f"--out: {exc}") from None
    missing = [f"{name} ({model_dir})" for name, model_dir in stages if not model_dir.is_dir()]
    if missing:
        raise TinyplmError(f"{run_dir}: the model folder of stage(s) {', '.join(missing)} is gone; nothing "
                           "exported (--stage names the stages to export)")
    _check_clear_of_models(run_dir, out_dir, stages)
    return [name for name, _ in stages]


def _check_clear_of_models(run_dir: Path, out_dir: Path, stages: list[tuple[str, Path]]) -> None:
    """Refuse (``TinyplmError``) an export folder whose stage folders would replace, hold or sit
    inside one of the run's own model folders (``--out RUN_DIR`` or ``RUN_DIR/students``: each
    stage's ONNX copy put where its PyTorch model is, which would be lost)."""
    models = [(run_dir / "model").resolve(), *(model_dir.resolve() for _, model_dir in stages)]
    for name, _ in stages:
        target = (out_dir / name).resolve()
        hit = next((m for m in models if m == target or m in target.parents or target in m.parents), None)
        if hit is not None:
            raise TinyplmError(f"--out {out_dir}: the export of stage {name} would go to {target}, which would "
                               f"replace the run's model folder {hit} or files in it; nothing exported (leave --out "
                               f"out for {run_dir / 'export'}, or name a folder outside the run's model folders)")


def _write(path: Path, report: list[Parity]) -> None:
    """Merge into an existing parity.json (stages exported earlier keep their entries)."""
    existing = {}
    if path.is_file():
        existing = {p["stage"]: p for p in json.loads(path.read_text(encoding="utf-8"))}
    existing.update({p.stage: asdict(p) for p in report})
    write_json_atomic(path, list(existing.values()))


def remove_export(out_dir: Path) -> None:
    """Delete an export folder made by :func:`export_run` (used by ``--force``)."""
    if (out_dir / PARITY_FILE).is_file():
        shutil.rmtree(out_dir)
