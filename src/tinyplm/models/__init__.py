"""Models: load/check HF checkpoints (teachers), build students, save and fingerprint.

Code reaches into a model (its encoder, layers, each Linear by role, heads) only through
:mod:`tinyplm.models.roles`, one table entry per encoder family."""

from tinyplm.models.io import fingerprint, is_complete, save_model
from tinyplm.models.loading import (
    check_model_dir,
    load_classifier,
    load_tokenizer,
    quiet_transformers,
    resolve_model_dir,
)
from tinyplm.models.student import build_student, copy_teacher_layers, shape_of, student_config

__all__ = [
    "build_student", "check_model_dir", "copy_teacher_layers", "fingerprint",
    "is_complete", "load_classifier", "load_tokenizer", "quiet_transformers", "resolve_model_dir",
    "save_model", "shape_of", "student_config",
]
