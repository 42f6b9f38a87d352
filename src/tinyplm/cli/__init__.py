"""The ``tinyplm`` command line: the app and its shared options (``cli.app``) and one module per
command group. Importing this package registers every command, in the order ``--help`` lists
them; ``main`` is the entry point."""

# The import order is the order of the commands in --help.
# isort: off
from tinyplm.cli import run, measure, analysis, prep, pretrain, deploy, serve, sweep  # noqa: F401
# isort: on
from tinyplm.cli.app import app, main

__all__ = ["app", "main"]
