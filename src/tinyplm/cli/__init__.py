"""The ``tinyplm`` command line: the app and its shared options (``cli.app``) and one module per
command group. Importing this package registers every command; ``main`` is the entry point."""

from tinyplm.cli import deploy, measure, prep, pretrain, run  # noqa: F401  (each registers its commands)
from tinyplm.cli.app import app, main

__all__ = ["app", "main"]
