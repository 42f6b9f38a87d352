"""Training: the one loop (fine-tuning, distillation, pre-training and head fitting alike), the
:class:`Objective` protocol every kind of training implements, the prediction-layer objective
(hard labels and KD on the logits: fine-tuning, prediction-layer distillation, pruning importance),
checkpoints, the LR schedule, the progress bar and JSONL log, and token masking."""

from tinyplm.train.accelerator import get_accelerator
from tinyplm.train.loop import StageIO, TrainResult, train
from tinyplm.train.objective import Batch, Objective, supervised_batch
from tinyplm.train.prediction import PredictionObjective
from tinyplm.train.schedule import epoch_batches, lr_factor

__all__ = [
    "Batch", "Objective", "PredictionObjective", "StageIO", "TrainResult", "epoch_batches", "get_accelerator",
    "lr_factor", "supervised_batch", "train",
]
