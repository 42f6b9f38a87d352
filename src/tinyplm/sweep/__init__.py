"""Sweeps: a search space over a recipe's keys (``config.sweep.SweepSpace``), every trial an
ordinary run in its own run dir, run on Ray Tune on this machine or a cluster, and one table with
Pareto plots across the trials.

    job = SweepJob(Path("recipe.yaml"), load_recipe("space.yaml", schema=SweepSpace), Path("runs/sweeps/x"))
    rows, path = run_sweep(job)          # path: sweep.json beside summary.md and the Pareto plots
"""

from tinyplm.cluster import ClusterError
from tinyplm.sweep.table import TrialRow
from tinyplm.sweep.trial import TrialResult
from tinyplm.sweep.tuner import SweepJob, run_sweep, sweep_dir_of

__all__ = ["ClusterError", "SweepJob", "TrialResult", "TrialRow", "run_sweep", "sweep_dir_of"]
