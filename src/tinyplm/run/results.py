"""The seams between the run's stages: a trained stage, and a stage ready to be measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import nn

from tinyplm.report.records import StageKind
from tinyplm.tasks.encoding import Encoded

if TYPE_CHECKING:
    from tinyplm.run.inputs import RunInputs


@dataclass
class TrainedStage:
    """One training stage's outcome: the model to continue with, the model to save (a masked-LM
    stage saves the student *with* its MLM head) and what the report shows about the training."""

    model: nn.Module
    saved: nn.Module
    info: dict[str, Any]


@dataclass
class StageResult:
    """A model of the run, saved and ready to be measured and reported.

    ``model_dir`` is relative to the run dir. ``parent`` is the reported stage it was made from
    (compressed stages; a compress-only student's source). ``evals`` are its own encodings of the
    eval splits when it has its own tokenizer (a trimmed vocabulary), else None.
    """

    name: str
    model: nn.Module
    model_dir: str
    kind: StageKind
    shape: dict[str, Any]
    parent: str | None = None
    compress_step: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
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
