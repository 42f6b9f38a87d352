"""Evaluation: task metrics (``metrics``), and size and speed measured on saved models."""
