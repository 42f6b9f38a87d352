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

#: Names read from :mod:`tinyplm.models.student` when first asked for (PEP 562): it imports
#: transformers' model classes, seconds that ``predict`` and ``serve`` of a saved model never need.
_STUDENT = ("build_student", "copy_teacher_layers", "shape_of", "student_config")


def __getattr__(name: str):
    if name in _STUDENT:
        from tinyplm.models import student

        value = getattr(student, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "build_student", "check_model_dir", "copy_teacher_layers", "fingerprint",
    "is_complete", "load_classifier", "load_tokenizer", "quiet_transformers", "resolve_model_dir",
    "save_model", "shape_of", "student_config",
]
