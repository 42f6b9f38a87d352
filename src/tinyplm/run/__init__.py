"""The pipeline: preflight, teacher, students, compression, measurement, report. The only place
that knows the order of the stages (``pipeline.run``)."""

from tinyplm.run.measure import bench, measure_stages
from tinyplm.run.pipeline import run, run_dir_of, run_or_reuse
from tinyplm.run.preflight import Preflight, load_task, preflight

__all__ = ["Preflight", "bench", "load_task", "measure_stages", "preflight", "run", "run_dir_of", "run_or_reuse"]
