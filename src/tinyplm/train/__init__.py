"""Training: the one loop (fine-tuning, distillation, pre-training and head fitting alike), the
:class:`Objective` protocol every kind of training implements, checkpoints, the LR schedule, the
progress bar and JSONL log, and token masking."""

from tinyplm.train.accelerator import get_accelerator
from tinyplm.train.loop import StageIO, TrainResult, train
from tinyplm.train.objective import Batch, Objective, supervised_batch
from tinyplm.train.schedule import epoch_batches, lr_factor

__all__ = [
    "Batch", "Objective", "StageIO", "TrainResult", "epoch_batches", "get_accelerator", "lr_factor",
    "supervised_batch", "train",
]
