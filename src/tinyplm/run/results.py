"""The seams between the run's stages: a trained stage, and a stage ready to be measured; what the
report keeps of a training stage (:func:`train_info`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import nn

from tinyplm.config.schema import TrainSpec
from tinyplm.models.infer import precision_name, use_bf16
from tinyplm.report.info import StageInfo, TrainingInfo
from tinyplm.report.records import StageKind
from tinyplm.tasks.encoding import Encoded
from tinyplm.train import TrainResult

if TYPE_CHECKING:
    from tinyplm.run.inputs import RunInputs


@dataclass
class TrainedStage:
    """One training stage's outcome: the model to continue with, the model to save (a masked-LM
    stage saves the student *with* its MLM head) and what the report shows about the training."""

    model: nn.Module
    saved: nn.Module
    info: TrainingInfo


@dataclass
class StageResult:
    """A model of the run, saved and ready to be measured and reported.

    ``model_dir`` is relative to the run dir. ``parent`` is the reported stage it was made from
    (compressed stages; a compress-only student's source). ``evals`` are its own encodings of the
    eval splits when it has its own tokenizer (a trimmed vocabulary), else None. ``info``: how it
    was made (its training, its compress step), for the report.
    """

    name: str
    model: nn.Module
    model_dir: str
    kind: StageKind
    shape: dict[str, Any]
    parent: str | None = None
    compress_step: str | None = None
    info: StageInfo = field(default_factory=StageInfo)
    evals: dict[str, Encoded] | None = None


@dataclass
class StudentOutcome:
    """A student after its training stages: the model its compress steps start from, its
    :class:`StageResult` (None for a compress-only student, which is not reported on its own),
    the reported stage its first compress step counts as its parent, and the run's inputs as the
    student reads them (``run.inputs.RunInputs``: in its own token ids when it has its own
    tokenizer), which its compress steps go on with."""

    model: nn.Module
    result: StageResult | None
    parent: str | None
    inputs: RunInputs | None = None


def train_info(result: TrainResult, spec: TrainSpec, objective: dict[str, Any],
               method: bool = True) -> TrainingInfo:
    """What the report shows about one training stage: its non-zero objective terms, its
    fine-tuning method (unless ``method`` is False: a classic student has none) and what it cost
    (trainable parameters, peak RSS, seconds)."""
    return TrainingInfo(
        **result.resources(), finetune_method=spec.method.value if method else None,
        steps=result.steps, stopped_by=result.stopped_by,
        best_step=result.best_step, budget_minutes=spec.budget_minutes,
        precision=precision_name(use_bf16(spec.precision)), eval_precision=spec.eval_precision,
        objective={k: v for k, v in objective.items() if v not in (0, 0.0, None)},
        history=result.history,
    )
