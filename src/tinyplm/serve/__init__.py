"""Deployment: ONNX export of a run's models with a parity check against PyTorch."""

from tinyplm.serve.export import MIN_AGREEMENT, Parity, export_run

__all__ = ["MIN_AGREEMENT", "Parity", "export_run"]
