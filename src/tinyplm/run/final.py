"""Which of a run's models becomes its ``model/``: the recipe's ``final`` rule over the measured stages.

The report only shows the choice (``report.tables.final_stage`` reads the name the run recorded);
the choice itself is the run's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tinyplm.config.schema import FinalSpec
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.tables import best_student, primary, ratio

RULES = {"fastest": "the fastest", "smallest": "the smallest", "most_accurate": "the most accurate"}


def select_final(record: RunRecord, rule: str = "fastest", min_retention: float = 0.98,
                 guard_retention: float | None = None, speed_tie: float = 0.0) -> tuple[StageRecord | None, str]:
    """The final model by ``rule`` (see ``config.schema.FinalSpec``) among the stages that keep at
    least ``min_retention`` of the teacher's primary metric, and a sentence saying why; the most
    accurate student when none keeps that much, the teacher when there is no student.

    The metric is the one the run chooses on (``record.info.selection_metric``: on held-out
    training examples, ``tasks.holdout``), else the primary dev metric. A stage must also keep
    ``guard_retention`` (default ``min_retention``) of the teacher's value of each of
    ``record.info.guard_metrics`` (the embedding task's nDCG@10 on held-out passages) that the
    teacher has. Under ``fastest``, stages within ``speed_tie`` of the fastest's throughput count
    as equally fast (two measurements of one speed differ by a few percent), and the smallest on
    disk of them is chosen: a runtime form several times smaller than its parent and as fast, say,
    rather than the parent by a reading a little higher."""
    students = [s for s in record.stages if s.kind is not StageKind.TEACHER]
    if not students:
        return record.teacher, "no students: the teacher"
    metric = record.info.selection_metric or record.metric
    on = (f" on {record.info.holdout} held-out training examples" if record.info.selection_metric
          and record.info.holdout else "")
    guards = [g for g in record.info.guard_metrics or [] if record.teacher is not None
              and primary(record, record.teacher, g) is not None]
    guard_share = min_retention if guard_retention is None else guard_retention
    if guards:
        share = "" if guard_share == min_retention else f"{guard_share:.0%} "
        on += f" and {share}of its {', '.join(guards)}"
    shares = {metric: min_retention} | {g: guard_share for g in guards}
    keep = [s for s in students if record.teacher is not None and all(
        (ratio(primary(record, s, m), primary(record, record.teacher, m)) or 0.0) >= share
        for m, share in shares.items())]
    if not keep:
        return best_student(record, metric), (f"no stage kept {min_retention:.0%} of the teacher's "
                                              f"{record.metric}{on}: the most accurate one")
    key = {"fastest": lambda s: s.throughput_sent_per_s, "smallest": lambda s: -s.disk_bytes,
           "most_accurate": lambda s: primary(record, s, metric) or 0.0}[rule]
    pick = max(keep, key=key)
    why = (f"{RULES[rule]} of the {len(keep)} stage(s) keeping >= {min_retention:.0%} of the teacher's "
           f"{record.metric}{on}")
    if rule == "fastest" and speed_tie > 0:
        tied = [s for s in keep if s.throughput_sent_per_s >= (1 - speed_tie) * pick.throughput_sent_per_s]
        smallest = min(tied, key=lambda s: (s.disk_bytes, -s.throughput_sent_per_s))
        if smallest is not pick:
            why += (f"; {smallest.name} is {pick.disk_bytes / smallest.disk_bytes:.1f}x smaller than {pick.name} "
                    f"and within {speed_tie:.0%} of its throughput, so the smaller")
            pick = smallest
    return pick, why


def place_final(record: RunRecord, run_dir: Path, final: FinalSpec) -> StageRecord | None:
    """Copy the stage ``final``'s rule picks to ``run_dir/model`` (replacing what is there) and
    record its name and the reason in ``record.info`` -> the stage, or None when no stage has a
    saved model dir."""
    chosen, why = select_final(record, final.rule, final.min_retention, final.guard_retention, final.speed_tie)
    if chosen is None or not chosen.model_dir:
        return None
    dst = run_dir / "model"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(run_dir / chosen.model_dir, dst)
    parent = next((s for s in record.stages if s.name == chosen.parent), None)
    if parent is not None and parent.model_dir:
        add_float_weights(dst, run_dir / parent.model_dir)
    record.info.final_model, record.info.final_rule = chosen.name, why
    return chosen


#: The file sentence-transformers' default (PyTorch) backend reads a Transformer module's weights from.
FLOAT_WEIGHTS = "model.safetensors"


def add_float_weights(model_dir: Path, parent_dir: Path) -> bool:
    """Beside an embedding model's runtime graph in ``model_dir`` (ONNX or OpenVINO, with the
    sentence-transformers files), put the float weights of its PyTorch parent (``parent_dir``, the
    stage the runtime step started from), as sentence-transformers' own model folders keep
    ``model.safetensors`` beside ``onnx/`` graphs: ``SentenceTransformer(model_dir)`` then loads the
    parent's float weights, while tinyplm (``load_embedder``) runs the graph the run measured. Only
    when both are laid out for sentence-transformers at the root and the parent is a plain
    ``transformers`` shape (no per-layer widths, which ``from_pretrained`` cannot build) -> whether
    the weights were added."""
    from tinyplm.models.shape import SHAPE_KEY

    weights, config = parent_dir / FLOAT_WEIGHTS, parent_dir / "config.json"
    if not ((model_dir / "modules.json").is_file() and (parent_dir / "modules.json").is_file() and weights.is_file()
            and config.is_file()) or (model_dir / FLOAT_WEIGHTS).exists():
        return False
    if SHAPE_KEY in json.loads(config.read_text(encoding="utf-8")):
        return False
    shutil.copyfile(weights, model_dir / FLOAT_WEIGHTS)
    return True
