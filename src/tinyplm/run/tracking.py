"""The run's tracking (recipe ``tracking``, ``--track``): opened once the run dir is claimed, fed
every ``logs/train.jsonl`` record as training writes it, given the finished record, and closed
with how the run ended. Off (the default), it is a :class:`~tinyplm.track.Tracker` that does
nothing and neither ``mlflow`` nor ``tensorboardX`` is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import yaml

from tinyplm.config.load import dump_resolved
from tinyplm.config.schema import RunConfig
from tinyplm.errors import Interrupted
from tinyplm.run.inputs import RunPaths
from tinyplm.track import RunStatus, Tracker, flatten_params, open_tracker
from tinyplm.train import get_accelerator
from tinyplm.train.progress import observe_log


def recipe_params(cfg: RunConfig) -> dict[str, str]:
    """The resolved recipe (as written to ``config.resolved.yaml``) as flat ``dotted.key: text`` parameters."""
    return flatten_params(yaml.safe_load(dump_resolved(cfg)))


@contextmanager
def tracked(cfg: RunConfig, paths: RunPaths, resumed: bool, parent_run_id: str | None = None) -> Iterator[Tracker]:
    """Track the run in ``paths`` for the duration of the block (on the main process; elsewhere,
    or with tracking off, a tracker that does nothing).

    ``resumed``: the run dir held this run already (its MLflow run is continued). The tracked run
    ends ``FINISHED`` when the block does, ``KILLED`` on SIGINT/SIGTERM (``Interrupted``) or
    Ctrl-C, ``FAILED`` on any other error, which goes on up. Raises ``TrackingError`` when a store
    cannot be opened.
    """
    if not (cfg.tracking.enabled and get_accelerator().is_main_process):
        yield Tracker()
        return
    tracker = open_tracker(cfg.tracking, paths.root, run_name=cfg.name, params=recipe_params(cfg),
                           resume=resumed, parent_run_id=parent_run_id)
    try:
        with observe_log(paths.log, tracker.on_event):
            yield tracker
    except (Interrupted, KeyboardInterrupt):
        tracker.close(RunStatus.KILLED)
        raise
    except BaseException:
        tracker.close(RunStatus.FAILED)
        raise
    tracker.close(RunStatus.FINISHED)
