"""Compression steps (pruning, ...): each changes a model in place and says what it did."""

from tinyplm.compress.steps import REGISTRY, CompressContext, Controller, apply_step, controller, sparsifier

__all__ = ["REGISTRY", "CompressContext", "Controller", "apply_step", "controller", "sparsifier"]
