"""``predict`` and ``serve`` of a saved model start without the modules only training and
evaluation need: scipy and scikit-learn (the metrics), transformers' model classes (students).
Each took seconds of every start-up (found by a probe predicting three lines with an ONNX model)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy.stats", "sklearn", "transformers.modeling_utils", "tinyplm.evaluate.metrics", "tinyplm.models.student")


def test_the_prediction_path_imports_none_of_the_training_modules() -> None:
    code = ("import json, sys\n"
            "import tinyplm.cli.predict, tinyplm.cli.serve, tinyplm.predict.predict, tinyplm.serve.app\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_the_lazy_names_of_the_models_package_still_resolve() -> None:
    import tinyplm.models as models
    from tinyplm.models import build_student, shape_of  # noqa: F401  (from-import goes through __getattr__)
    from tinyplm.models.student import student_config

    assert models.student_config is student_config
    assert set(models.__all__) <= set(dir(models)) | {"build_student", "copy_teacher_layers", "shape_of",
                                                       "student_config"}
