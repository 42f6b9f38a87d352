"""The recipe's ``tracking`` section: where a run's parameters, curves, results and files are sent.

Off by default. ``mlflow: true`` (or ``tinyplm run --track``) sends the run to MLflow at its default
place (``tinyplm.track.defaults``: ``$MLFLOW_TRACKING_URI`` when set, else the local file store
``mlruns/`` beside the run dir); ``mlflow: URI`` names the tracking server or store. ``tensorboard:
true`` writes TensorBoard event files to ``RUN_DIR/tensorboard``; ``tensorboard: DIR`` elsewhere.

The section says how a run is *observed*, not what it computes: it is left out of the resolved
recipe (``config.load.dump_resolved``), so turning tracking on for a ``--resume`` continues the run
that is there, and a tracked run's dir is the same as an untracked one's.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from tinyplm.config.base import Section


class TrackingSpec(Section):
    """Experiment tracking of one run (see the module docstring)."""

    mlflow: bool | str = Field(False, description="true: MLflow at its default place ($MLFLOW_TRACKING_URI, else "
                               "the file store mlruns/ beside the run dir); or a tracking URI (http://..., "
                               "file:..., sqlite:///...) or a folder for a file store; false: off")
    tensorboard: bool | str = Field(False, description="true: TensorBoard event files in RUN_DIR/tensorboard; or "
                                    "a folder; false: off")
    experiment: str = Field("tinyplm", min_length=1, description="the MLflow experiment the run is filed under "
                            "(made when missing)")

    @field_validator("mlflow", "tensorboard", mode="before")
    @classmethod
    def _switch_or_place(cls, value: object) -> object:
        """Only true, false (null: false) or a non-empty string (one message, not one per member of
        the union)."""
        if value is None:
            return False
        if not isinstance(value, bool | str) or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"expected true, false or a URI / folder, got {value!r}")
        return value

    @property
    def enabled(self) -> bool:
        """True when any backend is on."""
        return bool(self.mlflow) or bool(self.tensorboard)

    def with_mlflow(self) -> TrackingSpec:
        """This section with MLflow on (``--track``): at its default place, unless a URI is already set."""
        return self if self.mlflow else self.model_copy(update={"mlflow": True})
