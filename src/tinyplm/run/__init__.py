"""The pipeline: preflight, teacher, students, compression, measurement, report. The only place
that knows the order of the stages (``pipeline.run``)."""

from tinyplm.run.pipeline import bench, load_task, measure_all, measure_models, preflight, run, run_dir_of

__all__ = ["bench", "load_task", "measure_all", "measure_models", "preflight", "run", "run_dir_of"]
