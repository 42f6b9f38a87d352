"""Hugging Face-style model cards (README.md with YAML front matter) for a saved stage model."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import yaml

from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.files import write_atomic
from tinyplm.models.load_route import Loader, LoadRoute, load_route, route_of_config
from tinyplm.models.openvino import WIDENED
from tinyplm.models.shape import SHAPE_KEY
from tinyplm.report.html import fmt_shape, fmt_value
from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.summary import MEASUREMENT_NOTE
from tinyplm.report.tables import (
    TEACHER,
    fmt_metric,
    fmt_num,
    fmt_retention,
    fmt_seconds,
    metric_names,
    stage_row,
)

GLUE = {"cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"}
#: The embedding task's name (``tasks.embedding_task``): a sentence-transformers model, not a classifier.
EMBEDDING = "embedding"


def task_kind(task: str) -> tuple[str, str]:
    """(pipeline tag, transformers Auto class) for a task name."""
    t = task.lower()
    if t == EMBEDDING:
        return "sentence-similarity", "SentenceTransformer"
    if t.startswith("squad"):
        return "question-answering", "AutoModelForQuestionAnswering"
    if t.startswith("conll"):
        return "token-classification", "AutoModelForTokenClassification"
    return "text-classification", "AutoModelForSequenceClassification"


def _dataset(task: str) -> tuple[str, str | None]:
    """(hub dataset id, config) for known tasks; the task name itself otherwise."""
    t = task.lower()
    if t in GLUE:
        return "nyu-mll/glue", t
    if t.startswith("squad"):
        return ("rajpurkar/squad_v2" if "v2" in t else "rajpurkar/squad"), None
    if t.startswith("conll"):
        return "eriktks/conll2003", None
    return task, None


def front_matter(record: RunRecord, stage: StageRecord) -> str:
    """The YAML front matter block (between ``---`` lines), with a model-index of dev results."""
    pipeline, _ = task_kind(record.task)
    dataset, config = _dataset(record.task)
    tags = list(dict.fromkeys(["tinyplm", "distillation", pipeline]))
    metrics = [{"type": name, "value": round(float(value), 6), "name": f"dev {name}"}
               for name, value in stage.metrics.items() if value is not None and math.isfinite(value)]
    ds: dict[str, Any] = {"name": record.task, "type": dataset, "split": "validation"}
    if config:
        ds["config"] = config
    meta: dict[str, Any] = {
        "library_name": "sentence-transformers" if record.task.lower() == EMBEDDING else "transformers",
        "pipeline_tag": pipeline,
        "language": ["en"],
        "tags": tags,
        "datasets": [dataset],
        "metrics": list(dict.fromkeys(m.removesuffix("_mm") for m in metric_names(record))),
        "model-index": [{"name": stage.name, "results": [
            {"task": {"type": pipeline}, "dataset": ds, "metrics": metrics}]}],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _description(record: RunRecord, stage: StageRecord) -> list[str]:
    """Bullets of the model description section."""
    teacher = record.teacher
    lines = []
    if stage.shape:
        lines.append(f"- **Shape:** {fmt_shape(stage.shape)}")
    lines.append(f"- **Parameters:** {fmt_num(stage.params / 1e6, 2)} M "
                 f"({fmt_num(stage.params_no_embeddings / 1e6, 2)} M without embeddings)")
    lines.append(f"- **Size on disk:** {fmt_num(stage.disk_bytes / 1e6, 1)} MB (weights + config)")
    if stage.name == TEACHER:
        lines.append("- **Role:** the run's teacher, the reference the students are compared with")
    elif teacher is not None:
        lines.append(f"- **Distilled from:** the run's teacher (fine-tuned on {record.task}, "
                     f"{fmt_num(teacher.params / 1e6, 2)} M parameters)")
    if stage.info.init:
        lines.append(f"- **Initialisation:** {html.escape(stage.info.init, quote=False)}")  # a path, labels: as text
    return lines


def _openvino_snippet(widen: bool) -> list[str]:
    """How to load an OpenVINO model dir; ``widen``: its weights are stored in int8 and folded to
    float once before compiling, as tinyplm does (``tinyplm.models.openvino``)."""
    compile_lines = [
        "core = ov.Core()",
        'graph = core.read_model(f"{model_dir}/model.xml")',
        "# its weights are stored in int8: widen them to float once, or every call widens them",
        "manager = Manager()",
        "manager.register_pass(ConstantFolding())",
        "manager.run_passes(graph)",
        'model = core.compile_model(graph, "CPU")',
    ] if widen else ['model = ov.Core().compile_model(f"{model_dir}/model.xml", "CPU")']
    return [
        "```python",
        "import openvino as ov",
        *(["from openvino.passes import ConstantFolding, Manager"] if widen else []),
        "from transformers import AutoTokenizer",
        "",
        'model_dir = "path/to/this/folder"  # the folder holding this README',
        "tokenizer = AutoTokenizer.from_pretrained(model_dir)",
        *compile_lines,
        'inputs = tokenizer(["an example sentence"], return_tensors="np", truncation=True)',
        "logits = model({k: v.astype('int64') for k, v in inputs.items()})[0]",
        "```",
        "",
        "or `tinyplm.models.load_classifier(model_dir, labels, is_regression=False)`, which compiles it in the "
        "precision recorded in config.json.",
    ]


_ONNX = [
    "```python",
    "import onnxruntime as ort",
    "from transformers import AutoTokenizer",
    "",
    'model_dir = "path/to/this/folder"  # the folder holding this README',
    "tokenizer = AutoTokenizer.from_pretrained(model_dir)",
    'session = ort.InferenceSession(f"{model_dir}/model.onnx", providers=["CPUExecutionProvider"])',
    'inputs = tokenizer(["an example sentence"], return_tensors="np", truncation=True)',
    'logits = session.run(["logits"], {k: v.astype("int64") for k, v in inputs.items()})[0]',
    "```",
]


_EMBEDDING = [
    "A sentence-embedding model in the sentence-transformers layout. When this folder holds a runtime "
    "graph (`model.onnx`, or OpenVINO's `model.xml`), tinyplm runs that graph, as it was measured; "
    "sentence-transformers loads the float weights kept beside it (`model.safetensors`), whose vectors "
    "are the graph's within the mean cosine the run recorded:",
    "",
    "```python",
    "from sentence_transformers import SentenceTransformer",
    "",
    'model = SentenceTransformer("path/to/this/folder")  # the folder holding this README',
    'vectors = model.encode(["an example sentence", "another one"])',
    "",
    "from tinyplm.models.embedder import load_embedder  # the form the run measured",
    "",
    'vectors = load_embedder("path/to/this/folder").embed(["an example sentence", "another one"])',
    "```",
]


def _stage_route(stage: StageRecord | None) -> LoadRoute:
    """The load route a stage record implies, for a card rendered without its model dir."""
    if stage is None:
        return LoadRoute(Loader.TRANSFORMERS)
    step, shape = stage.compress_step or "", stage.shape or {}
    if stage.runtime == "openvino":
        return LoadRoute(Loader.OPENVINO)
    if step.startswith("onnx") or stage.runtime == "onnxruntime":
        return LoadRoute(Loader.ONNXRUNTIME)
    if "heads_per_layer" in shape:
        return route_of_config({SHAPE_KEY: {"heads": shape["heads_per_layer"], "ffn": shape.get("ffn_per_layer", [])}})
    return LoadRoute(Loader.TRANSFORMERS)


def _usage(record: RunRecord, stage: StageRecord | None = None, route: LoadRoute | None = None) -> list[str]:
    """The intended-use paragraph and a loading snippet that works for this model's format
    (``route``: how its saved dir loads, :func:`~tinyplm.models.load_route.load_route`)."""
    pipeline, auto = task_kind(record.task)
    intro = [
        f"A compact {pipeline} model for the **{record.task}** task, meant for fast CPU inference "
        "where the teacher is too slow or too large. Use it on inputs like the task's own data.",
        "",
    ]
    if record.task.lower() == EMBEDDING:
        return [*intro, *_EMBEDDING]
    route = route or _stage_route(stage)
    if route.loader == Loader.OPENVINO:
        precision = f", {stage.precision}" if stage is not None and stage.precision else ""
        widen = stage is not None and WIDENED in (stage.info.runtime_detail or "")
        return [*intro, f"An OpenVINO model (`model.xml` + `model.bin`{precision}), run by OpenVINO's "
                "CPU plugin:", "", *_openvino_snippet(widen)]
    if route.loader == Loader.ONNXRUNTIME:
        return [*intro, "An ONNX Runtime model (`model.onnx`, int8), loaded without PyTorch:", "", *_ONNX]
    if route.loader == Loader.TINYPLM:
        return intro + [
            f"Plain transformers cannot build this model: {route.why}. tinyplm rebuilds it when loading "
            "(or use an exported ONNX/OpenVINO copy, which loads in its runtime alone):",
            "",
            "```python",
            "from pathlib import Path",
            "from transformers import AutoConfig",
            "from tinyplm.models import load_classifier",
            "",
            'model_dir = Path("path/to/this/folder")  # the folder holding this README',
            "labels = tuple(AutoConfig.from_pretrained(model_dir).id2label.values())",
            "model, tokenizer = load_classifier(model_dir, labels, "
            f"is_regression={record.metric in ('pearson', 'spearman', 'spearmanr', 'pearsonr')})",
            'inputs = tokenizer(["an example sentence"], return_tensors="pt", truncation=True)',
            "logits = model(**inputs).logits",
            "```",
        ]
    return intro + [
        "```python",
        f"from transformers import {auto}, AutoTokenizer",
        "",
        'model_dir = "path/to/this/folder"  # the folder holding this README',
        "tokenizer = AutoTokenizer.from_pretrained(model_dir)",
        f"model = {auto}.from_pretrained(model_dir)",
        'inputs = tokenizer(["an example sentence"], return_tensors="pt", truncation=True)',
        "logits = model(**inputs).logits",
        "```",
    ]


def _results(record: RunRecord, stage: StageRecord) -> list[str]:
    """Results and speed tables of this model next to the teacher."""
    names = metric_names(record)
    stages = [s for s in (record.teacher, stage) if s is not None]
    stages = list({s.name: s for s in stages}.values())
    rows = [stage_row(record, s) for s in stages]
    res = ["| Model | " + " | ".join(names) + " | Retention | Params (M) | Size (MB) |",
           "|:---|" + "---:|" * (len(names) + 3)]
    speed = [f"| Model | Runtime | p50 ms (b1) | p90 ms (b1) | Sent/s (b{stage.throughput_batch}) | × teacher |",
             "|:---|:---|---:|---:|---:|---:|"]
    for row in rows:
        name = row.name.replace("|", "\\|")
        metrics = " | ".join(fmt_metric(row.metrics.get(m)) for m in names)
        res.append(f"| {name} | {metrics} | {fmt_retention(row.retention)} | "
                   f"{fmt_num(row.params_m, 2)} | {fmt_num(row.size_mb, 1)} |")
        speed.append(f"| {name} | {row.runtime} {row.precision} | {fmt_num(row.latency_p50_ms, 2)} | "
                     f"{fmt_num(row.latency_p90_ms, 2)} | {fmt_num(row.throughput, 1)} | "
                     f"{fmt_num(row.speedup, 2, '×')} |")
    machine = record.info.machine.to_dict() if record.info.machine else {}
    where = [f"- **{k}:** {fmt_value(v)}" for k, v in machine.items()]
    if record.info.precision is not None:
        where.append(f"- **precision:** {fmt_value(record.info.precision.to_dict())}")
    return ["## Results (dev split)", "", *res, "", "## Speed", "", *speed, "", MEASUREMENT_NOTE,
            "", "Measured on:" if where else "The machine was not recorded.", "", *where]


def _training(stage: StageRecord) -> list[str]:
    """Bullets of the training that made the stage (its last training stage): objective terms,
    steps, budget, time."""
    last = stage.info.training[-1] if stage.info.training else None
    if last is None:
        return ["No training details were recorded for this model."]
    lines = [f"- **objective {k}:** {fmt_value(v)}" for k, v in last.objective.items()]
    if last.steps is not None:
        lines.append(f"- **steps:** {last.steps}")
    if last.budget_minutes is not None:
        lines.append(f"- **budget:** {fmt_value(last.budget_minutes)} minutes")
    if last.train_seconds is not None:
        lines.append(f"- **training time:** {fmt_seconds(last.train_seconds)}")
    return lines or ["No training details were recorded for this model."]


def render_model_card(record: RunRecord, stage_name: str, route: LoadRoute | None = None) -> str:
    """The README.md text of a model card for stage ``stage_name`` of ``record`` (``route``: how
    its saved dir loads; without it, what the stage record implies).

    Raises :class:`TinyplmError` when the record has no such stage.
    """
    stage = record.stage(stage_name)
    if stage is None:
        names = [s.name for s in record.stages]
        raise TinyplmError(f"no stage named '{stage_name}' in the run record (stages: {names})"
                           + did_you_mean(stage_name, names))
    value = fmt_metric(stage.metrics.get(record.metric))
    how = "as the run's teacher" if stage.name == TEACHER else "by knowledge distillation"
    if stage.compress_step:
        how = f"by distillation and compression (last step: `{stage.compress_step}`)"
    parts = [
        front_matter(record, stage),
        f"# {stage.name}",
        "",
        f"A model for the **{record.task}** task, made with tinyplm {how} "
        f"({record.metric} {value} on the dev split).",
        "",
        "## Model description", "", *_description(record, stage), "",
        "## Intended use and how to load it", "", *_usage(record, stage, route), "",
        *_results(record, stage), "",
        "## Training details", "", *_training(stage), "",
        "## Limitations",
        "",
        "- All metrics are measured on the task's dev split only; there is no held-out test score.",
        "- Trained and evaluated on English data only.",
        "- CPU latency and throughput depend on the machine, thread count and library versions;",
        "  compare models measured on the same machine in the same run.",
        "- A distilled student can inherit the teacher's biases and errors.",
        "",
    ]
    return "\n".join(parts)


def write_model_card(model_dir: Path, record: RunRecord, stage_name: str) -> Path:
    """Write the card of ``stage_name`` to ``model_dir/README.md`` atomically; returns the path.

    Raises :class:`TinyplmError` when ``model_dir`` is not a directory or the stage is unknown.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise TinyplmError(f"{model_dir}: not a model directory; expected a saved model folder")
    route = load_route(model_dir) if (model_dir / "config.json").is_file() else None
    return write_atomic(model_dir / "README.md", render_model_card(record, stage_name, route))
