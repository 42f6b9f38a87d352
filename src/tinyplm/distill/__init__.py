"""Distillation: features, pure loss functions, layer matching, objectives, augmentation and the
teacher-logit cache. Training itself is the one loop in ``tinyplm.train``."""

from tinyplm.distill.cache import cached_teacher_logits, default_cache_dir
from tinyplm.distill.kd import hard_label_loss, regression_kd, soft_target_kd
from tinyplm.distill.losses import PredictionObjective

__all__ = [
    "PredictionObjective", "cached_teacher_logits", "default_cache_dir", "hard_label_loss", "regression_kd",
    "soft_target_kd",
]
