"""Recipes: typed sections (pydantic) and ``load_recipe(path, overrides) -> RunConfig``."""

from tinyplm.config.load import apply_override, dump_resolved, load_recipe, validate_recipe
from tinyplm.config.schema import (
    AugmentSpec,
    CorpusSpec,
    MeasureSpec,
    ObjectiveSpec,
    RunConfig,
    ShapeSpec,
    StageSpec,
    StudentSpec,
    TaskSpec,
    TeacherSpec,
    TrainSpec,
    student_name,
)
from tinyplm.config.tracking import TrackingSpec

__all__ = [
    "AugmentSpec", "CorpusSpec", "StageSpec",
    "MeasureSpec", "ObjectiveSpec", "RunConfig", "ShapeSpec", "StudentSpec", "TaskSpec",
    "TeacherSpec", "TrackingSpec", "TrainSpec", "apply_override", "dump_resolved", "load_recipe",
    "student_name", "validate_recipe",
]
