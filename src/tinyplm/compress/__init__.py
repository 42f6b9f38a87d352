"""Compression steps (pruning, ...): each changes a model in place and says what it did."""

from tinyplm.compress.steps import REGISTRY, CompressContext, apply_step, sparsifier

__all__ = ["REGISTRY", "CompressContext", "apply_step", "sparsifier"]
