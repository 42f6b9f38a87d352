"""Deployment: ONNX export of a run's models with a parity check against PyTorch (``export``); using a
model: the one inference path (``predictor``), prediction on files (``predict``) and the HTTP service
(``app``, ``batcher``, ``server``)."""

from tinyplm.serve.export import MIN_AGREEMENT, Parity, export_run

__all__ = ["MIN_AGREEMENT", "Parity", "export_run"]
