"""Training: the one loop (fine-tuning, distillation, pre-training and head fitting alike), its
checkpoints, LR schedule, progress bar and JSONL log, and token masking."""

from tinyplm.train.loop import StageIO, TrainResult, epoch_batches, get_accelerator, lr_factor, train

__all__ = ["StageIO", "TrainResult", "epoch_batches", "get_accelerator", "lr_factor", "train"]
