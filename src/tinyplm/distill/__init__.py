"""Distillation: pure loss functions, the teacher-logit cache and the one training loop."""

from tinyplm.distill.cache import cached_teacher_logits, default_cache_dir
from tinyplm.distill.losses import PredictionObjective, hard_label_loss, regression_kd, soft_target_kd
from tinyplm.distill.train import StageIO, TrainResult, epoch_batches, get_accelerator, lr_factor, train

__all__ = [
    "PredictionObjective", "StageIO", "TrainResult", "cached_teacher_logits", "default_cache_dir",
    "epoch_batches", "get_accelerator", "hard_label_loss", "lr_factor", "regression_kd",
    "soft_target_kd", "train",
]
