"""Distillation: layer-wise losses, layer matching, the distillation objectives, augmentation and
the teacher-logit cache. The features it compares come from :mod:`tinyplm.models.features`; the
prediction-layer objective and its KD losses (:mod:`tinyplm.train.prediction`) live with the one
loop in ``tinyplm.train``, since fine-tuning and pruning importance use them too."""

from tinyplm.distill.cache import cached_teacher_logits, default_cache_dir

__all__ = ["cached_teacher_logits", "default_cache_dir"]
